"""The OpenAI chat-completions wire format (``/v1/models``, ``/v1/chat/completions``).

Liberal in what it accepts: servers that omit ``[DONE]`` after a finish reason,
send usage or not, send tool-call arguments in one piece or many, or put an
``error`` object in the stream are all understood.
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..base._secrets import excerpt
from ..base.content import content_parts, flatten_text, items_from_message, message_content
from ..base.errors import MalformedStream, ServerError, StreamCutOff
from ..base.events import (
    ReasoningDelta,
    ReplyEvent,
    ReplyFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    Usage,
    UsageReported,
)
from ._protocol import Reply, listed_ids, usage_from
from ._sse import SSEDecoder
from ._think import ThinkSplitter, split_think

REASONING_FIELDS = ("reasoning_content", "reasoning")  # vLLM/llama.cpp/DeepSeek; OpenRouter/Ollama


class OpenAIProvider:
    """OpenAI-compatible endpoints: OpenAI, vLLM, llama.cpp, LM Studio, Ollama's ``/v1``."""

    name = "openai"
    models_path = "/models"
    chat_path = "/chat/completions"

    def parse_models(self, data: Any) -> list[str]:
        return listed_ids(data)

    def chat_body(
        self,
        messages: Sequence[dict[str, Any]],
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        stream: bool,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Options become body fields as they are (``max_tokens``, ``seed``, ``top_k``, …)."""
        body: dict[str, Any] = {
            "model": model,
            "messages": [_to_openai(m) for m in messages],
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = list(tools)
        for key, value in (options or {}).items():
            skipped = key == "prompt_cache" or (key == "tool_choice" and not tools)
            if key not in body and not skipped:  # prompt_cache: Anthropic's switch
                body[key] = value
        return body

    def decode_stream(self, chunks: Iterable[bytes]) -> Iterator[ReplyEvent]:
        decoder = SSEDecoder()
        calls = _ToolCallAssembler()
        think = ThinkSplitter()
        finish: str | None = None
        loads = _loads
        for chunk in chunks:
            for payload in decoder.feed(chunk):
                if payload == "[DONE]":
                    yield from think.close()
                    yield from calls.flush()
                    yield ReplyFinished(finish)
                    return
                obj = loads(payload)
                choices = obj.get("choices")
                if choices:
                    choice = choices[0]
                    delta = choice.get("delta") or {}
                    for name in REASONING_FIELDS:
                        if delta.get(name):
                            yield ReasoningDelta(delta[name])
                            break
                    content = delta.get("content")
                    if content:
                        if think.is_done:
                            yield TextDelta(content)
                        else:
                            yield from think.feed(content)
                    if delta.get("tool_calls"):
                        yield from calls.add(delta["tool_calls"])
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                        yield from think.close()
                        yield from calls.flush()
                elif "error" in obj:
                    raise ServerError(f"the endpoint reported an error mid-stream: {_message(obj)}")
                usage = obj.get("usage")
                if usage:
                    yield UsageReported(_usage(usage))
        if finish is None:
            raise StreamCutOff(
                "the answer stream ended before the endpoint said it was done; "
                "the answer is incomplete — ask again"
            )
        yield from think.close()
        yield from calls.flush()
        yield ReplyFinished(finish)

    def parse_reply(self, data: Any) -> Reply:
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise MalformedStream("the endpoint's reply has no choices[0].message") from None
        calls = tuple(ToolCall.from_dict(c) for c in message.get("tool_calls") or ())
        usage = data.get("usage") or {}
        text, reasoning = split_think(message.get("content") or "")
        for name in REASONING_FIELDS:
            if message.get(name):
                reasoning = str(message[name]) + reasoning
                break
        return Reply(
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            usage=_usage(usage),
            finish_reason=choice.get("finish_reason"),
        )

    def error_detail(self, body: bytes) -> str:
        try:
            return _message(json.loads(body))
        except ValueError:
            return excerpt(body.decode("utf-8", "replace").strip(), 200)


def _to_openai(message: dict[str, Any]) -> dict[str, Any]:
    """A message as sent: its context joined to its text, parts only where an image needs them."""
    content = message.get("content")
    if "context" not in message:
        if isinstance(content, list) and flatten_text(content) is not content:
            return {**message, "content": flatten_text(content)}
        return message
    out = {k: v for k, v in message.items() if k != "context"}
    items = items_from_message(message)
    if items:
        text = flatten_text(content) if isinstance(content, list) else content
        if isinstance(text, list):
            out["content"] = [*text, *content_parts("", items)[1:]]
        else:
            out["content"] = message_content(text or "", items)
    return out


def _usage(usage: dict[str, Any]) -> Usage:
    """Usage with the cached part of the prompt (``prompt_tokens_details.cached_tokens``)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return usage_from(usage.get("prompt_tokens"), usage.get("completion_tokens"), cached)


_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _loads(payload: str) -> Any:
    """``json.loads`` for one chunk, without its per-call wrappers (the hot path)."""
    try:
        obj, end = _scan(payload, 0)
    except (StopIteration, ValueError):
        end = -1
    if end != len(payload) or not isinstance(obj, dict):
        try:
            obj = json.loads(payload)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            raise MalformedStream(
                f"the endpoint sent a stream chunk that is not JSON: {excerpt(payload, 80)!r}"
            )
    return obj


def _message(obj: Any) -> str:
    if isinstance(obj, dict):
        error = obj.get("error", obj)
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(obj)


class _ToolCallAssembler:
    """Tool-call deltas, assembled by index into whole calls; each piece passed on as it comes."""

    def __init__(self) -> None:
        self._parts: dict[int, dict[str, Any]] = {}

    def add(self, deltas: list[dict[str, Any]]) -> Iterator[ToolCallDelta]:
        for position, delta in enumerate(deltas):
            index = delta.get("index", position)
            part = self._parts.setdefault(index, {"id": "", "name": "", "arguments": []})
            if delta.get("id"):
                part["id"] = delta["id"]
            function = delta.get("function") or {}
            name = function.get("name")
            if name and part["name"] != name:  # llama.cpp repeats the whole name
                part["name"] += name
            arguments = function.get("arguments")
            if arguments:
                piece = arguments if isinstance(arguments, str) else json.dumps(arguments)
                part["arguments"].append(piece)
                yield ToolCallDelta(index, part["id"], part["name"], piece)

    def flush(self) -> Iterator[ToolCallRequested]:
        parts, self._parts = self._parts, {}
        for index in sorted(parts):
            part = parts[index]
            yield ToolCallRequested(
                ToolCall(
                    id=part["id"] or f"call_{index}",
                    name=part["name"],
                    arguments="".join(part["arguments"]) or "{}",
                )
            )
