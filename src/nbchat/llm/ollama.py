"""Ollama's native wire format (``/api/tags``, ``/api/chat`` as NDJSON)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..base._secrets import excerpt
from ..base.content import CONTEXT_NOTE, items_from_message
from ..base.errors import MalformedStream, ServerError, StreamCutOff
from ..base.events import (
    ReasoningDelta,
    ReplyEvent,
    ReplyFinished,
    ToolCall,
    ToolCallRequested,
    UsageReported,
)
from ._protocol import Reply, usage_from
from ._sse import LineDecoder
from ._think import ThinkSplitter, split_think

# Request fields Ollama reads beside ``options``; every other option goes inside it.
TOP_LEVEL = frozenset({"format", "keep_alive", "think"})
RENAMED = {"max_tokens": "num_predict"}


class OllamaProvider:
    """A local or remote Ollama server."""

    name = "ollama"
    models_path = "/api/tags"
    chat_path = "/api/chat"

    def parse_models(self, data: Any) -> list[str]:
        items = data.get("models", []) if isinstance(data, dict) else []
        return sorted(
            str(item.get("name") or item.get("model"))
            for item in items
            if isinstance(item, dict) and (item.get("name") or item.get("model"))
        )

    def chat_body(
        self,
        messages: Sequence[dict[str, Any]],
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        stream: bool,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Options go into Ollama's ``options`` (``max_tokens`` as ``num_predict``).

        ``format``, ``keep_alive`` and ``think`` are request fields; Ollama has
        no ``tool_choice``, so it is left out.
        """
        body: dict[str, Any] = {
            "model": model,
            "messages": [_to_ollama(m, messages) for m in messages],
            "stream": stream,
        }
        if tools:
            body["tools"] = list(tools)
        inner: dict[str, Any] = {}
        for key, value in (options or {}).items():
            if key in TOP_LEVEL:
                body[key] = value
            elif key == "options" and isinstance(value, Mapping):
                inner.update(value)
            elif key not in ("tool_choice", "prompt_cache"):  # prompt_cache: Anthropic's switch
                inner[RENAMED.get(key, key)] = value
        if inner:
            body["options"] = inner
        return body

    def decode_stream(self, chunks: Iterable[bytes]) -> Iterator[ReplyEvent]:
        decoder = LineDecoder()
        think = ThinkSplitter()
        counter = 0
        for chunk in chunks:
            for line in decoder.feed(chunk):
                obj = _loads(line)
                message = obj.get("message") or {}
                if message.get("thinking"):
                    yield ReasoningDelta(message["thinking"])
                if message.get("content"):
                    yield from think.feed(message["content"])
                for call in message.get("tool_calls") or ():
                    counter += 1
                    yield ToolCallRequested(_call(call, counter))
                if obj.get("done"):
                    yield from think.close()
                    yield UsageReported(
                        usage_from(obj.get("prompt_eval_count"), obj.get("eval_count"))
                    )
                    yield ReplyFinished(obj.get("done_reason") or "stop")
                    return
        for line in decoder.close():
            _loads(line)
        raise StreamCutOff(
            "the answer stream ended before Ollama said it was done; "
            "the answer is incomplete — ask again"
        )

    def parse_reply(self, data: Any) -> Reply:
        if not isinstance(data, dict) or "message" not in data:
            raise MalformedStream("Ollama's reply has no message")
        message = data["message"] or {}
        calls = tuple(_call(c, i) for i, c in enumerate(message.get("tool_calls") or (), 1))
        text, reasoning = split_think(message.get("content") or "")
        return Reply(
            text=text,
            reasoning=str(message.get("thinking") or "") + reasoning,
            tool_calls=calls,
            usage=usage_from(data.get("prompt_eval_count"), data.get("eval_count")),
            finish_reason=data.get("done_reason"),
        )

    def error_detail(self, body: bytes) -> str:
        try:
            data = json.loads(body)
        except ValueError:
            return excerpt(body.decode("utf-8", "replace").strip(), 200)
        return str(data.get("error", data)) if isinstance(data, dict) else str(data)


def _loads(line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError:
        said = excerpt(line, 80)
        raise MalformedStream(f"Ollama sent a line that is not JSON: {said!r}") from None
    if not isinstance(obj, dict):
        raise MalformedStream(f"Ollama sent a line that is not an object: {excerpt(line, 80)!r}")
    if "error" in obj:
        raise ServerError(f"Ollama reported an error mid-stream: {obj['error']}")
    return obj


def _call(data: dict[str, Any], number: int) -> ToolCall:
    function = data.get("function") or {}
    arguments = function.get("arguments", {})
    return ToolCall(
        id=str(data.get("id") or f"call_{number}"),
        name=str(function.get("name", "")),
        arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
    )


def _to_ollama(message: dict[str, Any], messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI-format message in Ollama's shape (object arguments, tool_name, images)."""
    text, images = _text_and_images(message)
    out: dict[str, Any] = {"role": message["role"], "content": text}
    if images:
        out["images"] = images
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"function": {"name": c["function"]["name"], "arguments": _object(c)}}
            for c in message["tool_calls"]
        ]
    if message["role"] == "tool":
        out["tool_name"] = message.get("name") or _name_of(message.get("tool_call_id"), messages)
    return out


def _text_and_images(message: dict[str, Any]) -> tuple[str, list[str]]:
    """Ollama takes one text and a list of base64 images: context and content parts flattened."""
    content = message.get("content") or ""
    texts: list[str] = []
    images: list[str] = []
    parts: list[dict[str, Any]] = (
        content if isinstance(content, list) else [{"type": "text", "text": content}]
    )
    for part in parts:
        if part.get("type") == "text":
            texts.append(str(part.get("text") or ""))
        elif part.get("type") == "image_url":
            image_url: dict[str, Any] = part.get("image_url") or {}
            url = str(image_url.get("url") or "")
            images.append(url.split(",", 1)[1] if url.startswith("data:") else url)
    items = items_from_message(message)
    if items:
        texts.append(CONTEXT_NOTE)
    for item in items:
        texts.append(item.as_text())
        if item.image is not None:
            images.append(item.image.data)
    return "\n\n".join(t for t in texts if t), images


def _object(call: dict[str, Any]) -> Any:
    arguments = call["function"].get("arguments", "{}")
    try:
        return json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return {}


def _name_of(call_id: object, messages: Sequence[dict[str, Any]]) -> str:
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                return str(call["function"]["name"])
    return ""
