"""The two wire formats the server speaks: OpenAI chat completions and Ollama chat.

Everything here is pure: an :class:`Answer` goes in, JSON objects or the
pre-encoded bytes of a stream come out, so the server writes without per-chunk
work.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http import HTTPStatus
from typing import Any

from ._script import Arguments, Body, arguments_json

MODELS_CREATED = 1_700_000_000  # fixed, so model lists compare equal across runs
OLLAMA_VERSION = "0.12.6"
_ARGUMENT_PIECE = 8


def dumps(obj: Any) -> str:
    """Compact JSON with raw UTF-8, as both real servers send it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Answer:
    """A reply made concrete for one request: ids assigned, chunks split."""

    response_id: str
    model: str
    chunks: list[str]
    tool_calls: list[tuple[str, str, Arguments]]  # (call id, name, arguments)
    finish_reason: str | None
    usage: bool
    prompt_tokens: int
    reasoning: list[str] = field(default_factory=list)  # chunks of a separate thinking field
    reasoning_field: str = "reasoning_content"
    no_finish: bool = False
    cache_read_tokens: int = 0  # parts of prompt_tokens read from and written to the cache
    cache_write_tokens: int = 0
    redacted_thinking: str = ""  # Anthropic: an opaque redacted_thinking block's data
    usage_fields: dict[str, Any] = field(default_factory=dict)  # sent over the counted ones

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def completion_tokens(self) -> int:
        return len(self.reasoning) + len(self.chunks) + len(self.tool_calls)


@dataclass(frozen=True)
class StreamPlan:
    """A streamed body, pre-encoded: framing, the counted pieces, the ending."""

    content_type: str
    preamble: bytes
    pieces: list[bytes]
    closing: bytes
    malformed: bytes
    failure: bytes = b""  # the protocol's error in the stream (``error_after``)


def count_prompt_tokens(body: Body) -> int:
    """A deterministic stand-in for the prompt's token count: its words."""
    messages = body.get("messages") or []
    words = sum(len(str(m.get("content") or "").split()) for m in messages if isinstance(m, dict))
    return max(words, 1)


def split_arguments(arguments: str) -> list[str]:
    """Arguments JSON in small pieces, at least two when it has two characters."""
    size = min(_ARGUMENT_PIECE, max(1, len(arguments) // 2))
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


class OpenAI:
    """OpenAI's ``/v1`` chat completions, models list and error bodies."""

    name = "openai"
    chat_path = "/v1/chat/completions"

    def is_stream(self, body: Body) -> bool:
        return body.get("stream") is True

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        default_type, default_code, default_message = _OPENAI_ERRORS.get(
            status, ("api_error", None, _reason(status))
        )
        return {
            "error": {
                "message": message or default_message,
                "type": default_type,
                "param": None,
                "code": code or default_code,
            }
        }

    def unknown_model(self, model: str) -> Any:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return self.error(404, message, code="model_not_found")

    def missing_model(self) -> Any:
        return self.error(400, "you must provide a model parameter")

    def no_images(self, model: str) -> Any:
        return self.error(400, f"Invalid content type. image_url is not supported by {model}.")

    def bad_json(self) -> Any:
        return self.error(400, "We could not parse the JSON body of your request.")

    def not_found(self, method: str, path: str) -> Any:
        return self.error(404, f"Invalid URL ({method} {path})", code="unknown_url")

    def model_entry(self, model: str) -> dict[str, Any]:
        return {
            "id": model,
            "object": "model",
            "created": MODELS_CREATED,
            "owned_by": "nbchat-testing",
        }

    def models(self, models: Sequence[str]) -> Any:
        return {"object": "list", "data": [self.model_entry(m) for m in models]}

    def props(self, context_size: int | None, template_tools: bool | None = None) -> Any:
        """llama-server's ``GET /props``, the part clients read."""
        props: dict[str, Any] = {
            "default_generation_settings": {"params": {}},
            "total_slots": 1,
            "model_path": "scripted.gguf",
        }
        if context_size:
            props["default_generation_settings"]["n_ctx"] = context_size
        if template_tools is not None:
            props["chat_template_caps"] = {"supports_tools": template_tools}
        return props

    def overflow(self, prompt_tokens: int, context_size: int) -> Any:
        """llama-server's answer to a prompt longer than the context."""
        message = (
            f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({context_size} tokens), try increasing it"
        )
        return {
            "error": {
                "code": 400,
                "message": message,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt_tokens,
                "n_ctx": context_size,
            }
        }

    def whole(self, answer: Answer) -> Any:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": answer.text if answer.text or not answer.tool_calls else None,
            "refusal": None,
        }
        if answer.reasoning:
            message[answer.reasoning_field] = "".join(answer.reasoning)
        if answer.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments_json(arguments)},
                }
                for call_id, name, arguments in answer.tool_calls
            ]
        result: dict[str, Any] = {
            "id": answer.response_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": answer.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(answer),
                }
            ],
        }
        if answer.usage:
            result["usage"] = self._usage(answer)
        return result

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        head = (
            f'data: {{"id":{dumps(answer.response_id)},"object":"chat.completion.chunk",'
            f'"created":{int(time.time())},"model":{dumps(answer.model)},'
        )
        tail = ',"usage":null}\n\n' if wants_usage else "}\n\n"

        def event(delta: str, finish: str = "null") -> bytes:
            choice = f'{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}'
            return f'{head}"choices":[{choice}]{tail}'.encode()

        field_name = dumps(answer.reasoning_field)
        pieces = [event(f"{{{field_name}:{dumps(chunk)}}}") for chunk in answer.reasoning]
        pieces += [event(f'{{"content":{dumps(chunk)}}}') for chunk in answer.chunks]
        for index, (call_id, name, arguments) in enumerate(answer.tool_calls):
            start = {"index": index, "id": call_id, "type": "function"}
            start["function"] = {"name": name, "arguments": ""}
            pieces.append(event(dumps({"tool_calls": [start]})))
            for part in split_arguments(arguments_json(arguments)):
                delta = {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                pieces.append(event(dumps(delta)))
        closing = b"" if answer.no_finish else event("{}", dumps(self._finish_reason(answer)))
        if wants_usage and answer.usage and not answer.no_finish:
            usage = dumps(self._usage(answer))
            closing += f'{head}"choices":[],"usage":{usage}}}\n\n'.encode()
        return StreamPlan(
            content_type="text/event-stream; charset=utf-8",
            preamble=event('{"role":"assistant","content":""}'),
            pieces=pieces,
            closing=closing + b"data: [DONE]\n\n",
            malformed=head.encode() + b'"choices":[{"index":0,"delta":{"content":\n\n',
            failure=f"data: {dumps(self.error(503))}\n\n".encode(),
        )

    def _finish_reason(self, answer: Answer) -> str:
        return answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")

    def _usage(self, answer: Answer) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        }
        if answer.cache_read_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": answer.cache_read_tokens}
        return {**usage, **answer.usage_fields}


_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "permission_denied", "You are not allowed to do that."),
    404: ("invalid_request_error", "not_found", "Not found."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: (
        "server_error",
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
    ),
    502: ("server_error", "bad_gateway", "Bad gateway."),
    503: ("server_error", "service_unavailable", "The server is overloaded or not ready yet."),
}


class Ollama:
    """Ollama's ``/api`` chat, tags and version, and its ``{"error": ...}`` bodies."""

    name = "ollama"
    chat_path = "/api/chat"

    def is_stream(self, body: Body) -> bool:
        return body.get("stream", True) is not False

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        return {"error": message or _OLLAMA_ERRORS.get(status) or _reason(status).lower()}

    def unknown_model(self, model: str) -> Any:
        return self.error(404, f'model "{model}" not found, try pulling it first')

    def missing_model(self) -> Any:
        return self.error(400, "model is required")

    def no_images(self, model: str) -> Any:
        return self.error(400, f"model {ollama_name(model)} does not support images")

    def bad_json(self) -> Any:
        return self.error(400, "invalid JSON in request body")

    def not_found(self, method: str, path: str) -> Any:
        return self.error(404, "404 page not found")

    def models(self, models: Sequence[str]) -> Any:
        return {"models": [self._tag(ollama_name(m)) for m in models]}

    def _tag(self, name: str) -> dict[str, Any]:
        digest = hashlib.sha256(name.encode()).hexdigest()
        return {
            "name": name,
            "model": name,
            "modified_at": "2024-01-01T00:00:00Z",
            "size": 100_000_000,
            "digest": digest,
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "scripted",
                "families": ["scripted"],
                "parameter_size": "1B",
                "quantization_level": "Q4_0",
            },
        }

    def version(self) -> Any:
        return {"version": OLLAMA_VERSION}

    def show(self, context_size: int) -> Any:
        """``POST /api/show``: the model's trained context and its ``num_ctx`` parameter."""
        return {
            "parameters": f"num_ctx                        {context_size}",
            "model_info": {"general.architecture": "llama", "llama.context_length": 8192},
            "capabilities": ["completion", "tools"],
        }

    def whole(self, answer: Answer) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": answer.text}
        if answer.reasoning:
            message["thinking"] = "".join(answer.reasoning)
        if answer.tool_calls:
            message["tool_calls"] = self._tool_calls(answer)
        return self._final(answer, message, _now())

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        created = _now()
        head = f'{{"model":{dumps(answer.model)},"created_at":{dumps(created)},'
        prefix = head + '"message":{"role":"assistant","content":'
        thinking = head + '"message":{"role":"assistant","content":"","thinking":'
        pieces = [f'{thinking}{dumps(c)}}},"done":false}}\n'.encode() for c in answer.reasoning]
        pieces += [f'{prefix}{dumps(c)}}},"done":false}}\n'.encode() for c in answer.chunks]
        if answer.tool_calls:
            message = {"role": "assistant", "content": "", "tool_calls": self._tool_calls(answer)}
            pieces.append(f'{head}"message":{dumps(message)},"done":false}}\n'.encode())
        final = self._final(answer, {"role": "assistant", "content": ""}, created)
        return StreamPlan(
            content_type="application/x-ndjson",
            preamble=b"",
            pieces=pieces,
            closing=(dumps(final) + "\n").encode(),
            malformed=prefix.encode() + b'"\n',
            failure=(dumps(self.error(500)) + "\n").encode(),
        )

    def _tool_calls(self, answer: Answer) -> list[dict[str, Any]]:
        return [
            {"function": {"name": name, "arguments": _arguments_object(arguments)}}
            for _, name, arguments in answer.tool_calls
        ]

    def _final(self, answer: Answer, message: dict[str, Any], created: str) -> dict[str, Any]:
        reason = answer.finish_reason
        final: dict[str, Any] = {
            "model": answer.model,
            "created_at": created,
            "message": message,
            "done": True,
            "done_reason": reason if reason and reason != "tool_calls" else "stop",
        }
        if answer.usage:
            prompt, completion = answer.prompt_tokens, answer.completion_tokens
            final.update(
                total_duration=1_000_000 + prompt * 100_000 + completion * 1_000_000,
                load_duration=1_000_000,
                prompt_eval_count=prompt,
                prompt_eval_duration=prompt * 100_000,
                eval_count=completion,
                eval_duration=completion * 1_000_000,
            )
            final.update(answer.usage_fields)
        return final


_OLLAMA_ERRORS = {
    401: "unauthorized",
    429: "too many requests",
    500: "internal server error",
}


def ollama_name(model: str) -> str:
    """The model as Ollama lists it: with a tag, ``:latest`` by default."""
    return model if ":" in model else f"{model}:latest"


def _arguments_object(arguments: Arguments) -> Any:
    # Ollama sends arguments as an object; a raw str that is not a JSON object
    # goes out as a JSON string, so clients can be tested against garbage.
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return parsed if isinstance(parsed, dict) else arguments


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


OPENAI = OpenAI()
OLLAMA = Ollama()
