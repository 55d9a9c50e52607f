"""The facts a turn is made of, one frozen dataclass each.

The LLM client yields ``TextDelta``, ``ToolCallRequested``, ``UsageReported`` and
``ReplyFinished`` for one model reply. The chat engine re-yields the first three
and adds the turn-level facts (``TurnStarted``, ``ToolResult``,
``ToolCallPending``, ``TurnFinished``, ``TurnFailed``). The cell renderer, the
panel and the terminal consumer all read the same stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import NbchatError

TurnStatus = Literal["complete", "suspended", "interrupted", "failed"]


@dataclass(frozen=True)
class ToolCall:
    """One call the LLM asked for: its id, the tool's name and the raw JSON arguments."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The call in OpenAI message format."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        fn = data.get("function", {})
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            args = json.dumps(args)
        return cls(id=str(data.get("id", "")), name=str(fn.get("name", "")), arguments=args)


@dataclass(frozen=True)
class Usage:
    """Token counts an endpoint reported, when it reports them."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text, in arrival order."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning ("thinking"), shown apart and never sent back."""

    text: str


@dataclass(frozen=True)
class ToolCallRequested:
    """The LLM asked for a tool call (complete: its arguments are all there)."""

    call: ToolCall


@dataclass(frozen=True)
class UsageReported:
    """The endpoint reported token usage for the reply."""

    usage: Usage


@dataclass(frozen=True)
class ReplyFinished:
    """One model reply ended normally (``finish_reason`` as the endpoint said it)."""

    finish_reason: str | None = None


@dataclass(frozen=True)
class TurnStarted:
    """A turn began (or resumed) in a thread; ``thread_id`` is None for history-only turns."""

    thread_id: int | None
    turn: int
    model: str


@dataclass(frozen=True)
class ToolResult:
    """A tool call got its output (kernel tool ran, or a client-tool answer was accepted)."""

    call: ToolCall
    output: str
    is_error: bool = False


@dataclass(frozen=True)
class ToolCallPending:
    """A client tool waits for the person at the notebook; the turn suspends after this."""

    thread_id: int | None
    turn: int
    call: ToolCall
    prompt: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnFinished:
    """The turn ended: ``status`` says how; ``text`` is the answer so far."""

    thread_id: int | None
    turn: int
    text: str
    status: TurnStatus = "complete"
    model: str = ""
    usage: Usage | None = None
    elapsed: float = 0.0


@dataclass(frozen=True)
class TurnFailed:
    """The turn failed after ``text`` had arrived; the query is kept, marked failed."""

    thread_id: int | None
    turn: int
    error: NbchatError
    text: str = ""


ReplyEvent = TextDelta | ReasoningDelta | ToolCallRequested | UsageReported | ReplyFinished
Event = (
    TextDelta
    | ReasoningDelta
    | ToolCallRequested
    | UsageReported
    | ReplyFinished
    | TurnStarted
    | ToolResult
    | ToolCallPending
    | TurnFinished
    | TurnFailed
)
