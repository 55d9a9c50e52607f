"""Message: one user, assistant or tool message, checked when it is made.

What the engine holds of a conversation: a ChatHistory's messages and the
messages a turn adds (its replies, tool calls and tool results). They become
OpenAI-shaped dicts only where they leave the engine, for the wire
(:meth:`Message.to_dict`, which :func:`wire_messages` puts behind the system
prompt) and for the stores; :meth:`Message.from_dict` reads them back and
checks them like user input. The system prompt is not a message: a
ChatHistory holds it apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from .content import ContextItem
from .errors import InputError
from .events import ToolCall

Role = Literal["user", "assistant", "tool"]
ROLES: tuple[str, ...] = get_args(Role)


@dataclass(frozen=True)
class Message:
    """One user, assistant or tool message (the system prompt is not a message)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    context: tuple[ContextItem, ...] = field(default=(), repr=False)
    """Objects attached to a user question (sent apart from its text)."""
    reasoning_blocks: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    """An assistant reply's signed reasoning, as the endpoint sent it, to send back unchanged
    within the turn that made it (Anthropic's thinking blocks)."""

    def __post_init__(self) -> None:
        if self.role == "system":
            raise InputError(
                "the system prompt is not a message; set ChatHistory.system "
                "(or pass system=... to ChatHistory) instead"
            )
        if self.role not in ROLES:
            raise InputError(f"unknown message role {self.role!r}; use one of: {', '.join(ROLES)}")
        if not isinstance(self.content, str):
            raise InputError(
                f"{self.role} message content must be a string, got {type(self.content).__name__}"
            )
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "reasoning_blocks", tuple(self.reasoning_blocks))
        object.__setattr__(self, "context", tuple(map(ContextItem.from_dict, self.context)))
        if self.context and self.role != "user":
            raise InputError(f"context belongs to user messages, not {self.role} messages")
        self._check_tool_fields()

    def _check_tool_fields(self) -> None:
        if self.tool_calls and self.role != "assistant":
            raise InputError(f"only assistant messages have tool_calls, not {self.role} messages")
        for call in self.tool_calls:
            if not isinstance(call, ToolCall):
                raise InputError(f"tool_calls must hold ToolCall objects, got {call!r}")
        if self.role == "tool" and not (self.tool_call_id and isinstance(self.tool_call_id, str)):
            raise InputError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and (self.tool_call_id is not None or self.name is not None):
            raise InputError(f"tool_call_id and name belong to tool messages, not {self.role}")
        blocks = self.reasoning_blocks
        if blocks and (self.role != "assistant" or not all(isinstance(b, Mapping) for b in blocks)):
            raise InputError("reasoning_blocks belong to assistant replies, as the endpoint sent")
        if self.name is not None and not isinstance(self.name, str):
            raise InputError(f"a tool message's name must be a string, got {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The message in OpenAI chat format."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.context:
            data["context"] = [item.to_dict() for item in self.context]
        if self.reasoning_blocks:
            data["reasoning_blocks"] = [dict(block) for block in self.reasoning_blocks]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """A message from an OpenAI-format dict; assistant ``content: None`` reads as ""."""
        if not isinstance(data, Mapping):
            raise InputError(f"a message must be a dict in OpenAI format, got {data!r}")
        if "role" not in data:
            raise InputError(f"a message needs a role ({', '.join(ROLES)}), got {dict(data)!r}")
        content: Any = data.get("content")
        calls = [
            call if isinstance(call, ToolCall) else _tool_call_from_dict(call)
            for call in data.get("tool_calls") or ()
        ]
        return cls(
            role=data["role"],
            content="" if content is None and data["role"] == "assistant" else content,
            tool_calls=tuple(calls),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            context=tuple(data.get("context") or ()),
            reasoning_blocks=tuple(data.get("reasoning_blocks") or ()),
        )


def _tool_call_from_dict(data: object) -> ToolCall:
    if not isinstance(data, Mapping) or not isinstance(data.get("function"), Mapping):
        raise InputError(
            f"a tool call must look like {{'id': ..., 'function': {{'name': ..., "
            f"'arguments': ...}}}}, got {data!r}"
        )
    return ToolCall.from_dict(dict(data))



def to_message(message: object) -> Message:
    """``message`` as a history keeps it: a Message, or an OpenAI-format dict read and checked.

    Signed reasoning is left out: it goes back to the endpoint only within the turn
    that made it, so a history (and its JSON) never carries it.
    """
    if isinstance(message, Mapping):
        message = Message.from_dict(message)
    if not isinstance(message, Message):
        raise InputError(f"a message must be a Message or an OpenAI-format dict, got {message!r}")
    return replace(message, reasoning_blocks=()) if message.reasoning_blocks else message


def wire_messages(system: str | None, messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A request's messages in OpenAI chat format: the system prompt (if any), then ``messages``."""
    head = [{"role": "system", "content": system}] if system else []
    return head + [message.to_dict() for message in messages]
