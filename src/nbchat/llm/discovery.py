"""Where to send questions when no endpoint is configured, found by the client that needs it.

Order: a local Ollama that answers within a moment, else the local model when
``nbchat[local]`` is installed (SmolLM2 served by llama.cpp on loopback, shared
by the machine's kernels, see :mod:`nbchat.llm.local`), else the bundled
offline demo model (the scripted server of :mod:`nbchat.testing`, on loopback).
The choice is made once per process and announced once, as a note
(:func:`nbchat.base._notices.notify`) with the line that connects a real model.
When the chosen server stops answering, :func:`rediscover` forgets it and looks
again, so a dead shared server costs one request's retry, not a kernel restart.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import httpx

from ..base._notices import notify
from ..base.config import CONNECT_HINT, DEMO_MODEL, DEMO_URL, OLLAMA_DEFAULT_URL, Settings
from ..base.errors import LLMConnectError

if TYPE_CHECKING:
    from .local import LocalServer

_lock = threading.Lock()
_chosen: tuple[str, str, str | None, str] | None = None  # (url, provider, model, origin)
_announced: set[str] = set()  # origins already announced in this process
DISCOVERED = ("ollama", "local", "demo")  # Settings.origin of an endpoint found here


def locate(settings: Settings) -> Settings:
    """``settings`` pointed at an endpoint: as configured, the demo model, or the fallback."""
    if settings.base_url == DEMO_URL:
        return demo_endpoint(settings)
    if settings.base_url:
        return settings
    return find_fallback_endpoint(settings)


def rediscover(wanted: Settings, failed: Settings) -> Settings | None:
    """A new endpoint for ``wanted`` after ``failed`` stopped answering, or None.

    Only endpoints nbchat chose itself are looked for again; a configured URL
    that does not answer is the user's to fix.
    """
    if wanted.base_url not in ("", DEMO_URL) or failed.origin not in DISCOVERED:
        return None
    forget(failed.base_url)
    found = locate(wanted)
    return found if found.base_url != failed.base_url else None


def find_fallback_endpoint(settings: Settings) -> Settings:
    """``settings`` pointed at the fallback endpoint (found on first call, then reused)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _discover()
            if _chosen[3] not in _announced:  # a server found again is not news
                _announced.add(_chosen[3])
                _announce(_chosen)
        url, provider, model, origin = _chosen
    return settings.with_(
        base_url=url, provider=provider, model=settings.model or model, origin=origin
    )


def demo_endpoint(settings: Settings) -> Settings:
    """``settings`` pointed at the offline demo model, asked for by name (not announced)."""
    from ..testing import demo_server

    return settings.with_(
        base_url=demo_server().url, provider="openai", model=settings.model or DEMO_MODEL,
        origin="demo",
    )  # fmt: skip


def forget(url: str | None = None) -> None:
    """Forget the fallback choice (only if it is ``url``, when given), so the next look is new."""
    global _chosen
    with _lock:
        if url is None or (_chosen is not None and _chosen[0] == url):
            _chosen = None


def reset_fallback_endpoint() -> None:
    """Forget the fallback choice, so the next :func:`find_fallback_endpoint` looks again.

    For tests, and for a session where Ollama or the local model appeared later;
    the next choice is announced again.
    """
    forget()
    _announced.clear()


def _discover() -> tuple[str, str, str | None, str]:
    if _ollama_answers(OLLAMA_DEFAULT_URL):
        return OLLAMA_DEFAULT_URL, "ollama", None, "ollama"
    local = _local_server()
    if local is not None:
        return local.url, "openai", local.model, "local"
    from ..testing import demo_server

    return demo_server().url, "openai", DEMO_MODEL, "demo"


def _local_server() -> LocalServer | None:
    """The local model's server when ``nbchat[local]`` is installed, else None.

    A server that fails to start is reported and skipped (the demo model still
    answers); a malformed ``NBCHAT_LOCAL_MODEL`` raises its ConfigError.
    """
    from ..base.policy import Policy
    from . import local

    if Policy.from_env().disable_local_model:
        return None
    if not local.local_available():
        if local.bundled_model_missing():
            notify(f"the local model's file is not installed; run {local.MODEL_INSTALL_HINT}")
        return None
    try:
        return local.ensure_local_server()
    except LLMConnectError as exc:
        first_line = str(exc).splitlines()[0].removesuffix(" ends with:")
        notify(f"the local model could not start: {first_line}")
        return None


def _ollama_answers(url: str) -> bool:
    try:
        response = httpx.get(f"{url}/api/tags", timeout=0.3, trust_env=False)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and "models" in response.text


def _announce(chosen: tuple[str, str, str | None, str]) -> None:
    url, _, model, origin = chosen
    if origin == "ollama":
        notify(f"no endpoint configured, so the local Ollama at {url} answers")
    elif origin == "local":
        notify(f"no endpoint configured, so the small local model {model} answers; {CONNECT_HINT}")
    else:
        notify(f"no endpoint configured, so the offline demo model answers; {CONNECT_HINT}")
