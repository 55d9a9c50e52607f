"""Message: one user, assistant or tool message of a history, checked when it is made.

The system prompt is not a message: a ChatHistory holds it apart. Messages
cross into the wire format as OpenAI-shaped dicts through ``to_dict`` and
``from_dict``, which check them like user input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..base.content import ContextItem
from ..base.errors import InputError
from ..base.events import ToolCall

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
        )


def _tool_call_from_dict(data: object) -> ToolCall:
    if not isinstance(data, Mapping) or not isinstance(data.get("function"), Mapping):
        raise InputError(
            f"a tool call must look like {{'id': ..., 'function': {{'name': ..., "
            f"'arguments': ...}}}}, got {data!r}"
        )
    return ToolCall.from_dict(dict(data))



def to_message(message: object) -> Message:
    """``message`` as a Message: a Message as it is, an OpenAI-format dict read and checked."""
    if isinstance(message, Message):
        return message
    if isinstance(message, Mapping):
        return Message.from_dict(message)
    raise InputError(f"a message must be a Message or an OpenAI-format dict, got {message!r}")
