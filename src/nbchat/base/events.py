"""The facts a turn is made of, one frozen dataclass each.

The LLM client yields ``TextDelta``, ``ToolCallDelta``, ``ToolCallRequested``,
``UsageReported`` and ``ReplyFinished`` for one model reply. The chat engine
re-yields the first four and adds the turn-level facts (``TurnStarted``, ``ToolResult``,
``ToolCallPending``, ``TurnFinished``, ``TurnFailed``). The cell renderer, the
panel and the terminal consumer all read the same stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .errors import NbchatError
from .records import PendingCall, Prompt, ToolCall, Usage

__all__ = [
    "ContextWindowed", "Event", "RanCode", "ReasoningBlock", "ReasoningDelta", "ReplyEvent",
    "ReplyFinished", "TextDelta",
    "ToolCall", "ToolCallAbandoned", "ToolCallDelta",
    "ToolCallPending", "ToolCallRequested", "ToolResult", "TurnFailed", "TurnFinished",
    "TurnStarted", "TurnStatus", "Usage", "UsageReported",
]

TurnStatus = Literal["complete", "incomplete", "suspended", "interrupted", "failed"]


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text, in arrival order."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning ("thinking"), shown apart and never sent back."""

    text: str


@dataclass(frozen=True)
class ReasoningBlock:
    """A whole block of reasoning the endpoint must get back, unchanged, with the tool results.

    Anthropic signs its thinking (``thinking`` with a ``signature``,
    ``redacted_thinking``) and refuses a tool loop that drops it. The engine
    keeps the block in the round's assistant message; it is never shown (its
    text came as ReasoningDelta) and never sent in a later question.
    """

    block: dict[str, Any]


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of a tool call's arguments, as the model writes them.

    Only for showing a call while it streams (a proposal growing on its cell):
    ``arguments`` is the new piece of the arguments' JSON text, not the text so
    far, and a consumer that has no use for it ignores it. The call itself, to
    run or keep, is the ToolCallRequested that follows; a reply cut short has none.
    ``call_id`` and ``name`` are as far as the endpoint has said them (may be empty).
    """

    index: int
    call_id: str
    name: str
    arguments: str


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
class RanCode:
    """What running code did, as the person sees it: the code, what it printed, its value, error."""

    code: str
    edited: bool = False
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None

    @property
    def heading(self) -> str:
        lines = len(self.code.rstrip().splitlines()) or 1
        what = "your edited code" if self.edited else "the code"
        return f"ran {what} ({lines} line{'s' * (lines != 1)})"

    def __str__(self) -> str:
        parts = [f"{self.heading}:", self.code.rstrip()]
        for label, text in (("printed", self.stdout), ("stderr", self.stderr),
                            ("value", self.result), ("error", self.error)):  # fmt: skip
            if text:
                parts.append(f"{label}:\n{text.rstrip()}")
        if len(parts) == 2:
            parts.append("(it printed nothing and has no value)")
        return "\n".join(parts)


@dataclass(frozen=True)
class ToolResult:
    """A tool call got its output (kernel tool ran, or a client-tool answer was accepted).

    ``shown`` is what the person should see of what the answer did (the output
    of code it ran), apart from ``output``, which is written for the model.
    """

    call: ToolCall
    output: str
    is_error: bool = False
    shown: str | RanCode = ""


@dataclass(frozen=True)
class ToolCallPending:
    """A client tool waits for the person at the notebook; the turn suspends after this."""

    pending: PendingCall

    @property
    def thread_id(self) -> int:
        return self.pending.thread_id

    @property
    def turn(self) -> int:
        return self.pending.turn

    @property
    def call(self) -> ToolCall:
        return self.pending.call

    @property
    def prompt(self) -> Prompt:
        return self.pending.prompt


@dataclass(frozen=True)
class ToolCallAbandoned:
    """A new question closed a call that still waited; the model is told it got no answer."""

    pending: PendingCall


@dataclass(frozen=True)
class ContextWindowed:
    """The request holds only the newest turns: ``dropped_turns`` earlier ones were left out,
    and the first ``summarized_turns`` went as a summary.

    The thread itself keeps them all; only what is sent to the model is shorter.
    """

    dropped_turns: int
    context_size: int | None = None
    summarized_turns: int = 0  # the thread's first turns, sent as a summary the model wrote


@dataclass(frozen=True)
class TurnFinished:
    """The turn ended: ``status`` says how; ``text`` is the answer so far.

    ``incomplete`` means the model did not finish on its own (the token limit,
    ``finish_reason`` ``"length"``, or a stream that ended without a reason);
    ``note`` then says so in one line. ``reasoning`` is the model's thinking,
    kept apart from ``text``.
    """

    thread_id: int | None
    turn: int
    text: str
    status: TurnStatus = "complete"
    model: str = ""
    usage: Usage | None = None
    elapsed: float = 0.0
    finish_reason: str | None = None
    reasoning: str = ""
    note: str = ""


@dataclass(frozen=True)
class TurnFailed:
    """The turn failed after ``text`` had arrived; the query is kept, marked failed."""

    thread_id: int | None
    turn: int
    error: NbchatError
    text: str = ""


ReplyEvent = (
    TextDelta
    | ReasoningDelta
    | ReasoningBlock
    | ToolCallDelta
    | ToolCallRequested
    | UsageReported
    | ReplyFinished
)
Event = (
    TextDelta
    | ReasoningDelta
    | ReasoningBlock
    | ToolCallDelta
    | ToolCallRequested
    | UsageReported
    | ReplyFinished
    | TurnStarted
    | ToolResult
    | ToolCallPending
    | ToolCallAbandoned
    | ContextWindowed
    | TurnFinished
    | TurnFailed
)
