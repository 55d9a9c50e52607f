"""Tools on servers that cannot take them: the tool's schema as the reply's grammar.

llama.cpp's server takes ``tool_choice`` only as ``auto``, ``none`` or
``required``, and small models' chat templates often drop ``tools`` altogether.
Its ``response_format`` with a JSON schema holds the reply to the tool's
parameters instead; the reply is then the call's arguments, turned into the
same :class:`~nbchat.base.events.ToolCallRequested` a tool-calling server sends.
Such a template also shows a tool's result under a role the model never
learned, so the round goes back as plain turns (:func:`plain_rounds`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..base.events import ReplyEvent, ReplyFinished, TextDelta, ToolCall, ToolCallRequested
from ._protocol import Reply

_QUOTED = 500  # characters of the question repeated in the hint (a small model copies from it)


def named_tool(
    options: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]] | None
) -> Mapping[str, Any] | None:
    """The function schema that ``tool_choice`` names among ``tools``, if it names one."""
    choice = (options or {}).get("tool_choice")
    if not isinstance(choice, Mapping) or not tools:
        return None
    name = (choice.get("function") or {}).get("name")
    for tool in tools:
        function = tool.get("function") or {}
        if function.get("name") == name:
            return function
    return None


def request(
    messages: Sequence[dict[str, Any]],
    function: Mapping[str, Any],
    options: Mapping[str, Any] | None,
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The messages, options and ``response_format`` that make the reply the tool's arguments.

    The system prompt says which tool the JSON is for, so the model fills in
    the values the question implies.
    """
    described = f" ({function['description']})" if function.get("description") else ""
    asked = next(
        (str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )
    hint = (
        f"Reply with only the JSON arguments for a call of the tool {function['name']}"
        f"{described}, copying the values from this message exactly: {asked[:_QUOTED]}"
    )
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{hint}".strip()
    else:
        out.insert(0, {"role": "system", "content": hint})
    rest = {k: v for k, v in (options or {}).items() if k != "tool_choice"}
    schema = function.get("parameters") or {"type": "object", "properties": {}}
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": str(function["name"]), "schema": schema},
    }
    return out, rest, response_format


def as_call(events: Iterable[ReplyEvent], name: str) -> Iterator[ReplyEvent]:
    """Reply events whose text is the arguments of a call of ``name``, as that call.

    A reply cut short (at the token limit, say) keeps its finish reason and
    becomes no call: half a JSON object is never run.
    """
    arguments: list[str] = []
    for event in events:
        if type(event) is TextDelta:
            arguments.append(event.text)
        elif type(event) is ReplyFinished:
            if event.finish_reason in (None, "stop", "tool_calls"):
                yield ToolCallRequested(_call(name, "".join(arguments)))
                yield ReplyFinished("tool_calls")
            else:
                yield ReplyFinished(event.finish_reason)
            return
        else:
            yield event


def as_reply(reply: Reply, name: str) -> Reply:
    """A whole reply whose text is the arguments of a call of ``name``, as that call."""
    if reply.finish_reason not in (None, "stop", "tool_calls"):
        return Reply(text="", usage=reply.usage, finish_reason=reply.finish_reason)
    return Reply(
        text="",
        reasoning=reply.reasoning,
        tool_calls=(_call(name, reply.text.strip() or "{}"),),
        usage=reply.usage,
        finish_reason="tool_calls",
    )


def plain_rounds(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls and results as plain assistant and user turns, for a template without tools."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            said = [str(message.get("content") or "").strip()]
            for call in message["tool_calls"]:
                function = call.get("function") or {}
                said.append(f"{function.get('name')}({function.get('arguments') or '{}'})")
            out.append({"role": "assistant", "content": "\n".join(filter(None, said))})
        elif role == "tool":
            name = message.get("name") or "The tool"
            answered = f"{name} answered: {message.get('content') or ''}"
            if out and out[-1].get("tool_results"):
                out[-1]["content"] += "\n\n" + answered
            else:
                out.append({"role": "user", "content": answered, "tool_results": True})
        else:
            out.append(message)
    for message in out:
        if message.pop("tool_results", False):
            message["content"] += "\n\nAnswer my question with what it answered."
    return out


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(f"call_{uuid.uuid4().hex[:24]}", name, arguments.strip() or "{}")
