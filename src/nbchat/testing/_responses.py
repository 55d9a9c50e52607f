"""OpenAI's Responses API as the server speaks it: ``POST /v1/responses``, whole and streamed.

Pure like :mod:`._protocols`. A request's ``instructions`` and ``input``
items become the OpenAI chat shape (:func:`openai_messages`), so the same
scripts pick the reply: a ``function_call_output`` item is a tool message
answering the ``function_call`` item with its ``call_id``. The answer goes
out as a ``response`` object whose ``output`` holds a ``message`` item (one
``output_text`` part) and one ``function_call`` item per call; a stream is
the API's named events (``response.created`` … ``response.completed``), each
``data:`` carrying its ``type`` and a ``sequence_number`` counted from 0.

A ``length`` finish is ``status: "incomplete"`` (``max_output_tokens``) and
ends the stream with ``response.incomplete``; an error mid-stream
(``error_after``) is ``response.failed``. Reasoning is not played. Nothing
is stored, so a ``previous_response_id`` is refused as unknown, as the API
refuses one it has not kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from ._protocols import Answer, OpenAI, StreamPlan, dumps, split_arguments
from ._script import Body, arguments_json

SEPARATOR = "__"  # between a namespace and its tool's name, as Codex spells MCP tools
INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
# Request fields the response object echoes, with the API's defaults.
_ECHOED: dict[str, Any] = {
    "instructions": None,
    "max_output_tokens": None,
    "max_tool_calls": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
    "user": None,
}


def openai_messages(body: Body) -> list[dict[str, Any]]:
    """The request's conversation in OpenAI's chat shape, for scripts, logs and the demo answer.

    ``instructions`` comes first as a system message; ``input`` is a user
    message when it is a string, else its items in order: messages (their
    ``input_text``/``output_text`` parts as text, ``input_image`` as
    ``image_url``), ``function_call`` items as the assistant's ``tool_calls``
    and ``function_call_output`` items as tool messages. Other items
    (reasoning, say) are left out. A call inside a namespace is named
    ``NAMESPACE__TOOL``, as scripts name it.
    """
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        return [*out, {"role": "user", "content": items}]
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            out.append({"role": item.get("role"), "content": _content(item.get("content"))})
        elif kind == "function_call":
            name = item.get("name")
            if item.get("namespace"):
                name = f"{item['namespace']}{SEPARATOR}{name}"
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": name, "arguments": item.get("arguments")},
            }
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _text(_content(output))
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    return out


def _content(content: Any) -> Any:
    """A message's content: a str as it is, parts as chat-completions parts."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("input_text", "output_text", "text", "refusal"):
            parts.append({"type": "text", "text": part.get("text") or part.get("refusal") or ""})
        elif part.get("type") == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url") or ""}})
    if all(p["type"] == "text" for p in parts):
        return _text(parts)
    return parts


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def request_problem(body: Body) -> str | None:
    """What the real API would reject in this request (HTTP 400), or None."""
    previous = body.get("previous_response_id")
    if previous is not None:
        return f"Previous response with id '{previous}' not found."
    if "input" in body and not isinstance(body["input"], (str, list)):
        return "Invalid type for 'input': expected a string or an array of input items."
    return None


class Responses(OpenAI):
    """OpenAI's ``/v1/responses``; errors and models as the rest of OpenAI's ``/v1``."""

    name = "responses"
    chat_path = "/v1/responses"

    def whole(self, answer: Answer, body: Body | None = None) -> Any:
        output = [item for item, _ in _items(answer, body or {})]
        return _response(answer, body or {}, self._status(answer), output, self._usage(answer))

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        numbers = iter(range(1 << 62))
        started = _response(answer, body, "in_progress", [], None)
        preamble = _event("response.created", {"response": started}, numbers)
        preamble += _event("response.in_progress", {"response": started}, numbers)
        pieces: list[bytes] = []
        output: list[dict[str, Any]] = []
        for index, (item, deltas) in enumerate(_items(answer, body)):
            pieces += _item_events(index, item, deltas, numbers)
            output.append(item)
        status = self._status(answer)
        ending = {"completed": "response.completed", "incomplete": "response.incomplete"}[status]
        final = _response(answer, body, status, output, self._usage(answer))
        closing = b"" if answer.no_finish else _event(ending, {"response": final}, numbers)
        failed = {
            **final,
            "status": "failed",
            "usage": None,
            "error": {"code": "server_error", "message": self.error(500)["error"]["message"]},
        }
        return StreamPlan(
            content_type="text/event-stream; charset=utf-8",
            preamble=preamble,
            pieces=pieces,
            closing=closing,
            malformed=b'event: response.output_text.delta\ndata: {"type":"response.output_text\n\n',
            failure=_event("response.failed", {"response": failed}, numbers),
        )

    def _status(self, answer: Answer) -> str:
        return "incomplete" if answer.finish_reason in INCOMPLETE_REASONS else "completed"

    def _usage(self, answer: Answer) -> dict[str, Any]:
        prompt, completion = answer.prompt_tokens, answer.completion_tokens
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": answer.cache_read_tokens},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
        return {**usage, **answer.usage_fields}


def _response_id(answer: Answer) -> str:
    return answer.response_id.replace("chatcmpl-", "resp_")


def _response(
    answer: Answer, body: Body, status: str, output: list[Any], usage: Any
) -> dict[str, Any]:
    """The ``response`` object, echoing what the request set."""
    reason = INCOMPLETE_REASONS.get(answer.finish_reason or "") if status == "incomplete" else None
    return {
        "id": _response_id(answer),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        **{key: body.get(key, default) for key, default in _ECHOED.items()},
        "model": answer.model,
        "output": output,
        "service_tier": "default",
        "usage": usage,
    }


def _items(answer: Answer, body: Body) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """Each output item, completed, with the deltas that stream it: text, then the calls."""
    namespaced = _namespaced(body)
    base = _response_id(answer).removeprefix("resp_")
    if answer.text or not answer.tool_calls:
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": answer.text}
        message = {"id": f"msg_{base}", "type": "message", "status": "completed",
                   "role": "assistant", "content": [part]}  # fmt: skip
        yield message, answer.chunks
    for number, (call_id, name, arguments) in enumerate(answer.tool_calls, 1):
        text = arguments_json(arguments)
        call = {"id": f"fc_{base}-{number}", "type": "function_call", "status": "completed",
                "arguments": text, "call_id": call_id, "name": name}  # fmt: skip
        if name in namespaced:
            call["namespace"], call["name"] = namespaced[name]
        yield call, split_arguments(text)


def _namespaced(body: Body) -> dict[str, tuple[str, str]]:
    """``NAMESPACE__TOOL`` → (namespace, tool) for the tools inside the request's namespaces,
    unless a top-level function has that very name."""
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    found = {}
    for space in (t for t in tools if t.get("type") == "namespace"):
        for tool in space.get("tools") or []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                name = f"{space.get('name')}{SEPARATOR}{tool['name']}"
                found[name] = (space["name"], tool["name"])
    for tool in tools:
        found.pop(str(tool.get("name")), None)
    return found


def _item_events(
    index: int, item: dict[str, Any], deltas: list[str], numbers: Iterator[int]
) -> list[bytes]:
    """One output item's events, as counted pieces: the opening events ride on the first
    delta, the closing ones on the last (so a cut stream never holds a whole item)."""
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        part = item["content"][0]
        at = {**where, "content_index": 0}
        opened = {**item, "status": "in_progress", "content": []}
        opening = [
            ("response.output_item.added", {"output_index": index, "item": opened}),
            ("response.content_part.added", {**at, "part": {**part, "text": ""}}),
        ]
        steps = [("response.output_text.delta", {**at, "delta": d, "logprobs": []}) for d in deltas]
        closing = [("response.output_text.done", {**at, "text": part["text"], "logprobs": []}),
                   ("response.content_part.done", {**at, "part": part})]  # fmt: skip
    else:
        opened = {**item, "status": "in_progress", "arguments": ""}
        opening = [("response.output_item.added", {"output_index": index, "item": opened})]
        steps = [("response.function_call_arguments.delta", {**where, "delta": d}) for d in deltas]
        closing = [("response.function_call_arguments.done",
                    {**where, "arguments": item["arguments"]})]  # fmt: skip
    closing.append(("response.output_item.done", {"output_index": index, "item": item}))
    head = b"".join(_event(name, data, numbers) for name, data in opening)
    events = [_event(name, data, numbers) for name, data in steps]
    tail = b"".join(_event(name, data, numbers) for name, data in closing)
    if not events:
        return [head + tail]
    events[0] = head + events[0]
    events[-1] += tail
    return events


def _event(name: str, data: dict[str, Any], numbers: Iterator[int]) -> bytes:
    payload = {"type": name, **data, "sequence_number": next(numbers)}
    return f"event: {name}\ndata: {dumps(payload)}\n\n".encode()


RESPONSES = Responses()
