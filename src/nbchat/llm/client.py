"""LLMClient: models, streamed and whole chat replies, for any provider."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from ..config import Settings
from ..errors import LLMError, LLMTimeout, MalformedStream, ModelNotFound, StreamCutOff
from ..events import ReplyEvent
from ..policy import Policy
from . import _http
from ._protocol import Provider, Reply
from .ollama import OllamaProvider
from .openai import OpenAIProvider

PROVIDERS: dict[str, type[Provider]] = {"openai": OpenAIProvider, "ollama": OllamaProvider}
DEFAULT_MODELS = {"openai": "gpt-4o-mini"}


class LLMClient:
    """Talks to one endpoint through the process-wide pooled HTTP client.

    ``stream()`` is a generator of reply events; closing it early (``break``,
    an exception, KeyboardInterrupt) closes the HTTP response at once.
    """

    def __init__(self, settings: Settings) -> None:
        forced = Policy.from_env().force_base_url
        self.settings = settings.with_(base_url=forced) if forced else settings
        self.provider: Provider = PROVIDERS[settings.provider]()
        self._models: list[str] | None = None

    def __repr__(self) -> str:
        return f"LLMClient({self.settings.provider}, {self.settings.base_url!r})"

    def list_models(self) -> list[str]:
        """The model names the endpoint offers (those the administrator allows)."""
        response = self._send("GET", self.provider.models_path)
        try:
            data = _json(response.read(), self.settings.base_url)
        finally:
            response.close()
        self._models = Policy.from_env().models(self.provider.parse_models(data))
        return list(self._models)

    def default_model(self) -> str:
        """The configured model, else the endpoint's preferred or first listed model."""
        policy = Policy.from_env()
        if policy.force_model or self.settings.model:
            return policy.model(self.settings.model) or ""
        preferred = DEFAULT_MODELS.get(self.settings.provider)
        try:
            models = self._models if self._models is not None else self.list_models()
        except LLMError:
            if policy.allowed_models or preferred:
                return policy.allowed_models[0] if policy.allowed_models else str(preferred)
            raise
        if preferred in models or (preferred and not models and not policy.allowed_models):
            return preferred
        if not models:
            raise ModelNotFound(
                f"the endpoint at {self.settings.base_url} offers no models; "
                f"pull or load one, or set NBCHAT_MODEL",
                url=self.settings.base_url,
            )
        return models[0]

    def stream(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Iterator[ReplyEvent]:
        """Reply events for one chat request, as they arrive."""
        model = Policy.from_env().model(model) or model
        body = self.provider.chat_body(messages, model, tools, stream=True)
        response = self._send("POST", self.provider.chat_path, body, model=model)
        try:
            chunks = _raw(response, self.settings.base_url)
            yield from self.provider.decode_stream(chunks)
            _drain(chunks)
        finally:
            response.close()

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> Reply:
        """One whole chat reply, without streaming."""
        model = Policy.from_env().model(model) or model
        body = self.provider.chat_body(messages, model, tools, stream=False)
        response = self._send("POST", self.provider.chat_path, body, model=model)
        try:
            data = _json(response.read(), self.settings.base_url)
        finally:
            response.close()
        return self.provider.parse_reply(data)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        model: str | None = None,
    ) -> httpx.Response:
        settings = self.settings
        request = _http.pooled_client(settings).build_request(
            method,
            settings.base_url.rstrip("/") + path,
            headers=_http.headers_for(settings),
            content=None if body is None else json.dumps(body).encode(),
        )
        if body is not None:
            request.headers["Content-Type"] = "application/json"
        try:
            return _http.send(settings, request, detail=self.provider.error_detail, model=model)
        except ModelNotFound as exc:
            raise self._with_available(exc) from None

    def _with_available(self, exc: ModelNotFound) -> ModelNotFound:
        try:
            available = self.list_models()
        except LLMError:
            available = []
        offered = ", ".join(available) if available else "none listed"
        return ModelNotFound(
            f"{exc}; it offers: {offered}. Pick one with -m MODEL or NBCHAT_MODEL",
            url=exc.url,
            model=exc.model,
            available=available,
        )


def _raw(response: httpx.Response, url: str) -> Iterator[bytes]:
    """The body's bytes, with transport failures mid-stream as nbchat errors."""
    try:
        yield from response.iter_bytes()
    except httpx.ReadTimeout as exc:
        raise LLMTimeout(
            f"the model endpoint at {url} stopped sending in the middle of the answer; "
            f"the answer is incomplete — ask again",
            url=url,
        ) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise StreamCutOff(
            f"the connection to {url} broke in the middle of the answer; "
            f"the answer is incomplete — ask again",
            url=url,
        ) from exc


def _drain(chunks: Iterator[bytes], limit: int = 65536) -> None:
    """Read what follows the end marker (the body's last chunk) so the connection is reused."""
    seen = 0
    try:
        for chunk in chunks:
            seen += len(chunk)
            if seen > limit:
                return
    except LLMError:
        return


def _json(body: bytes, url: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        raise MalformedStream(
            f"the endpoint at {url} answered something that is not JSON: {body[:80]!r}; "
            f"check that NBCHAT_BASE_URL points at the API (e.g. ends in /v1)",
            url=url,
        ) from None
