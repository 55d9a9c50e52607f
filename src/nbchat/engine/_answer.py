"""Answer, the record of one turn: iterable while it streams, then what the turn came to.

Every way of asking (``Chat.ask``, ``LLM.ask``, resuming a tool call) hands
back an :class:`Answer`; :class:`AnswerText` is the ``str`` that ``LLM.ask``
returns, which also says whether the answer is whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..base import markup
from ..base.errors import NbchatError, TurnInterrupted
from ..base.events import (
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallPending,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    Usage,
)
from ..base.records import PendingCall
from ..llm._stop import StopSignal


class _Joined:
    """A str field kept as the parts streamed into it, joined when read.

    ``+=`` on an attribute copies the whole text for every chunk, which grows
    with the square of the answer's length; appending a part does not.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.parts = f"_{name}_parts"

    def __get__(self, instance: object | None, owner: type | None = None) -> str:
        if instance is None:
            return ""  # the field's default
        parts: list[str] = instance.__dict__[self.parts]
        count = len(parts)  # a part appended meanwhile by the streaming thread stays after
        if count > 1:
            parts[:count] = ["".join(parts[:count])]
        return "".join(parts)

    def __set__(self, instance: object, text: str) -> None:
        self.parts_of(instance)[:] = [text]

    def parts_of(self, instance: object) -> list[str]:
        """The parts of the field of ``instance``: one list for its lifetime, to append to."""
        parts: list[str] = instance.__dict__.setdefault(self.parts, [])
        return parts


_TEXT, _REASONING = _Joined(), _Joined()


class AnswerText(str):
    """An answer's text that also says how it ended, so a cut answer is told from a whole one.

    ``status`` is ``"complete"`` or ``"incomplete"`` (``finish_reason`` ``"length"``:
    the token limit cut it; ``note`` says how to go on).
    """

    status: str
    finish_reason: str | None
    note: str

    def __new__(cls, answer: Answer) -> AnswerText:
        text = super().__new__(cls, answer.text)
        text.status, text.finish_reason, text.note = (
            answer.status, answer.finish_reason, answer.note)  # fmt: skip
        return text

    @property
    def complete(self) -> bool:
        return self.status == "complete"


@dataclass
class Answer:
    """One turn: iterable while it streams (its events), then what it came to.

    ``chat.iter_ask(…)`` returns one still streaming: iterating yields the
    turn's events and keeps ``text``, ``status``, ``pending``, ``usage`` up to
    date; ``result()`` streams what is left and returns the same object (or
    raises the failed turn's error). ``ask(…)`` returns it finished.
    ``str(answer)`` is the text; the model's thinking is apart, in
    ``reasoning``. An ``incomplete`` answer (cut at the token limit:
    ``finish_reason == "length"``) says why in ``note``.
    """

    text: _Joined = _TEXT
    thread_id: int | None = None
    turn: int = 0
    status: str = "complete"
    model: str = ""
    usage: Usage | None = None
    elapsed: float = 0.0
    pending: tuple[PendingCall, ...] = ()
    error: NbchatError | None = field(default=None, compare=False)
    events: Iterator[Event] | None = field(default=None, repr=False, compare=False)
    reasoning: _Joined = _REASONING
    finish_reason: str | None = None
    note: str = ""
    _stop: StopSignal | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def streaming(cls, events: Iterator[Event], stop: StopSignal | None = None) -> Answer:
        """An Answer that fills in as ``events`` are iterated; :meth:`stop` sets ``stop``."""
        answer = cls(status="streaming", events=events)
        answer._stop = stop
        return answer

    def __iter__(self) -> Iterator[Event]:
        events, self.events = self.events, None
        if events is None:
            return
        self._running = events  # what close() ends once iterating has begun
        add_text = _TEXT.parts_of(self).append  # the bulk of the events, at the least cost
        try:
            for event in events:
                if type(event) is TextDelta:
                    add_text(event.text)
                else:
                    self._note(event)
                yield event
        finally:
            if self.status == "streaming":
                self.status = "interrupted"

    def result(self) -> Answer:
        """Stream what is left; this Answer, or the failed turn's error raised."""
        for _ in self:
            pass
        if self.error is not None:
            raise self.error
        if self.status == "interrupted":
            raise TurnInterrupted("the turn ended before it finished", thread_id=self.thread_id,
                                  partial=self.text)
        return self

    def stop(self) -> None:
        """Stop the turn from any thread, at once even while the model sends nothing.

        The thread iterating the answer sees it end: the turn is saved as
        ``interrupted`` with the text so far, and the last event is the
        TurnFinished that says so. Stopping a finished turn does nothing.
        """
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        """Stop the turn from the thread that iterates it (the engine records it as interrupted)."""
        events = self.events if self.events is not None else getattr(self, "_running", None)
        close = getattr(events, "close", None)
        if close is not None:
            close()

    def _note(self, event: Event) -> None:
        """Take in an event other than TextDelta (``__iter__`` appends those itself)."""
        kind = type(event)
        if kind is ReasoningDelta:
            _REASONING.parts_of(self).append(event.text)  # type: ignore[union-attr]
        elif kind is TurnStarted:
            self.thread_id, self.turn, self.model = (
                event.thread_id, event.turn, event.model)  # type: ignore[union-attr]
        elif kind is ToolCallPending:
            self.pending += (event.pending,)  # type: ignore[union-attr]
        elif kind is TurnFinished:
            assert isinstance(event, TurnFinished)
            self.text, self.status, self.usage = event.text, event.status, event.usage
            self.thread_id, self.turn = event.thread_id, event.turn
            self.model, self.elapsed = event.model or self.model, event.elapsed
            self.reasoning = event.reasoning or self.reasoning
            self.finish_reason, self.note = event.finish_reason, event.note
        elif kind is TurnFailed:
            assert isinstance(event, TurnFailed)
            self.text, self.status, self.error = event.text, "failed", event.error

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return markup.styled(markup.markdown(self.text))
