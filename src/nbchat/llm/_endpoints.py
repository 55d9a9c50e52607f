"""Which provider a thread and a model belong to, so a question never goes to the wrong one.

A thread made on a configured endpoint remembers its provider and URL (the
URL's user and password left out) in its settings. Asking in it from a
session set for another provider, or starting a thread with a model another
provider serves (``claude-…`` on an OpenAI endpoint), is one line saying what
to set, not a request the endpoint was never meant to get.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..base._secrets import redact_url
from ..base.config import ANTHROPIC_URL, GEMINI_HOST, Settings
from ..base.errors import EndpointMismatch, LLMError

GEMINI_URL = f"https://{GEMINI_HOST}/v1beta/openai"
# Model name prefixes only one provider serves under that name (gateways list them as they are).
MODEL_FAMILIES = {"claude": "anthropic", "gemini": "gemini"}
SWITCH = {
    "anthropic": f"%env NBCHAT_PROVIDER=anthropic, %env NBCHAT_BASE_URL={ANTHROPIC_URL} "
    "and %chat --key (or ANTHROPIC_API_KEY)",
    "gemini": f"%env NBCHAT_PROVIDER=openai, %env NBCHAT_BASE_URL={GEMINI_URL} "
    "and %chat --key (or GEMINI_API_KEY)",
}
NAMES = {"anthropic": "Anthropic", "gemini": "Gemini", "openai": "an OpenAI-compatible endpoint",
         "azure": "Azure OpenAI", "ollama": "Ollama"}  # fmt: skip


def family(settings: Settings) -> str:
    """The provider a session talks to: its wire format, or Gemini behind the OpenAI one."""
    if settings.provider == "openai" and GEMINI_HOST in settings.base_url:
        return "gemini"
    return settings.provider


def endpoint_record(settings: Settings) -> dict[str, str] | None:
    """What a new thread remembers of its endpoint; None for one nbchat found itself."""
    if settings.origin != "configured":
        return None
    return {"provider": family(settings), "base_url": redact_url(settings.base_url)}


def check_model(model: str, settings: Settings, offered: Callable[[], list[str]]) -> None:
    """Raise EndpointMismatch when ``model`` is another provider's and this endpoint lacks it.

    ``offered`` lists the endpoint's models; it is asked only on a mismatch
    (a gateway such as LiteLLM may serve ``claude-…`` under that very name).
    """
    owner = next((p for prefix, p in MODEL_FAMILIES.items() if model.startswith(prefix)), None)
    if owner is None or owner == family(settings):
        return
    try:
        if model in offered():
            return
    except LLMError:  # an endpoint that cannot list is no proof it serves the model
        pass
    raise EndpointMismatch(
        f"model {model!r} is served by {NAMES[owner]}, but this session talks to "
        f"{NAMES.get(family(settings), family(settings))} at {redact_url(settings.base_url)}; "
        f"switch with {SWITCH[owner]}, or pick one of %chat --models",
        provider=owner,
    )


def check_thread(thread_id: int, thread_settings: Mapping[str, Any], settings: Settings) -> None:
    """Raise EndpointMismatch when the thread was made with another provider than the session's."""
    endpoint = thread_settings.get("endpoint")
    if not isinstance(endpoint, Mapping) or settings.origin != "configured":
        return
    provider = endpoint.get("provider")
    if not isinstance(provider, str) or provider == family(settings):
        return
    url = str(endpoint.get("base_url") or "")
    switch = SWITCH.get(provider, f"%env NBCHAT_PROVIDER={provider}, %env NBCHAT_BASE_URL={url}")
    raise EndpointMismatch(
        f"thread {thread_id} talks to {NAMES.get(provider, provider)} at {url}, but this "
        f"session is set for {NAMES.get(family(settings), family(settings))}; switch back with "
        f"{switch}, or ask it here with -m MODEL (one of %chat --models)",
        provider=provider,
    )
