"""What a cell shows while a turn streams: the turn so far, and where it goes.

:class:`TurnView` accumulates a turn's events into text blocks and tool lines;
a sink shows it: :class:`DisplaySink` through one display handle (live, or
once at the end), :class:`TextSink` as plain text on stdout. The public face
is :mod:`nbchat.jupyter.cell.render`.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from IPython.display import DisplayHandle, display

from ...base import markup
from ...base._visible import TerminalStream
from ...base.errors import NbchatError
from ...base.events import (
    ContextWindowed,
    RanCode,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallAbandoned,
    ToolCallPending,
    ToolCallRequested,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)
from ._page_style import LIVE_MIME_TYPE, page_holds_style
from ._views import reasoning_html

if TYPE_CHECKING:
    from ...base.records import PendingCall

# The update interval grows by itself for every this many characters (0.1 s + 0.2 ms a
# character at ten a second): each update costs the page in proportion to the answer's
# length (a cell's output is replaced whole, the panel's growing paragraph laid out whole),
# so what the page spends drawing a stream stays a small share of its time however long the
# answer grows; a 5,000-character answer is drawn about once a second.
BACKOFF_CHARS = 500
REASONING_INDENT = "    "  # a terminal shows the thinking indented above the answer


class TurnView:
    """The turn as far as it has been seen: text blocks, tool lines, outcome."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.blocks: list[list[str] | str] = []  # text parts, or a tool call id
        self.tools: dict[str, tuple[str, str]] = {}  # call id -> (tool name, outcome)
        self.shown: dict[str, str | RanCode] = {}  # what a tool's answer did, for the person
        self.size = 0
        self.thread_id: int | None = None
        self.turn = 0
        self.model = ""
        self.status = "complete"
        self.final_text: str | None = None
        self.error: NbchatError | None = None
        self.pending: list[PendingCall] = []
        self.reasoning: list[str] = []
        self.dropped_turns = 0
        self.summarized_turns = 0
        self.context_size: int | None = None
        self.note = ""
        self.started = self.ended = self.finalized = False

    def on(self, event: Any) -> None:
        kind = type(event)
        if kind is TextDelta:
            self.on_text(event.text)
        elif kind is ReasoningDelta:
            self._start()
            self.reasoning.append(event.text)
            self.sink.reasoning(self, event.text)
        elif kind is ContextWindowed:
            self.dropped_turns, self.context_size = event.dropped_turns, event.context_size
            self.summarized_turns = event.summarized_turns
        elif kind is TurnStarted:
            self.thread_id, self.turn, self.model = event.thread_id, event.turn, event.model
            self._start()
        elif kind is ToolCallRequested:
            self._tool(event.call, "…", done=False)
        elif kind is ToolResult:
            outcome = f"× {_first_line(event.output)}" if event.is_error else (
                f"→ {len(event.output)} chars")
            self._tool(event.call, outcome, shown=event.shown)
        elif kind is ToolCallPending:
            self.pending.append(event.pending)
            self._tool(event.call, "waits for your answer")
        elif kind is TurnFinished:
            self.thread_id, self.turn, self.status = event.thread_id, event.turn, event.status
            self.model = event.model or self.model
            self.final_text, self.ended, self.note = event.text, True, event.note
        elif kind is ToolCallAbandoned:
            self._tool(event.pending.call, "closed unanswered (a new question was asked)")
        elif kind is TurnFailed:
            self.thread_id, self.turn = event.thread_id, event.turn
            self.fail(event.error, event.text)

    def _start(self) -> None:
        if not self.started:
            self.started = True
            self.sink.begin(self)

    def on_text(self, text: str) -> None:
        """A piece of the answer's text (what :meth:`on` does with a ``TextDelta``)."""
        # Once per chunk: kept lean.
        blocks = self.blocks
        if not blocks or type(blocks[-1]) is str:
            self._start()
            blocks.append([])
        blocks[-1].append(text)  # type: ignore[union-attr]
        self.size += len(text)
        self.sink.text(self, text)

    def _tool(
        self, call: ToolCall, outcome: str, *, done: bool = True, shown: str | RanCode = ""
    ) -> None:
        self._start()
        if call.id not in self.tools:
            self.blocks.append(call.id)
        self.tools[call.id] = (call.name, outcome)
        if shown:
            self.shown[call.id] = shown
        line = f"{markup.MARK_TOOL} {shown.heading}" if isinstance(shown, RanCode) else (
            f"{markup.MARK_TOOL} {call.name} {outcome}")
        self.sink.line(self, line, done=done, shown=shown)

    def fail(self, error: NbchatError, text: str | None = None) -> None:
        self.status, self.error, self.ended = "failed", error, True
        if text is not None:
            self.final_text = text

    def interrupt(self) -> None:
        if not self.ended:
            self.status, self.ended = "interrupted", True

    @property
    def answer(self) -> str:
        """The answer's text: the streamed text rounds, without the tool lines."""
        texts = ["".join(b) for b in self.blocks if isinstance(b, list)]
        return "\n\n".join(t.strip("\n") for t in texts if t.strip())

    def _tool_html(self, call_id: str) -> markup.SafeHTML:
        shown = self.shown.get(call_id)
        if isinstance(shown, RanCode):
            return ran_html(shown)
        name, outcome = self.tools[call_id]
        line = markup.element("p", markup.join(
            [markup.text(markup.MARK_TOOL), markup.code_inline(name), markup.text(outcome)], " "),
            cls="nbchat-dim")
        return markup.join([line, markup.code(shown.rstrip(), "text")]) if shown else line

    def html(self) -> markup.SafeHTML:
        """The turn so far as safe HTML: the thinking, the answer's rounds, the tool lines."""
        pieces = [
            markup.markdown("".join(b).strip("\n")) if isinstance(b, list) else self._tool_html(b)
            for b in self.blocks
        ]
        if self.reasoning:
            pieces.insert(0, reasoning_html("".join(self.reasoning), done=bool(self.blocks)))
        return markup.join(pieces)

    def window_note(self) -> str:
        """One line saying how many earlier turns the request left out or summarised."""
        size = f" {self.context_size:,}-token" if self.context_size else ""
        if self.summarized_turns and not self.dropped_turns:
            first = "turn 1 was" if self.summarized_turns == 1 else (
                f"turns 1–{self.summarized_turns} were")  # fmt: skip
            return (f"{first} sent as a summary to fit the model's{size} context "
                    f"(the thread keeps them)")  # fmt: skip
        if not self.dropped_turns:
            return ""
        turns = "turn was" if self.dropped_turns == 1 else "turns were"
        return (
            f"{self.dropped_turns} earlier {turns} left out of the request to fit the "
            f"model's{size} context (the thread keeps them)"
        )

    def outcome(self) -> dict[str, Any]:
        """The fields of the turn's :class:`~nbchat.jupyter.cell.render.RenderResult`."""
        # The engine's text when it said it: a resumed turn's includes what came before.
        return dict(
            text=self.answer if self.final_text is None else self.final_text,
            status=self.status, thread_id=self.thread_id, turn=self.turn, model=self.model,
            pending=tuple(self.pending), error=self.error,
        )


class Sink:
    """Where a TurnView is shown; ``updates`` counts the display messages sent."""

    updates = 0

    def begin(self, turn: TurnView) -> None: ...

    def text(self, turn: TurnView, text: str) -> None: ...

    def reasoning(self, turn: TurnView, text: str) -> None: ...

    def line(
        self, turn: TurnView, line: str, *, done: bool, shown: str | RanCode = ""
    ) -> None: ...

    def final(self, turn: TurnView, metadata: dict[str, Any], *, show_error: bool) -> None: ...


class DisplaySink(Sink):
    """One display handle: placeholder, coalesced updates and the final render (live),
    or the final render alone."""

    def __init__(self, handle: DisplayHandle | None, *, live: bool, rate: float) -> None:
        self.handle, self.live = handle, live
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.due = 0.0

    def begin(self, turn: TurnView) -> None:
        if self.live:
            waiting = f"… waiting for {turn.model}" if turn.model else "… waiting for the model"
            self._show(markup.bundle(markup.text(waiting, cls="nbchat-dim", block=True), waiting))

    def text(self, turn: TurnView, text: str) -> None:
        now = time.monotonic()
        if self.live and now >= self.due:
            self._show(_streaming(turn))
            # Each update re-renders the whole text: back off as it grows.
            self.due = now + self.interval * (1 + turn.size / BACKOFF_CHARS)

    def reasoning(self, turn: TurnView, text: str) -> None:
        self.text(turn, text)

    def line(
        self, turn: TurnView, line: str, *, done: bool, shown: str | RanCode = ""
    ) -> None:
        if self.live:
            self._show(_streaming(turn))

    def final(self, turn: TurnView, metadata: dict[str, Any], *, show_error: bool) -> None:
        body, plain = turn.html(), turn.answer
        for note in (status_note(turn, show_error), _window_note(turn)):
            if note:
                body = markup.join([body, note[0]])
                plain = f"{plain}\n\n{note[1]}" if plain else note[1]
        if not body and self.handle is None:
            return  # nothing to show, and nothing was shown
        self._show(markup.bundle(body, plain), metadata)

    def _show(self, bundle: dict[str, str], metadata: dict[str, Any] | None = None) -> None:
        self.updates += 1
        if self.handle is None:
            self.handle = display(bundle, raw=True, metadata=metadata, display_id=True)
        else:
            self.handle.update(bundle, raw=True, metadata=metadata or {})


def _streaming(turn: TurnView) -> dict[str, str]:
    """An update while the turn streams: its math left for the final render to typeset,
    its stylesheet left to the page where the page holds it (:mod:`._page_style`).

    MathJax typesets all of an output each time it is replaced: 300 formulas
    streamed would block the page for many times what showing them once costs.
    A page with nbchat's extension also gets the markup as :data:`LIVE_MIME_TYPE`,
    which it redraws only where it changed (what the person selected or opened in the
    settled part stays); any other front end shows ``text/html``.
    """
    html = markup.styled(turn.html(), typeset=False)
    if page_holds_style():
        html = html.removeprefix(markup.STYLE)
        return {LIVE_MIME_TYPE: html, "text/html": html}
    return {"text/html": html}


class TextSink(Sink):
    """Plain text on stdout, as it arrives (terminal IPython, scripts).

    Everything it prints from the model or an endpoint has its control
    characters written as escapes: a terminal must not obey them.
    """

    def __init__(self) -> None:
        self.at_line_start = True
        self.in_reasoning = False
        self.stream = TerminalStream()

    def text(self, turn: TurnView, text: str) -> None:
        if self.in_reasoning:  # the answer starts below the thinking
            self.in_reasoning = False
            self._newline()
            print(flush=True)
        if self.at_line_start and text.startswith("\n\n"):
            text = text[1:]  # after a tool's line, a paragraph break is one blank line
        text = self.stream.feed(text)
        sys.stdout.write(text)
        sys.stdout.flush()
        self.at_line_start = text.endswith("\n")

    def reasoning(self, turn: TurnView, text: str) -> None:
        """Thinking as plain indented text, above the answer."""
        self.in_reasoning = True
        indented = self.stream.feed(text).replace("\n", "\n" + REASONING_INDENT)
        if self.at_line_start:
            indented = REASONING_INDENT + indented
        sys.stdout.write(indented)
        sys.stdout.flush()
        self.at_line_start = text.endswith("\n")

    def line(
        self, turn: TurnView, line: str, *, done: bool, shown: str | RanCode = ""
    ) -> None:
        if done:  # a terminal can't rewrite a line: print each tool's outcome once
            self._newline()
            if isinstance(shown, RanCode):
                print(markup.for_terminal(f"{markup.MARK_TOOL} {shown}"), flush=True)
            else:
                print(markup.for_terminal(line), flush=True)
                if shown:
                    print(markup.for_terminal(shown.rstrip()), flush=True)

    def final(self, turn: TurnView, metadata: dict[str, Any], *, show_error: bool) -> None:
        sys.stdout.write(self.stream.close())
        self._newline()
        note = status_note(turn, show_error)
        if note:
            stream = sys.stderr if turn.status == "failed" else sys.stdout
            print(markup.for_terminal(note[1]), file=stream, flush=True)
        window = _window_note(turn)
        if window:
            print(window[1], flush=True)

    def _newline(self) -> None:
        if not self.at_line_start:
            print(flush=True)
            self.at_line_start = True


def ran_html(ran: RanCode) -> markup.SafeHTML:
    """Code that ran, as a person reads it: the code folded, then its output, value and error."""
    parts = [markup.details(f"{markup.MARK_TOOL} {ran.heading}", markup.code(ran.code.rstrip()),
                            cls="nbchat-ran")]  # fmt: skip
    for text, cls in ((ran.stdout, ""), (ran.stderr, "nbchat-error"), (ran.result, ""),
                      (ran.error, "nbchat-error")):  # fmt: skip
        if text:
            block = markup.code(text.rstrip(), "text")
            parts.append(markup.element("div", block, cls=cls) if cls else block)
    if len(parts) == 1:
        parts.append(markup.text("it printed nothing and has no value", cls="nbchat-dim",
                                 block=True))  # fmt: skip
    return markup.element("div", markup.join(parts), cls="nbchat-tool")


def status_note(turn: TurnView, show_error: bool) -> tuple[markup.SafeHTML, str] | None:
    """The line under the text that says how the turn ended: (safe HTML, plain)."""
    if turn.status == "interrupted":
        plain = f"{markup.MARK_STOPPED} interrupted — the partial answer is kept in the thread"
    elif turn.status == "failed" and show_error and turn.error is not None:
        plain = f"{markup.MARK_PROBLEM} {' '.join(str(turn.error).split())}"
        return markup.text(plain, cls="nbchat-error", block=True), plain
    elif turn.status == "failed" and turn.answer:
        plain = f"{markup.MARK_PROBLEM} incomplete: the turn failed"
    elif turn.status == "suspended":
        plain = f"{markup.MARK_WAITING} waiting for your answer"
    elif turn.status == "incomplete":
        note = turn.note or "incomplete: the model did not finish its answer"
        plain = f"{markup.MARK_CUT} {note}"
    else:
        return None
    return markup.element("p", markup.element("i", plain), cls="nbchat-note"), plain


def _window_note(turn: TurnView) -> tuple[markup.SafeHTML, str] | None:
    line = turn.window_note()
    if not line:
        return None
    return markup.element("p", markup.element("i", f"ℹ️ {line}"), cls="nbchat-note"), f"ℹ️ {line}"


def _first_line(text: str, limit: int = 80) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
