"""Where to send questions when no endpoint is configured, found by the client that needs it.

Order: a local Ollama that answers within a moment, else the local model when
``nbchat[local]`` is installed (SmolLM2 served by llama.cpp on loopback, shared
by the machine's kernels, see :mod:`nbchat.llm.local`), else the bundled
offline demo model (the scripted server of :mod:`nbchat.testing`, on loopback).
Each is a :class:`Fallback` in :data:`FALLBACKS`, tried in that order; the
demo model is also the one asked for by name (``NBCHAT_BASE_URL=demo``).
The choice is made once per process and announced once, as a note
(:func:`nbchat.base._notices.notify`) with the line that connects a real model.
When the chosen server stops answering, :func:`rediscover` forgets it and looks
again, so a dead shared server costs one request's retry, not a kernel restart.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ..base._notices import notify
from ..base.config import (
    CONNECT_HINT,
    DEMO_MODEL,
    DEMO_URL,
    LOCAL_URL,
    OLLAMA_DEFAULT_URL,
    Settings,
)
from ..base.errors import ConfigError, LLMConnectError

__all__ = ["DISCOVERED", "FALLBACKS", "Endpoint", "Fallback", "find_fallback_endpoint", "forget",
           "locate", "rediscover", "reset_fallback_endpoint"]  # fmt: skip


@dataclass(frozen=True)
class Endpoint:
    """Where a fallback answers: its URL, provider, model (None: the server's), origin."""

    url: str
    provider: str
    model: str | None
    origin: str


@dataclass(frozen=True)
class Fallback:
    """One place questions can go when none is configured.

    ``find()`` gives its endpoint, starting it if need be, or None when it is not
    there; ``note`` (with ``{url}`` and ``{model}``) is announced the first time it
    is chosen; ``name``, when set, is the ``NBCHAT_BASE_URL`` that asks for it on
    purpose (then it is not announced).
    """

    origin: str
    find: Callable[[], Endpoint | None]
    note: str
    name: str | None = None


def _ollama() -> Endpoint | None:
    try:
        response = httpx.get(f"{OLLAMA_DEFAULT_URL}/api/tags", timeout=0.3, trust_env=False)
    except httpx.HTTPError:
        return None
    if response.status_code == 200 and "models" in response.text:
        return Endpoint(OLLAMA_DEFAULT_URL, "ollama", None, "ollama")
    return None


def _local() -> Endpoint | None:
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
        server = local.ensure_local_server()
    except LLMConnectError as exc:
        first_line = str(exc).splitlines()[0].removesuffix(" ends with:")
        notify(f"the local model could not start: {first_line}")
        return None
    return Endpoint(server.url, "openai", server.model, "local")


def _demo() -> Endpoint:
    from ..testing import demo_server

    return Endpoint(demo_server().url, "openai", DEMO_MODEL, "demo")


FALLBACKS: tuple[Fallback, ...] = (
    Fallback("ollama", _ollama, "no endpoint configured, so the local Ollama at {url} answers"),
    Fallback("local", _local, "no endpoint configured, so the small local model {model} "
             f"answers; {CONNECT_HINT}", name=LOCAL_URL),
    Fallback("demo", _demo, f"no endpoint configured, so the offline demo model answers; "
             f"{CONNECT_HINT}", name=DEMO_URL),
)  # fmt: skip
DISCOVERED = tuple(fallback.origin for fallback in FALLBACKS)  # Settings.origin of one of them
_NAMED = {fallback.name: fallback for fallback in FALLBACKS if fallback.name}

_lock = threading.Lock()
_chosen: Endpoint | None = None
_announced: set[str] = set()  # origins already announced in this process


def locate(settings: Settings) -> Settings:
    """``settings`` pointed at an endpoint: as configured, a fallback named, or the fallback."""
    named = _NAMED.get(settings.base_url)
    if named is not None:
        found = named.find()
        if found is not None:
            return _pointed(settings, found)
        raise ConfigError(f"the {named.origin} model was asked for by name, but it cannot start "
                          f"here; install it with pip install 'nbchat[local]', or connect "
                          f"another endpoint")  # fmt: skip
    if settings.base_url:
        return settings
    return find_fallback_endpoint(settings)


def rediscover(wanted: Settings, failed: Settings) -> Settings | None:
    """A new endpoint for ``wanted`` after ``failed`` stopped answering, or None.

    Only endpoints nbchat chose itself are looked for again; a configured URL
    that does not answer is the user's to fix.
    """
    if (wanted.base_url and wanted.base_url not in _NAMED) or failed.origin not in DISCOVERED:
        return None
    forget(failed.base_url)
    found = locate(wanted)
    return found if found.base_url != failed.base_url else None


def find_fallback_endpoint(settings: Settings) -> Settings:
    """``settings`` pointed at the fallback endpoint (found on first call, then reused)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen, fallback = _discover()
            if fallback.origin not in _announced:  # a server found again is not news
                _announced.add(fallback.origin)
                notify(fallback.note.format(url=_chosen.url, model=_chosen.model))
        chosen = _chosen
    return _pointed(settings, chosen)


def forget(url: str | None = None) -> None:
    """Forget the fallback choice (only if it is ``url``, when given), so the next look is new."""
    global _chosen
    with _lock:
        if url is None or (_chosen is not None and _chosen.url == url):
            _chosen = None


def reset_fallback_endpoint() -> None:
    """Forget the fallback choice, so the next :func:`find_fallback_endpoint` looks again.

    For tests, and for a session where Ollama or the local model appeared later;
    the next choice is announced again.
    """
    forget()
    _announced.clear()


def _discover() -> tuple[Endpoint, Fallback]:
    """The first fallback that answers, in :data:`FALLBACKS`' order (the last always does)."""
    for fallback in FALLBACKS:
        found = fallback.find()
        if found is not None:
            return found, fallback
    raise LLMConnectError("no fallback endpoint answers; set NBCHAT_BASE_URL to a model's URL")


def _pointed(settings: Settings, endpoint: Endpoint) -> Settings:
    return settings.with_(
        base_url=endpoint.url, provider=endpoint.provider,
        model=settings.model or endpoint.model, origin=endpoint.origin,
    )  # fmt: skip
