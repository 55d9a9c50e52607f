"""The requests' routes: which protocol a request speaks, and its answer from the script.

:class:`Handler` checks each request as the API it imitates checks it
(key, model, body, images, context size), records it with its conversation in
OpenAI's shape, and answers from the rule the script picks, playing the
reply's HTTP error or empty body itself. How the answer goes out on the
connection (whole, chunked, with faults) is :mod:`._http`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ._anthropic import ANTHROPIC, Anthropic, openai_messages, request_problem
from ._anthropic import prompt_tokens as anthropic_prompt_tokens
from ._fim import FIM_CLASSES, FIM_PATHS, NOTHING, FimForm, fim_messages
from ._gemini import GEMINI, METHODS, Gemini, is_gemini_path, path_method, path_model
from ._gemini import MODELS as GEMINI_MODELS
from ._gemini import openai_messages as gemini_messages
from ._gemini import request_problem as gemini_problem
from ._http import ClientGone, Connection, Stopped
from ._protocols import OLLAMA, OPENAI, Ollama, OpenAI, count_prompt_tokens, dumps, ollama_name
from ._record import AZURE_CHAT
from ._responses import RESPONSES, Responses
from ._responses import openai_messages as responses_messages
from ._responses import request_problem as responses_problem
from ._script import Reply, request_images

_NO_FAULTS = Reply()

ChatProtocol = OpenAI | Ollama | Anthropic | Responses  # the model is in the body
Protocol = ChatProtocol | Gemini


class Handler(Connection):
    """Serves the requests of one client connection, in order."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        path = urlsplit(self.path).path
        protocol = _protocol_of(path, self.headers)
        try:
            body = json.loads(raw) if raw else None
            is_valid = True
        except ValueError:
            body, is_valid = None, False
        azure = AZURE_CHAT.match(path)
        if azure and isinstance(body, dict):
            body.setdefault("model", azure.group(1))  # the deployment is the model
        view: dict[str, Any] = {"messages": _openai_view(protocol, body)} if (
            (protocol in (ANTHROPIC, RESPONSES, GEMINI) or isinstance(protocol, FIM_CLASSES))
            and isinstance(body, dict)) else {}  # fmt: skip
        if protocol is GEMINI:
            view["model"] = path_model(path)  # the model is in the path, not the body
        self.record = owner._record(
            **view,
            method=self.command,
            path=self.path,
            headers=dict(self.headers.items()),
            body=body,
            raw=raw,
            protocol=protocol.name,
            connection=tuple(self.client_address[:2]),
        )
        self._headers_sent = False
        try:
            self._route(path, protocol, is_valid)
        except (ClientGone, Stopped):
            self.close_connection = True
        except OSError:
            self.close_connection = True
            if not owner._stopping.is_set():
                owner._update(self.record, disconnected=True)
        except Exception as exc:
            self.close_connection = True
            if not self._headers_sent:
                self._send_json(500, protocol.error(500, f"scripted server failed: {exc!r}"))
            raise

    def _route(self, path: str, protocol: Protocol, is_valid: bool) -> None:
        owner = self.server.owner
        if owner.api_key is not None and not self._has_key(owner.api_key, protocol, path):
            return self._send_json(401, protocol.error(401))
        request = (self.command, path)
        if isinstance(protocol, Gemini):
            return self._gemini(path, is_valid)
        if self.command == "POST" and isinstance(protocol, FIM_CLASSES):
            return self._fim(protocol, is_valid)
        if request == ("POST", protocol.chat_path) or (
            self.command == "POST" and AZURE_CHAT.match(path)
        ):
            return self._chat(protocol, is_valid)
        if request == ("GET", "/v1/models") and protocol is ANTHROPIC:
            return self._send_json(200, ANTHROPIC.models(owner.models))
        if request == ("GET", "/v1/models"):
            return self._send_json(200, OPENAI.models(owner.models))
        if self.command == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if _is_known(model, owner.models, OPENAI):
                return self._send_json(200, OPENAI.model_entry(model))
            return self._send_json(404, OPENAI.unknown_model(model))
        if request == ("GET", "/api/tags"):
            return self._send_json(200, OLLAMA.models(owner.models))
        if request == ("GET", "/api/version"):
            return self._send_json(200, OLLAMA.version())
        if request == ("GET", "/"):
            return self._send_bytes(200, "text/plain; charset=utf-8", b"Ollama is running")
        llama_props = owner.context_size or owner.template_tools is not None
        if request == ("GET", "/props") and llama_props:
            return self._send_json(200, OPENAI.props(owner.context_size, owner.template_tools))
        if request == ("POST", "/api/show") and owner.context_size:
            return self._send_json(200, OLLAMA.show(owner.context_size))
        return self._send_json(404, protocol.not_found(self.command, path))

    def _has_key(self, key: str, protocol: Protocol, path: str) -> bool:
        """Bearer everywhere; Anthropic's ``x-api-key``, Azure's ``api-key`` and Gemini's
        ``x-goog-api-key`` (or ``?key=``) where they apply."""
        if self.headers.get("Authorization") == f"Bearer {key}":
            return True
        if protocol is ANTHROPIC:
            return self.headers.get("x-api-key") == key
        if protocol is GEMINI:
            query = parse_qs(urlsplit(self.path).query).get("key", [])
            return self.headers.get("x-goog-api-key") == key or key in query
        return bool(AZURE_CHAT.match(path)) and self.headers.get("api-key") == key

    def _chat(self, protocol: ChatProtocol, is_valid: bool) -> None:
        owner = self.server.owner
        body = self.record.body
        if not is_valid or not isinstance(body, dict):
            return self._send_json(400, protocol.bad_json())
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._send_json(400, protocol.missing_model())
        if not _is_known(model, owner.models, protocol):
            return self._send_json(404, protocol.unknown_model(model))
        refuses = owner.text_only_models and _is_known(model, owner.text_only_models, protocol)
        if refuses and request_images(self.record.messages):
            return self._send_json(400, protocol.no_images(model))
        if protocol is ANTHROPIC:
            return self._anthropic_chat(body)
        if protocol is RESPONSES:
            return self._responses_chat(body)
        prompt = count_prompt_tokens(body)
        if protocol is OPENAI and owner.context_size and prompt > owner.context_size:
            return self._send_json(400, OPENAI.overflow(prompt, owner.context_size))
        self._answer_chat(protocol, body, body)

    def _anthropic_chat(self, body: dict[str, Any]) -> None:
        """Checked as the API checks it, then answered from the OpenAI-shaped view of it."""
        owner = self.server.owner
        problem = request_problem(body)
        if problem is not None:
            return self._send_json(400, ANTHROPIC.error(400, problem))
        prompt = anthropic_prompt_tokens(body)
        if owner.context_size and prompt > owner.context_size:
            return self._send_json(400, ANTHROPIC.overflow(prompt, owner.context_size))
        view = {**body, "messages": self.record.messages}
        self._answer_chat(ANTHROPIC, body, view)

    def _responses_chat(self, body: dict[str, Any]) -> None:
        """Checked as the API checks it, then answered from the OpenAI-shaped view of it."""
        problem = responses_problem(body)
        if problem is not None:
            return self._send_json(400, RESPONSES.error(400, problem))
        self._answer_chat(RESPONSES, body, {**body, "messages": self.record.messages})

    def _gemini(self, path: str, is_valid: bool) -> None:
        """The Gemini API: the models list, ``countTokens``, and ``generateContent``,
        whole or streamed, checked as the API checks it."""
        owner = self.server.owner
        listing = GEMINI_MODELS.match(path)
        if self.command == "GET" and listing:
            model = listing.group(2)
            if model is None:
                return self._send_json(200, GEMINI.models(owner.models))
            if _is_known(model, owner.models, GEMINI):
                return self._send_json(200, GEMINI.model_entry(model))
            return self._send_json(404, GEMINI.unknown_model(model))
        method, model = path_method(path), str(path_model(path))
        if self.command != "POST" or method not in METHODS:
            return self._send_json(404, GEMINI.not_found(self.command, path))
        body = self.record.body
        if not is_valid or not isinstance(body, dict):
            return self._send_json(400, GEMINI.bad_json())
        if not _is_known(model, owner.models, GEMINI):
            return self._send_json(404, GEMINI.unknown_model(model))
        if method == "countTokens":
            return self._send_json(200, GEMINI.count_tokens(body))
        problem = gemini_problem(body)
        if problem is not None:
            return self._send_json(400, GEMINI.error(400, problem))
        refuses = owner.text_only_models and _is_known(model, owner.text_only_models, GEMINI)
        if refuses and request_images(self.record.messages):
            return self._send_json(400, GEMINI.no_images(model))
        view = {**body, "messages": self.record.messages}
        reply = owner._pick(view)
        if self._plays_failure(reply, GEMINI.error):
            return
        answer = owner._answer(reply, view, model)
        if method == "streamGenerateContent":
            self._stream(reply or _NO_FAULTS, GEMINI.stream(answer, urlsplit(self.path).query))
        else:
            self._whole(reply or _NO_FAULTS, dumps(GEMINI.whole(answer)).encode())

    def _answer_chat(
        self, protocol: ChatProtocol, body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        """Answer ``body`` by the rule ``view`` (its conversation in OpenAI's shape) matches."""
        owner = self.server.owner
        model = str(body.get("model"))
        reply = owner._pick(view)
        if self._plays_failure(reply, protocol.error):
            return
        answer = owner._answer(reply, view, model, body if protocol is ANTHROPIC else None)
        if protocol.is_stream(body):
            self._stream(reply or _NO_FAULTS, protocol.stream(answer, body))
        else:
            whole = (
                RESPONSES.whole(answer, body) if protocol is RESPONSES else protocol.whole(answer)
            )
            self._whole(reply or _NO_FAULTS, dumps(whole).encode())

    def _fim(self, form: FimForm, is_valid: bool) -> None:
        """Fill-in-the-middle: checked as the form's server checks it, then answered by the
        first rule the prefix matches, or with nothing (an empty middle)."""
        owner = self.server.owner
        body = self.record.body
        if not is_valid or not isinstance(body, dict):
            return self._send_json(400, form.bad_json())
        problem = form.problem(body)
        if problem is not None:
            return self._send_json(400, form.error(400, problem))
        model = body.get("model")
        if form.model_required and (not isinstance(model, str) or not model):
            return self._send_json(400, form.missing_model())
        if form.model_required and not _is_known(str(model), owner.models, form):
            return self._send_json(404, form.unknown_model(str(model)))
        view = {**body, "messages": self.record.messages}
        reply = owner._pick(view)

        def error(status: int, message: str | None) -> Any:
            return form.error(status, message or form.refusal(status, body))

        if self._plays_failure(reply, error):
            return
        answer = owner._answer(reply or NOTHING, view, str(model or "scripted.gguf"))
        if form.is_stream(body):
            self._stream(reply or _NO_FAULTS, form.stream(answer, body))
        else:
            self._whole(reply or _NO_FAULTS, dumps(form.whole(answer, body)).encode())

    def _plays_failure(self, reply: Reply | None, error: Callable[[int, str | None], Any]) -> bool:
        """Play the reply's ``hold``, then its HTTP error or empty body; whether it answered."""
        if reply is not None and reply.hold:
            self._pause(reply.hold)
        if reply is not None and reply.status is not None:
            headers = {}
            if reply.retry_after is not None:
                headers["Retry-After"] = _seconds(reply.retry_after)
            if reply.error_body is not None:
                page = reply.error_body.encode()
                self._send_bytes(reply.status, "text/plain; charset=utf-8", page, headers)
            else:
                self._send_json(reply.status, error(reply.status, reply.error_message), headers)
            return True
        if reply is not None and reply.empty_body:
            self._send_bytes(200, "application/json", b"")
            return True
        return False


def _protocol_of(path: str, headers: Any) -> Protocol:
    """The fill-in-the-middle forms at their paths (``/infill``, ``/v1/completions``,
    ``/beta/completions``, ``/v1/fim/completions``, ``/api/generate``); Ollama under
    ``/api``; Anthropic at ``/v1/messages`` or when the client names its version
    (``GET /v1/models`` is both Anthropic's and OpenAI's); OpenAI's Responses at
    ``/v1/responses``; Gemini at ``/v1beta/models`` and ``…/models/MODEL:method``;
    else OpenAI."""
    if path in FIM_PATHS:
        return FIM_PATHS[path]
    if is_gemini_path(path):
        return GEMINI
    if path == "/" or path.startswith("/api/"):
        return OLLAMA
    if path == RESPONSES.chat_path:
        return RESPONSES
    if path == ANTHROPIC.chat_path or (headers.get("anthropic-version") and path == "/v1/models"):
        return ANTHROPIC
    return OPENAI


def _openai_view(protocol: Protocol, body: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(protocol, FIM_CLASSES):
        return fim_messages(protocol, body)
    if protocol is GEMINI:
        return gemini_messages(body)
    return openai_messages(body) if protocol is ANTHROPIC else responses_messages(body)


def _is_known(model: str, models: tuple[str, ...], protocol: Protocol) -> bool:
    if not models:
        return True
    if isinstance(protocol, Ollama):
        return ollama_name(model) in {ollama_name(m) for m in models}
    return model in models


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
