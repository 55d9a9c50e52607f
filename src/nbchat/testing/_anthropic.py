"""Anthropic's Messages API as the server speaks it: bodies, streams, errors, the prompt cache.

Pure like :mod:`._protocols`. Requests are checked the way the real API
checks them where a client can get it wrong: ``max_tokens`` is required, tool
results must answer the tool calls just before them, and with ``thinking``
on, the assistant turn of a tool loop must start with the thinking block it
was sent, signature intact. :class:`PromptCache` plays the API's prompt
cache: a prefix ending at a ``cache_control`` breakpoint is written, and a
later request starting with it reads it (looking back up to 20 blocks from
each breakpoint, as the API does).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._protocols import Answer, StreamPlan, _reason, dumps, split_arguments
from ._script import Body, arguments_json

MODELS_CREATED_AT = "2025-01-01T00:00:00Z"
LOOKBACK = 20  # blocks before a breakpoint where the API looks for an earlier cached prefix
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def signature(thinking: str) -> str:
    """The signature the server gives a thinking text, and checks when it comes back."""
    return base64.b64encode(hashlib.sha256(thinking.encode()).digest()).decode()


@dataclass(frozen=True)
class Cached:
    """What a request read from and wrote to the prompt cache, in tokens."""

    read: int = 0
    write: int = 0


class PromptCache:
    """Prefixes written at breakpoints, per model; not thread-safe (the server locks it)."""

    def __init__(self) -> None:
        self._prefixes: set[str] = set()

    def use(self, body: Body) -> Cached:
        """Read the longest cached prefix the breakpoints reach, then write each breakpoint's."""
        blocks = request_blocks(body)
        marks = [i for i, block in enumerate(blocks) if "cache_control" in block]
        if not marks:
            return Cached()
        keys, sizes, running = [], [], 0
        digest = hashlib.sha256(str(body.get("model")).encode())
        for block in blocks:
            digest.update(dumps({k: v for k, v in block.items() if k != "cache_control"}).encode())
            keys.append(digest.copy().hexdigest())
            running += block_tokens(block)
            sizes.append(running)
        hit = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if keys[i] in self._prefixes:
                    hit = max(hit, i)
                    break
        self._prefixes.update(keys[mark] for mark in marks)
        read = sizes[hit] if hit >= 0 else 0
        return Cached(read=read, write=max(0, sizes[marks[-1]] - read))


def request_blocks(body: Body) -> list[dict[str, Any]]:
    """The cacheable blocks of a request in the API's order: tools, system, messages."""
    blocks = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append({"type": "text", "text": system})
    elif isinstance(system, list):
        blocks += [b for b in system if isinstance(b, dict)]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content, "role": message.get("role")})
        elif isinstance(content, list):
            blocks += [b for b in content if isinstance(b, dict)]
    return blocks


def block_tokens(block: Mapping[str, Any]) -> int:
    """A deterministic stand-in for a block's token count: the words of its text or JSON."""
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text") or "")
    elif kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else dumps(content)
    elif kind == "image":
        return 100
    else:
        text = dumps({k: v for k, v in block.items() if k != "cache_control"})
    return max(1, len(text.split()))


def prompt_tokens(body: Body) -> int:
    return max(1, sum(block_tokens(b) for b in request_blocks(body)))


def openai_messages(body: Body) -> list[dict[str, Any]]:
    """The request's conversation in OpenAI's shape, for scripts, logs and the demo answer.

    The system prompt comes first; a user turn of ``tool_result`` blocks
    becomes tool messages; text blocks are joined, images become
    ``image_url`` data-URL parts.
    """
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = system if isinstance(system, str) else _joined(system)
        out.append({"role": "system", "content": text})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        blocks = [b for b in blocks if isinstance(b, dict)]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for result in results:
            content_of = result.get("content")
            text = content_of if isinstance(content_of, str) else _joined(content_of or [])
            out.append({"role": "tool", "tool_call_id": result.get("tool_use_id"), "content": text})
        rest = [b for b in blocks if b.get("type") != "tool_result"]
        if results and not rest:
            continue
        entry: dict[str, Any] = {"role": role, "content": _openai_content(rest)}
        calls = [b for b in rest if b.get("type") == "tool_use"]
        if calls:
            entry["tool_calls"] = [
                {"id": b.get("id"), "type": "function",
                 "function": {"name": b.get("name"), "arguments": dumps(b.get("input") or {})}}
                for b in calls
            ]  # fmt: skip
        out.append(entry)
    return out


def _openai_content(blocks: list[dict[str, Any]]) -> Any:
    images = [b for b in blocks if b.get("type") == "image"]
    if not images:
        return _joined(blocks)
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "text":
            parts.append({"type": "text", "text": block.get("text", "")})
        elif block.get("type") == "image":
            source = block.get("source") or {}
            data = f"data:{source.get('media_type')};base64,{source.get('data')}"
            url = source.get("url") or data
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _joined(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return str(blocks or "")
    return "\n\n".join(str(b.get("text") or "") for b in blocks
                   if isinstance(b, dict) and b.get("type") == "text")  # fmt: skip


def request_problem(body: Body) -> str | None:
    """What the real API would reject in this request (HTTP 400), or None."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        problem = _system_problem(messages, index)
        if problem:
            return problem
        content = message.get("content")
        if content == "" or content == []:
            return f"messages.{index}: all messages must have non-empty content"
        if isinstance(content, list):
            for block in content:
                if block.get("type") == "text" and not block.get("text"):
                    return f"messages.{index}: text content blocks must be non-empty"
        problem = _results_problem(messages, index)
        if problem:
            return problem
    if _thinking_on(body):
        return _thinking_problem(messages)
    return None


def _system_problem(messages: list[dict[str, Any]], index: int) -> str | None:
    """A ``system`` message may come mid-conversation, right after a user turn, as Claude
    Code sends its MCP servers' instructions; first or after the assistant, it is refused."""
    if messages[index].get("role") != "system":
        return None
    if not index:
        return "messages: Unexpected role \"system\". Use the top-level `system` parameter"
    if messages[index - 1].get("role") != "user":
        return f"messages.{index}: a `system` message must immediately follow a `user` message"
    return None


def _results_problem(messages: list[dict[str, Any]], index: int) -> str | None:
    content = messages[index].get("content")
    results = [b.get("tool_use_id") for b in content if b.get("type") == "tool_result"] if (
        isinstance(content, list)) else []  # fmt: skip
    if not results:
        return None
    before = messages[index - 1].get("content") if index else None
    asked = {b.get("id") for b in before if b.get("type") == "tool_use"} if (
        isinstance(before, list)) else set()  # fmt: skip
    for call_id in results:
        if call_id not in asked:
            return (
                f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                f"blocks: {call_id}. Each `tool_result` block must have a corresponding "
                f"`tool_use` block in the previous message."
            )
    return None


def _thinking_on(body: Body) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _thinking_problem(messages: list[dict[str, Any]]) -> str | None:
    """A tool loop's assistant turn must start with its thinking, returned unchanged."""
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, list):
        return None
    if not any(b.get("type") == "tool_result" for b in content) or len(messages) < 2:
        return None
    index = len(messages) - 2
    blocks = messages[index].get("content")
    first = blocks[0] if isinstance(blocks, list) and blocks else {}
    if first.get("type") not in ("thinking", "redacted_thinking"):
        found = first.get("type") if isinstance(first, dict) else "text"
        return (
            f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, "
            f"but found `{found}`. When `thinking` is enabled, a final `assistant` message "
            f"must start with a thinking block."
        )
    if first.get("type") == "thinking" and first.get("signature") != signature(
        str(first.get("thinking") or "")
    ):
        return f"messages.{index}.content.0: Invalid `signature` in `thinking` block"
    return None


class Anthropic:
    """Anthropic's ``/v1/messages``, models list and ``{"type": "error", …}`` bodies."""

    name = "anthropic"
    chat_path = "/v1/messages"

    def is_stream(self, body: Body) -> bool:
        return body.get("stream") is True

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        kind = code or _ERRORS.get(status, "api_error")
        default = "Overloaded" if status == 529 else _reason(status)
        return {"type": "error", "error": {"type": kind, "message": message or default}}

    def unknown_model(self, model: str) -> Any:
        return self.error(404, f"model: {model}")

    def missing_model(self) -> Any:
        return self.error(400, "model: Field required")

    def no_images(self, model: str) -> Any:
        return self.error(400, f"model {model} does not support image input")

    def bad_json(self) -> Any:
        return self.error(400, "The request body is not valid JSON.")

    def not_found(self, method: str, path: str) -> Any:
        return self.error(404, f"Not found: {method} {path}")

    def models(self, models: list[str] | tuple[str, ...]) -> Any:
        data = [
            {"type": "model", "id": m, "display_name": m, "created_at": MODELS_CREATED_AT}
            for m in models
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }

    def overflow(self, prompt: int, context_size: int) -> Any:
        return self.error(400, f"prompt is too long: {prompt} tokens > {context_size} maximum")

    def whole(self, answer: Answer) -> Any:
        content: list[dict[str, Any]] = []
        if answer.reasoning:
            thinking = "".join(answer.reasoning)
            content.append(
                {"type": "thinking", "thinking": thinking, "signature": signature(thinking)}
            )
        if answer.redacted_thinking:
            content.append({"type": "redacted_thinking", "data": answer.redacted_thinking})
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for call_id, name, arguments in answer.tool_calls:
            content.append(
                {"type": "tool_use", "id": call_id, "name": name, "input": _input(arguments)}
            )
        return {
            "id": _message_id(answer),
            "type": "message",
            "role": "assistant",
            "model": answer.model,
            "content": content,
            "stop_reason": None if answer.no_finish else self._stop_reason(answer),
            "stop_sequence": None,
            "usage": {**self._input_usage(answer), "output_tokens": answer.completion_tokens,
                      **answer.usage_fields},
        }

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        start = {
            "type": "message_start",
            "message": {
                "id": _message_id(answer), "type": "message", "role": "assistant",
                "model": answer.model, "content": [], "stop_reason": None,
                "stop_sequence": None,
                "usage": {**self._input_usage(answer), "output_tokens": 1, **answer.usage_fields},
            },
        }  # fmt: skip
        pieces: list[bytes] = []
        index = 0
        if answer.reasoning:
            thinking = "".join(answer.reasoning)
            opened: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": c} for c in answer.reasoning]
            ending = [{"type": "signature_delta", "signature": signature(thinking)}]
            pieces += _block(index, opened, deltas, ending)
            index += 1
        if answer.redacted_thinking:
            opened = {"type": "redacted_thinking", "data": answer.redacted_thinking}
            pieces += _block(index, opened, [], [])
            index += 1
        if answer.chunks:
            deltas = [{"type": "text_delta", "text": c} for c in answer.chunks]
            pieces += _block(index, {"type": "text", "text": ""}, deltas, [])
            index += 1
        for call_id, name, arguments in answer.tool_calls:
            opened = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            parts = split_arguments(arguments_json(arguments))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in parts]
            pieces += _block(index, opened, deltas, [])
            index += 1
        closing = b""
        if not answer.no_finish:
            delta = {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop_reason(answer), "stop_sequence": None},
                "usage": {"output_tokens": answer.completion_tokens, **answer.usage_fields},
            }
            closing = _event("message_delta", delta)
        return StreamPlan(
            content_type="text/event-stream; charset=utf-8",
            preamble=_event("message_start", start) + _event("ping", {"type": "ping"}),
            pieces=pieces,
            closing=closing + _event("message_stop", {"type": "message_stop"}),
            malformed=b'event: content_block_delta\ndata: {"type":"content_block_delta",\n\n',
            failure=_event("error", self.error(529)),
        )

    def _stop_reason(self, answer: Answer) -> str:
        reason = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
        return STOP_REASONS.get(reason, reason)

    def _input_usage(self, answer: Answer) -> dict[str, int]:
        fresh = answer.prompt_tokens - answer.cache_read_tokens - answer.cache_write_tokens
        return {
            "input_tokens": max(0, fresh),
            "cache_creation_input_tokens": answer.cache_write_tokens,
            "cache_read_input_tokens": answer.cache_read_tokens,
        }


def _block(
    index: int, opened: dict[str, Any], deltas: list[dict[str, Any]], ending: list[dict[str, Any]]
) -> list[bytes]:
    """A content block's events, as counted pieces: its start rides on the first, its stop on
    the last (a signature goes out with the stop, so a cut stream never holds a whole block)."""
    start = _event("content_block_start",
                   {"type": "content_block_start", "index": index, "content_block": opened})
    events = [_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": d}) for d in deltas]  # fmt: skip
    stop = b"".join(
        _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in ending
    ) + _event("content_block_stop", {"type": "content_block_stop", "index": index})
    if not events:
        return [start + stop]
    events[0] = start + events[0]
    events[-1] += stop
    return events


def _event(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {dumps(data)}\n\n".encode()


def _input(arguments: Any) -> Any:
    if isinstance(arguments, dict):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _message_id(answer: Answer) -> str:
    return answer.response_id.replace("chatcmpl-", "msg_")


ANTHROPIC = Anthropic()
