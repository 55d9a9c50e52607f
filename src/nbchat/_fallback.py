"""Where to send questions when no endpoint is configured, decided once per process.

Order: a local Ollama that answers within a moment, else the local model when
``nbchat[local]`` is installed (SmolLM2 served by llama.cpp on loopback, shared
by the machine's kernels, see :mod:`nbchat.llm.local`), else the bundled
offline demo model (the scripted server of :mod:`nbchat.testing`, on loopback).
The choice is announced once, on stderr, with the one line that connects a real
model.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING

import httpx

from .config import CONNECT_HINT, DEMO_MODEL, OLLAMA_DEFAULT_URL, Settings
from .errors import LLMConnectError

if TYPE_CHECKING:
    from .llm.local import LocalServer

_lock = threading.Lock()
_chosen: tuple[str, str, str | None, str] | None = None  # (url, provider, model, origin)


def find_fallback_endpoint(settings: Settings) -> Settings:
    """``settings`` pointed at the fallback endpoint (found on first call, then reused)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _discover()
            _announce(_chosen)
    url, provider, model, origin = _chosen
    return settings.with_(
        base_url=url, provider=provider, model=settings.model or model, origin=origin
    )


def demo_endpoint(settings: Settings) -> Settings:
    """``settings`` pointed at the offline demo model, asked for by name (not announced)."""
    from .testing import demo_server

    return settings.with_(
        base_url=demo_server().url, provider="openai", model=settings.model or DEMO_MODEL,
        origin="demo",
    )


def reset_fallback_endpoint() -> None:
    """Forget the fallback choice, so the next :func:`find_fallback_endpoint` looks again.

    For tests, and for a session where Ollama or the local model appeared later.
    """
    global _chosen
    with _lock:
        _chosen = None


def _discover() -> tuple[str, str, str | None, str]:
    if _ollama_answers(OLLAMA_DEFAULT_URL):
        return OLLAMA_DEFAULT_URL, "ollama", None, "ollama"
    local = _local_server()
    if local is not None:
        return local.url, "openai", local.model, "local"
    from .testing import demo_server

    return demo_server().url, "openai", DEMO_MODEL, "demo"


def _local_server() -> LocalServer | None:
    """The local model's server when ``nbchat[local]`` is installed, else None.

    A server that fails to start is reported and skipped (the demo model still
    answers); a malformed ``NBCHAT_LOCAL_MODEL`` raises its ConfigError.
    """
    from .llm import local
    from .policy import Policy

    if Policy.from_env().disable_local_model or not local.local_available():
        return None
    try:
        return local.ensure_local_server()
    except LLMConnectError as exc:
        print(f"nbchat: the local model could not start: {exc}", file=sys.stderr, flush=True)
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
        message = f"nbchat: no endpoint configured; using the local Ollama at {url}."
    elif origin == "local":
        message = (
            f"nbchat: no model endpoint configured; answering with the small local model "
            f"{model} (llama.cpp at {url}; fast, but often wrong). To {CONNECT_HINT}"
        )
    else:
        message = (
            "nbchat: no model endpoint configured; answering with the offline demo model "
            f"(canned answers). To {CONNECT_HINT}"
        )
    print(message, file=sys.stderr, flush=True)
