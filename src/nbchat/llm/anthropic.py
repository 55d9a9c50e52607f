"""Anthropic's Messages API (``/v1/models``, ``/v1/messages`` as SSE), in nbchat's events.

Messages arrive in OpenAI format and leave in Anthropic's: system messages
become ``system``, tool results ``tool_result`` blocks in a user message,
context images ``image`` blocks, tool calls ``tool_use`` blocks. ``max_tokens``
is always sent (the API requires it). Prompt caching is on unless the
``prompt_cache`` option is false: ``cache_control`` breakpoints go on the
system prompt, the tools, the last message before the question (so a long
thread is read from the cache at the next question) and the newest tool
result (so the rounds of one tool loop are too).

Stop reasons are told in the OpenAI words the engine reads: ``end_turn`` and
``stop_sequence`` are ``stop``, ``max_tokens`` is ``length``, ``tool_use`` is
``tool_calls``; ``refusal`` stays ``refusal``. Signed thinking blocks come out
as :class:`~nbchat.base.events.ReasoningBlock` as well as their text, and go back
unchanged with the tool results of the same turn.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..base._secrets import excerpt
from ..base.content import CONTEXT_NOTE, items_from_message
from ..base.errors import MalformedStream, ServerError, StreamCutOff
from ..base.events import (
    ReasoningBlock,
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
from ..base.records import token_count
from ._protocol import Reply, listed_ids, usage_from
from ._sse import SSEDecoder
from .openai import _loads

DEFAULT_MAX_TOKENS = 4096  # the API needs a limit; --max-tokens or the max_tokens option changes it
CONTEXT_SIZE = 200_000  # every current Claude model's window (some offer more, on request)
EPHEMERAL = {"type": "ephemeral"}
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}
TOOL_CHOICES = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
# Options nbchat maps itself; every other one is sent as a body field, as it is.
MAPPED = frozenset({"max_tokens", "stop", "tool_choice", "thinking", "prompt_cache"})


class AnthropicProvider:
    """Anthropic's API, and servers that speak it (proxies, the scripted server)."""

    name = "anthropic"
    models_path = "/models?limit=1000"
    chat_path = "/messages"

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
        """The request: ``max_tokens`` always, ``thinking`` from a budget, cache breakpoints."""
        options = options or {}
        cache = options.get("prompt_cache", True) is not False
        system = [
            {"type": "text", "text": _text_of(m.get("content"))}
            for m in messages
            if m.get("role") == "system" and _text_of(m.get("content"))
        ]
        turns = _turns([m for m in messages if m.get("role") != "system"])
        body: dict[str, Any] = {"model": model, "messages": turns, "stream": stream}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [_tool(t) for t in tools]
        if cache:
            _mark_breakpoints(body)
        body["max_tokens"] = _max_tokens(options)
        budget = options.get("thinking")
        if budget is not None and budget is not False:
            body["thinking"] = (
                dict(budget) if isinstance(budget, Mapping)
                else {"type": "enabled", "budget_tokens": budget}
            )  # fmt: skip
        if "stop" in options:
            stop = options["stop"]
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        choice = options.get("tool_choice")
        if choice is not None and tools:
            body["tool_choice"] = _tool_choice(choice)
        for key, value in options.items():
            if key not in MAPPED and key not in body:
                body[key] = value
        return body

    def decode_stream(self, chunks: Iterable[bytes]) -> Iterator[ReplyEvent]:
        decoder = SSEDecoder()
        blocks: dict[int, dict[str, Any]] = {}
        counts: dict[str, Any] = {}
        stop_reason: str | None = None
        loads = _loads
        for chunk in chunks:
            for payload in decoder.feed(chunk):
                event = loads(payload)
                kind = event.get("type")
                if kind == "content_block_delta":
                    delta = event.get("delta") or {}
                    if delta.get("type") == "text_delta":
                        if delta.get("text"):
                            yield TextDelta(delta["text"])
                        continue
                    index = event.get("index", 0)
                    yield from _delta(blocks.get(index), delta, index)
                elif kind == "content_block_start":
                    block = dict(event.get("content_block") or {})
                    blocks[event.get("index", 0)] = block
                    if block.get("type") == "text" and block.get("text"):
                        yield TextDelta(block["text"])
                    elif block.get("type") == "thinking" and block.get("thinking"):
                        yield ReasoningDelta(block["thinking"])
                elif kind == "content_block_stop":
                    yield from _finished_block(blocks.pop(event.get("index", 0), None))
                elif kind == "message_start":
                    counts.update((event.get("message") or {}).get("usage") or {})
                elif kind == "message_delta":
                    stop_reason = (event.get("delta") or {}).get("stop_reason") or stop_reason
                    counts.update({k: v for k, v in (event.get("usage") or {}).items()
                                   if v is not None})  # fmt: skip
                elif kind == "message_stop":
                    yield from _ending(blocks, counts, stop_reason)
                    return
                elif kind == "error":
                    raise ServerError(
                        f"the endpoint reported an error mid-stream: {_message(event)}"
                    )
        if stop_reason is None:
            raise StreamCutOff(
                "the answer stream ended before the endpoint said it was done; "
                "the answer is incomplete — ask again"
            )
        yield from _ending(blocks, counts, stop_reason)

    def parse_reply(self, data: Any) -> Reply:
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise MalformedStream("the endpoint's reply has no content list")
        text: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        kept: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                text.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                calls.append(_call(block, json.dumps(block.get("input") or {})))
            elif kind in ("thinking", "redacted_thinking"):
                thinking.append(str(block.get("thinking") or ""))
                kept.append(block)
        return Reply(
            text="".join(text),
            reasoning="".join(thinking),
            tool_calls=tuple(calls),
            usage=_usage(data.get("usage") or {}),
            finish_reason=_finish(data.get("stop_reason")),
            extra={"reasoning_blocks": kept} if kept else {},
        )

    def error_detail(self, body: bytes) -> str:
        try:
            return _message(json.loads(body))
        except ValueError:
            return excerpt(body.decode("utf-8", "replace").strip(), 200)


# -- requests -------------------------------------------------------------------


def _turns(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-format messages as alternating user and assistant turns of content blocks."""
    last_question = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages)
    )
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "assistant":
            blocks = _assistant_blocks(message, keep_reasoning=index > last_question)
        elif role == "tool":
            role, blocks = "user", [_tool_result(message)]
        else:
            role, blocks = "user", _user_blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # the API wants the roles to alternate
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _user_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content") or ""
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    blocks = [b for b in map(_block_from_part, parts) if b is not None]
    items = items_from_message(message)
    if items:
        blocks.append({"type": "text", "text": CONTEXT_NOTE})
    for item in items:
        blocks.append({"type": "text", "text": item.as_text()})
        if item.image is not None:
            blocks.append(_image(item.image.mime, item.image.data))
    return blocks


def _block_from_part(part: Any) -> dict[str, Any] | None:
    """An OpenAI content part as an Anthropic block (None for an empty text)."""
    if not isinstance(part, dict):
        return None
    if part.get("type") == "text":
        return {"type": "text", "text": part["text"]} if part.get("text") else None
    if part.get("type") == "image_url":
        url = str((part.get("image_url") or {}).get("url") or "")
        if url.startswith("data:") and "," in url:
            head, data = url[5:].split(",", 1)
            return _image(head.split(";", 1)[0], data)
        return {"type": "image", "source": {"type": "url", "url": url}}
    return dict(part)  # already an Anthropic block


def _image(mime: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}


def _assistant_blocks(message: dict[str, Any], *, keep_reasoning: bool) -> list[dict[str, Any]]:
    """Reasoning (within the question's tool loop only), text, then tool calls."""
    blocks = [dict(b) for b in message.get("reasoning_blocks") or ()] if keep_reasoning else []
    text = _text_of(message.get("content"))
    if text.strip():
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": _object(function.get("arguments")),
            }
        )
    return blocks


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": _text_of(message.get("content")) or "(no output)",
    }


def _tool(schema: dict[str, Any]) -> dict[str, Any]:
    function = schema.get("function") or schema
    tool: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _tool_choice(choice: Any) -> dict[str, Any]:
    if isinstance(choice, str):
        return dict(TOOL_CHOICES.get(choice) or {"type": "tool", "name": choice})
    function = choice.get("function") if isinstance(choice, dict) else None
    if isinstance(function, dict) and function.get("name"):
        return {"type": "tool", "name": function["name"]}
    return dict(choice)


def _max_tokens(options: Mapping[str, Any]) -> int:
    """The answer's limit: as set, else the default (above a thinking budget, part of it)."""
    limit = options.get("max_tokens")
    if isinstance(limit, int) and not isinstance(limit, bool):
        return limit
    budget = options.get("thinking")
    if isinstance(budget, int) and not isinstance(budget, bool):
        return budget + DEFAULT_MAX_TOKENS
    return DEFAULT_MAX_TOKENS


def _mark_breakpoints(body: dict[str, Any]) -> None:
    """``cache_control`` on the system prompt, the tools, the last earlier turn, the newest result.

    Four at most (the API's limit): the last message before the newest
    question caches the thread so far; a request that ends in tool results
    also caches its last result, for the next round of the loop.
    """
    if body.get("system"):
        body["system"][-1]["cache_control"] = EPHEMERAL
    if body.get("tools"):
        body["tools"][-1]["cache_control"] = EPHEMERAL
    turns = body["messages"]
    questions = [i for i, t in enumerate(turns) if t["role"] == "user" and not _is_results(t)]
    if questions and questions[-1] > 0:
        turns[questions[-1] - 1]["content"][-1]["cache_control"] = EPHEMERAL
    if turns and _is_results(turns[-1]):
        turns[-1]["content"][-1]["cache_control"] = EPHEMERAL


def _is_results(turn: dict[str, Any]) -> bool:
    return turn["role"] == "user" and all(b.get("type") == "tool_result" for b in turn["content"])


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or "") for p in content if isinstance(p, dict) and "text" in p
        )
    return str(content or "")


def _object(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments if isinstance(arguments, dict) else {}
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


# -- replies --------------------------------------------------------------------


def _delta(block: dict[str, Any] | None, delta: dict[str, Any], index: Any) -> Iterator[ReplyEvent]:
    """Keep a non-text delta with its block; thinking text and call arguments also pass on."""
    if block is None:
        return
    kind = delta.get("type")
    if kind == "input_json_delta":
        piece = str(delta.get("partial_json") or "")
        block.setdefault("_json", []).append(piece)
        if piece and isinstance(index, int):
            yield ToolCallDelta(index, str(block.get("id") or ""), str(block.get("name") or ""),
                                piece)  # fmt: skip
    elif kind == "thinking_delta":
        piece = str(delta.get("thinking") or "")
        block["thinking"] = str(block.get("thinking") or "") + piece
        if piece:
            yield ReasoningDelta(piece)
    elif kind == "signature_delta":
        block["signature"] = str(block.get("signature") or "") + str(delta.get("signature") or "")


def _finished_block(block: dict[str, Any] | None) -> Iterator[ReplyEvent]:
    if block is None:
        return
    kind = block.get("type")
    if kind == "tool_use":
        pieces = block.get("_json")
        arguments = "".join(pieces) if pieces else json.dumps(block.get("input") or {})
        yield ToolCallRequested(_call(block, arguments or "{}"))
    elif kind in ("thinking", "redacted_thinking"):
        yield ReasoningBlock({k: v for k, v in block.items() if not k.startswith("_")})


def _ending(
    blocks: dict[int, dict[str, Any]], counts: dict[str, Any], stop_reason: str | None
) -> Iterator[ReplyEvent]:
    """Blocks a cut stream left open (a tool call cut at the limit), the usage, the finish."""
    for index in sorted(blocks):
        yield from _finished_block(blocks.pop(index))
    if counts:
        yield UsageReported(_usage(counts))
    yield ReplyFinished(_finish(stop_reason))


def _call(block: dict[str, Any], arguments: str) -> ToolCall:
    # A result must name its call: one sent without an id gets one, as on the other wires.
    call_id = str(block.get("id") or f"call_{uuid.uuid4().hex[:24]}")
    return ToolCall(id=call_id, name=str(block.get("name") or ""), arguments=arguments)


def _usage(counts: Mapping[str, Any]) -> Usage:
    """Anthropic's counts as nbchat's: the prompt is its uncached, read and written parts."""
    parts = [counts.get(k) for k in ("input_tokens", "cache_read_input_tokens",
                                     "cache_creation_input_tokens")]  # fmt: skip
    given = [token_count(parts[0]), *(token_count(n) for n in parts[1:] if n is not None)]
    numbers = [n for n in given if n is not None]
    prompt = sum(numbers) if len(numbers) == len(given) else None  # one bad part: unknown
    return usage_from(prompt, counts.get("output_tokens"), parts[1], parts[2])


def _finish(stop_reason: object) -> str | None:
    if not isinstance(stop_reason, str):
        return None
    return STOP_REASONS.get(stop_reason, stop_reason)


def _message(obj: Any) -> str:
    """``Overloaded (overloaded_error)`` from Anthropic's ``{"type": "error", "error": {…}}``."""
    error = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(error, dict):
        message, kind = error.get("message"), error.get("type")
        if message and kind and kind != "error":
            return f"{message} ({kind})"
        return str(message or error)
    return str(error)
