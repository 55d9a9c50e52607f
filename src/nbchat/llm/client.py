"""LLMClient: models, streamed and whole chat replies, for any provider.

Every error raised while talking to the endpoint leaves through
:func:`nbchat.llm._http.redacting`, so none quotes an API key back.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..base._secrets import redact_url
from ..base.config import Settings, api_url
from ..base.errors import (
    EmptyAnswer,
    LLMConnectError,
    LLMError,
    ModelNotFound,
    ServerError,
    StreamCutOff,
)
from ..base.events import ReplyEvent
from ..base.policy import Policy
from . import _grammar, _http, discovery
from ._body import Counted, body_bytes, drain, parse_json
from ._protocol import Provider, Reply
from ._stop import StopSignal, on_stop, retry_sleep, send_until_stopped, shut
from .anthropic import CONTEXT_SIZE as ANTHROPIC_CONTEXT
from .anthropic import AnthropicProvider
from .azure import AzureProvider
from .ollama import OllamaProvider
from .openai import OpenAIProvider

PROVIDERS: dict[str, type[Provider]] = {
    "openai": OpenAIProvider,
    "ollama": OllamaProvider,
    "anthropic": AnthropicProvider,
    "azure": AzureProvider,
}
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
OLLAMA_DEFAULT_CONTEXT = 4096  # what Ollama allots a model when nothing sets num_ctx


class LLMClient:
    """Talks to one endpoint through the process-wide pooled HTTP client.

    ``stream()`` is a generator of reply events; closing it early (``break``,
    an exception, KeyboardInterrupt) closes the HTTP response at once.

    Settings without an endpoint (``base_url`` empty, or ``demo``) are pointed
    at one by :mod:`nbchat.llm.discovery` when the client is made: this may
    start the local model or the demo model. If an endpoint found that way
    stops answering, the request looks again once before failing.
    """

    def __init__(self, settings: Settings) -> None:
        forced = Policy.from_env().force_base_url
        wanted = settings.with_(base_url=forced) if forced else settings
        self.wanted = wanted.with_(base_url=api_url(wanted.base_url, wanted.provider))
        self.settings = discovery.locate(self.wanted)
        self.provider: Provider = PROVIDERS[self.settings.provider]()
        self._models: list[str] | None = None
        self._context_sizes: dict[str, int | None] = {}
        self._token_scales: dict[str, float] = {}
        self._props: dict[str, Any] | None = None  # llama.cpp's GET /props, once asked
        self.fim_forms: dict[str, Any] = {}  # per model: the fill-in-the-middle form that answered
        self._relocating = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMClient({self.settings.provider}, {redact_url(repr(self.settings.base_url))})"

    def list_models(self) -> list[str]:
        """The model names the endpoint offers (those the administrator allows).

        An endpoint with no model list (Azure OpenAI's deployments) offers the
        configured model.
        """
        if not self.provider.models_path:
            configured = [self.settings.model] if self.settings.model else []
            self._models = Policy.from_env().models(configured)
            return list(self._models)
        with _http.redacting():
            response = self._send("GET", self.provider.models_path)
            try:
                data = parse_json(response.read(), self.settings.base_url)
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
        options: Mapping[str, Any] | None = None,
        stop: StopSignal | None = None,
    ) -> Generator[ReplyEvent, None, None]:
        """Reply events for one chat request, as they arrive.

        ``options`` (checked by :func:`nbchat.base.options.check_options`) are
        mapped to the provider's request fields. ``stop``, set from another
        thread, ends the events at once (without a ReplyFinished), also while
        the endpoint sends nothing: it shuts the connection down.
        """
        if stop is not None and stop.is_set():
            return
        model = Policy.from_env().model(model) or model
        body, grammar = self._chat_body(messages, model, tools, options, stream=True)
        with _http.redacting():
            if stop is None:
                response = self._send_chat(body, model, messages, options)
            else:
                sent = send_until_stopped(
                    lambda: self._send_chat(body, model, messages, options), stop
                )
                if sent is None:
                    return
                response = sent
            try:
                with on_stop(stop, lambda: shut(response)):
                    counted = Counted(body_bytes(response, self.settings.base_url))
                    events = self.provider.decode_stream(counted)
                    if grammar is not None:
                        events = _grammar.as_call(events, str(grammar["name"]))
                    try:
                        yield from events
                    except LLMError as exc:
                        if stop is not None and stop.is_set():
                            return  # the stop broke the connection: the stream just ends
                        if isinstance(exc, StreamCutOff) and not counted.size:
                            raise self._empty_answer(model) from exc
                        raise
                    drain(counted)
            finally:
                response.close()

    def request(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> ChatRequest:
        """The chat request :meth:`stream` would send for these arguments, not sent.

        Built by the same steps (the administrator's model, the provider's body,
        the JSON encoding), so its ``content`` is the body's bytes as they go out.
        """
        model = Policy.from_env().model(model) or model
        body, _ = self._chat_body(messages, model, tools, options, stream=True)
        url = self.settings.base_url.rstrip("/") + self._chat_path(model)
        return ChatRequest(url, model, body, request_content(body))

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        model: str,
        tools: Sequence[dict[str, Any]] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> Reply:
        """One whole chat reply, without streaming."""
        model = Policy.from_env().model(model) or model
        body, grammar = self._chat_body(messages, model, tools, options, stream=False)
        with _http.redacting():
            response = self._send_chat(body, model, messages, options)
            try:
                raw = response.read()
            finally:
                response.close()
            if not raw.strip():
                raise self._empty_answer(model)
            reply = self.provider.parse_reply(parse_json(raw, self.settings.base_url))
            return reply if grammar is None else _grammar.as_reply(reply, str(grammar["name"]))

    def context_size(self, model: str, options: Mapping[str, Any] | None = None) -> int | None:
        """The model's context window in tokens, or None when nothing tells.

        ``NBCHAT_CONTEXT_SIZE`` (the ``context_size`` setting) wins; else an
        Ollama ``num_ctx`` option; else the endpoint is asked once per model
        (llama.cpp ``GET /props``, Ollama ``POST /api/show``).
        """
        if self.settings.context_size:
            return self.settings.context_size
        num_ctx = (options or {}).get("num_ctx")
        if isinstance(num_ctx, int) and not isinstance(num_ctx, bool) and num_ctx > 0:
            return num_ctx
        if self.settings.provider == "anthropic":  # no endpoint to ask: the known window
            self._context_sizes.setdefault(model, ANTHROPIC_CONTEXT)
        if model not in self._context_sizes:
            try:
                self._context_sizes[model] = self._discover_context(model)
            except LLMError:
                self._context_sizes[model] = None
        return self._context_sizes[model]

    def learn_context_size(self, model: str, size: int) -> None:
        """Remember a context size the endpoint revealed (e.g. in an overflow error)."""
        if size > 0:
            self._context_sizes[model] = size

    def token_scale(self, model: str) -> float:
        """How many of ``model``'s tokens nbchat's estimate of one token turned out to be."""
        return self._token_scales.get(model, 1.0)

    def learn_token_count(self, model: str, estimated: int, counted: int) -> None:
        """Remember how the endpoint's count of a request compared with nbchat's estimate.

        Windows for ``model`` are then cut by the model's own tokenizer, as
        usage reports and overflow errors show it (bounded, in case one was odd).
        """
        if estimated > 0 and counted > 0:
            self._token_scales[model] = min(4.0, max(0.5, counted / estimated))

    def template_has_tools(self) -> bool | None:
        """Whether the endpoint's chat template passes tools to the model; None when unknown.

        llama.cpp's server says so in ``/props``; a template without them means a
        model that was never taught to call tools.
        """
        caps = self.server_props().get("chat_template_caps")
        supports = caps.get("supports_tools") if isinstance(caps, dict) else None
        return supports if isinstance(supports, bool) else None

    def server_props(self) -> dict[str, Any]:
        """llama.cpp's ``GET /props`` (context size, template abilities), asked once; else {}."""
        if self._props is None:
            data: Any = {}
            if self.settings.provider == "openai":
                root = re.sub(r"/v1/?$", "", self.settings.base_url.rstrip("/"))
                try:
                    data = self._fetch("GET", "/props", base=root)
                except LLMError:
                    data = {}
            self._props = data if isinstance(data, dict) else {}
        return self._props

    def _chat_body(
        self,
        messages: Sequence[dict[str, Any]],
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        options: Mapping[str, Any] | None,
        *,
        stream: bool,
    ) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
        """The request body, and the tool whose schema is its grammar (None: an ordinary one)."""
        grammar = self._grammar_tool(tools, options)
        response_format = None
        if grammar is not None:
            messages, options, response_format = _grammar.request(messages, grammar, options)
            tools = None
        if self.template_has_tools() is False:
            messages = _grammar.plain_rounds(messages)
        body = self.provider.chat_body(messages, model, tools, stream=stream, options=options)
        if response_format is not None:
            body["response_format"] = response_format
        return body, grammar

    def _grammar_tool(
        self, tools: Sequence[dict[str, Any]] | None, options: Mapping[str, Any] | None
    ) -> Mapping[str, Any] | None:
        """The tool a named tool choice asks for, when this server needs a grammar for it."""
        function = _grammar.named_tool(options, tools)
        if function is None or "default_generation_settings" not in self.server_props():
            return None  # only llama.cpp's server ignores a named choice
        return function

    def _discover_context(self, model: str) -> int | None:
        if self.settings.provider == "ollama":
            data = self._fetch("POST", "/api/show", {"model": model})
            return _ollama_context(data)
        data = self.server_props()
        settings = data.get("default_generation_settings") if isinstance(data, dict) else None
        for where in (settings, data):
            size = where.get("n_ctx") if isinstance(where, dict) else None
            if isinstance(size, int) and size > 0:
                return size
        return None

    def _fetch(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, base: str = ""
    ) -> Any:
        settings = self.settings
        request = _http.pooled_client(settings).build_request(
            method,
            (base or settings.base_url.rstrip("/")) + path,
            headers=_http.headers_for(settings),
            content=None if body is None else json.dumps(body).encode(),
        )
        response = _http.send(
            settings.with_(max_retries=0), request, detail=self.provider.error_detail
        )
        try:
            return parse_json(response.read(), settings.base_url)
        finally:
            response.close()

    def _empty_answer(self, model: str) -> EmptyAnswer:
        url = self.settings.base_url
        if self.settings.context_size or self._context_sizes.get(model):
            # nbchat knew the size and sent what fits: the server itself failed.
            why = "the server failed on it (its log says why)"
            fix = "start a new thread with %chat --new if it happens again"
        else:
            why = "servers do this when the conversation does not fit the model's context or fail"
            fix = (
                "set NBCHAT_CONTEXT_SIZE to the model's context so nbchat sends fewer earlier "
                "turns, start a new thread with %chat --new, or check the server's log"
            )
        return EmptyAnswer(
            f"the model endpoint at {url} accepted the question, then sent an empty answer; "
            f"{why}: {fix}",
            url=url,
        )

    def _send_chat(
        self,
        body: dict[str, Any],
        model: str,
        messages: Sequence[dict[str, Any]],
        options: Mapping[str, Any] | None,
    ) -> httpx.Response:
        try:
            path = self._chat_path(model)
            return self._send("POST", path, body, model=model, options=options)
        except ServerError as exc:
            if exc.status not in (400, 415, 422) or not _carries_images(messages):
                raise
            raise ServerError(
                f"model {model!r} did not accept the image sent with the question ({exc}); "
                f"ask a model that reads images with -m MODEL, or ask without the picture",
                url=exc.url,
                status=exc.status,
            ) from None

    def _chat_path(self, model: str) -> str:
        """The provider's chat path, with the model and api-version where it names them."""
        template = self.provider.chat_path
        if "{" not in template:
            return template
        version = urllib.parse.quote(self.settings.api_version or "", safe="")
        return template.format(model=urllib.parse.quote(model, safe=""), api_version=version)

    def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> httpx.Response:
        used = self.settings
        try:
            return self._send_once(used, method, path, body, model, options)
        except LLMConnectError:
            if not self._relocate(used):
                raise
        return self._send_once(self.settings, method, path, body, model, options)

    def _send_once(
        self,
        settings: Settings,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        model: str | None,
        options: Mapping[str, Any] | None,
    ) -> httpx.Response:
        request = _http.pooled_client(settings).build_request(
            method,
            settings.base_url.rstrip("/") + path,
            headers=_http.headers_for(settings),
            content=None if body is None else request_content(body),
        )
        if body is not None:
            request.headers["Content-Type"] = "application/json"
        try:
            return _http.send(
                settings,
                request,
                detail=self.provider.error_detail,
                model=model,
                options=tuple(options or ()),
                sleep=retry_sleep,
            )
        except ModelNotFound as exc:
            raise self._with_available(exc) from None

    def _relocate(self, failed: Settings) -> bool:
        """Point at a newly found endpoint if the discovered one died; whether it did.

        Requests share the client (a title is asked in a thread of its own):
        the first to see the endpoint gone looks again, the others follow it.
        """
        with self._relocating:
            if self.settings is not failed:
                return True
            found = discovery.rediscover(self.wanted, failed)
            if found is None:
                return False
            self.settings, self._models, self._props = found, None, None
            self.provider = PROVIDERS[found.provider]()
            return True

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


@dataclass(frozen=True)
class ChatRequest:
    """A chat request as it would go out: where, for which model, its body and its bytes."""

    url: str
    model: str
    body: dict[str, Any] = field(repr=False)
    content: bytes = field(repr=False)


def request_content(body: dict[str, Any]) -> bytes:
    """A request body's bytes on the wire (one encoding for what is sent and what is previewed)."""
    return json.dumps(body).encode()


def _carries_images(messages: Sequence[dict[str, Any]]) -> bool:
    """Whether a request holds an image: in a context item or an ``image_url`` content part."""
    for message in messages:
        if any(
            isinstance(item, dict) and item.get("image") for item in message.get("context") or ()
        ):
            return True
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "image_url" for part in content
        ):
            return True
    return False


def _ollama_context(data: Any) -> int | None:
    """The context Ollama runs a model with: its ``num_ctx``, else the default, capped."""
    if not isinstance(data, dict):
        return None
    trained = None
    for key, value in (data.get("model_info") or {}).items():
        if str(key).endswith(".context_length") and isinstance(value, int):
            trained = value
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(data.get("parameters") or ""), re.MULTILINE)
    size = int(match.group(1)) if match else OLLAMA_DEFAULT_CONTEXT
    return min(size, trained) if trained else size


