"""Streams a turn's events into a notebook cell: live Markdown through one display.

The renderer consumes the events of one turn (:mod:`nbchat.base.events`) and shows
them in one of three modes:

``"live"``
    A placeholder (``_… waiting for MODEL_``) right away, then the Markdown of
    the answer through *one* display handle, updated at most about ten times a
    second and less often as the text grows (every update re-sends and
    re-renders the whole text), then one final full render.
``"final"``
    One display at the end: what non-interactive runs (nbclient, nbval,
    papermill) must save, since nbval compares a cell's *first* display.
``"text"``
    Plain text printed as it arrives, for a terminal IPython or a script.

The final render happens when the turn finishes, suspends on client tools,
fails (the error as one line under the partial text) or is interrupted (the
partial text, marked interrupted; the engine has saved it; the
KeyboardInterrupt is swallowed). Its bundle is ``text/html`` made by
:mod:`nbchat.base.markup` (model text is data: never raw HTML or Markdown that
JupyterLab would trust) plus a ``text/plain`` that is the answer itself, with
the metadata
``{"nbchat": {"thread": id, "turn": n, "model": m, "status": s}}``.

API for front ends (the magics and :mod:`nbchat.jupyter.panel.widget`)::

    render_turn(events, *, mode=None, handle=None, chat=None, metadata=None,
                max_updates_per_second=10.0, show_error=True) -> RenderResult
    TurnRenderer(*, mode=None, handle=None, chat=None, metadata=None,
                 max_updates_per_second=10.0, show_error=True, reserve=False)
        .render(events) -> RenderResult     .handle -> DisplayHandle | None
    new_handle() -> DisplayHandle           detect_mode() -> "live" | "final" | "text"

``mode=None`` detects the mode when ``render`` runs (see :func:`detect_mode`),
so a renderer made in a cell and used later from a widget callback renders
live when a person clicked, and once when a later cell called ``.click()``.
``handle`` renders into an existing display (made in the cell with
:func:`new_handle`, or ``TurnRenderer(reserve=True)``) instead of a new one.

When a turn suspends, ``chat`` is given and a person can click (live mode,
or ``"final"`` while :func:`detect_mode` says live), the renderer calls its
``prompts`` hook (the magics and the panel pass
``nbchat.jupyter.panel.widget.show_tool_prompts``) as ``prompts(chat, pending_calls,
renderer_factory=…)``; ``renderer_factory()`` returns a :class:`TurnRenderer`
whose display is reserved in the cell at that moment, for the callback to
``.render(chat.iter_answer_tool_call(...))`` into. Otherwise it prints each
question, its options and how to answer from code (``%chat -t ID --answer
VALUE``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from IPython import get_ipython
from IPython.display import DisplayHandle, display

from ...base import markup
from ...base.config import ENV_LIVE
from ...base.errors import NbchatError
from ...base.events import TextDelta
from ...base.records import PendingCall
from ...engine.chat import Answer
from ._sinks import DisplaySink, Sink, TextSink, TurnView

if TYPE_CHECKING:
    from ...engine.chat import Chat

Mode = Literal["live", "final", "text"]
PromptsHook = Callable[..., object]
"""Shows prompts for a suspended turn's calls: ``hook(chat, calls, renderer_factory=…)``,
as :func:`nbchat.jupyter.panel.widget.show_tool_prompts` does."""
MODES: tuple[str, ...] = ("live", "final", "text")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def detect_mode() -> Mode:
    """How to render here and now.

    ``NBCHAT_LIVE=1``/``0`` forces live/final. Without a kernel (terminal
    IPython, plain Python): text. In a kernel, the request being handled
    decides: an ``execute_request`` sent with ``allow_stdin`` false comes from
    a program (nbclient, nbval and papermill all send false; JupyterLab,
    Notebook and VS Code send true, since a person may answer ``input()``),
    so render once; anything else (a widget's comm message) means a person
    is there: live.
    """
    forced = os.environ.get(ENV_LIVE, "").strip().lower()
    if forced in _TRUE:
        return "live"
    if forced in _FALSE:
        return "final"
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return "text"
    parent = _parent_message(kernel)
    if parent.get("header", {}).get("msg_type") == "execute_request":
        return "live" if parent.get("content", {}).get("allow_stdin", False) else "final"
    return "live"


def execution_marker() -> object:
    """What identifies the code running now: the kernel request, else the prompt number."""
    ip = get_ipython()
    kernel = getattr(ip, "kernel", None)
    if kernel is not None:
        msg_id = _parent_message(kernel).get("header", {}).get("msg_id")
        if msg_id:
            return msg_id
    return getattr(ip, "execution_count", None)


def _parent_message(kernel: Any) -> dict[str, Any]:
    get_parent = getattr(kernel, "get_parent", None)
    parent = get_parent() if get_parent is not None else getattr(kernel, "_parent_header", {})
    return parent if isinstance(parent, dict) else {}


def new_handle() -> DisplayHandle:
    """An empty display in the current cell, to render a turn into later."""
    handle = display({"text/plain": ""}, raw=True, display_id=True)
    assert handle is not None
    return handle


@dataclass(repr=False)
class RenderResult(Answer):
    """A rendered turn: what ``reply = %chat …`` holds. ``str(result)`` is the answer.

    An :class:`~nbchat.Answer` that also knows how it was shown: displaying it
    shows the answer again, except during the execution that rendered it
    (where it is on screen already).
    """

    updates: int = field(default=0, compare=False)
    handle: DisplayHandle | None = field(default=None, repr=False, compare=False)
    shown_in: object = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        preview = self.text if len(self.text) <= 60 else self.text[:59] + "…"
        return f"<nbchat reply thread={self.thread_id} turn={self.turn} {self.status}: {preview!r}>"

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "nbchat": {
                "thread": self.thread_id, "turn": self.turn, "model": self.model,
                "status": self.status,
            }
        }

    def to_answer(self) -> Answer:
        """The same outcome as :meth:`nbchat.Chat.ask` returns it."""
        return Answer(self.text, self.thread_id, self.turn, self.status, self.model,
                      self.usage, self.elapsed, self.pending, self.error)

    def _ipython_display_(self) -> None:
        if self.shown_in is not None and self.shown_in == execution_marker():
            return
        display(markup.bundle(markup.markdown(self.text), self.text), raw=True,
                metadata=self.metadata)


class TurnRenderer:
    """Renders one turn's events; see the module docstring for the modes."""

    def __init__(
        self,
        *,
        mode: Mode | None = None,
        handle: DisplayHandle | None = None,
        chat: Chat | None = None,
        metadata: Mapping[str, Any] | None = None,
        max_updates_per_second: float = 10.0,
        show_error: bool = True,
        reserve: bool = False,
        prompts: PromptsHook | None = None,
    ) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.handle = new_handle() if reserve and handle is None else handle
        self.chat = chat
        self.metadata = dict(metadata or {})
        self.max_updates_per_second = max_updates_per_second
        self.show_error = show_error
        self.prompts = prompts

    def render(self, events: Iterable[Any]) -> RenderResult:
        """Consume ``events`` and render them; the outcome (never raises NbchatError)."""
        mode = self.mode or detect_mode()
        sink: Sink = TextSink() if mode == "text" else DisplaySink(
            self.handle, live=mode == "live", rate=self.max_updates_per_second
        )
        turn = TurnView(sink)
        on, on_text = turn.on, turn.on_text  # text is nearly every event: skip the dispatch
        try:
            for event in events:
                if type(event) is TextDelta:
                    on_text(event.text)
                    continue
                on(event)
                if turn.ended and not turn.finalized:
                    self._finish(turn, sink, mode)
        except KeyboardInterrupt:
            _close(events)
            turn.interrupt()
        except NbchatError as error:
            _close(events)
            turn.fail(error)
        finally:
            if not turn.finalized:
                if not turn.ended:
                    turn.interrupt()
                self._finish(turn, sink, mode)
        result = RenderResult(**turn.outcome())
        result.handle = self.handle = getattr(sink, "handle", None)
        result.updates = sink.updates
        return result

    def _finish(self, turn: TurnView, sink: Sink, mode: Mode) -> None:
        turn.finalized = True
        metadata = {**self.metadata, **RenderResult(**turn.outcome()).metadata}
        sink.final(turn, metadata, show_error=self.show_error)
        if turn.status == "suspended" and turn.pending:
            self._offer_answers(turn, mode)

    def _offer_answers(self, turn: TurnView, mode: Mode) -> None:
        # Widgets where a person can click them (also under --no-stream), else the code.
        person = mode == "live" or (mode == "final" and detect_mode() == "live")
        if person and self.chat is not None and self.prompts is not None:
            self.prompts(self.chat, list(turn.pending), renderer_factory=self._factory())
            return
        for line in answer_hints(turn.pending):
            print(line, flush=True)

    def _factory(self) -> Callable[[], TurnRenderer]:
        def factory() -> TurnRenderer:
            return TurnRenderer(
                mode=self.mode, chat=self.chat, metadata=self.metadata, reserve=True,
                max_updates_per_second=self.max_updates_per_second, show_error=self.show_error,
                prompts=self.prompts,
            )

        return factory


def render_turn(
    events: Iterable[Any],
    *,
    mode: Mode | None = None,
    handle: DisplayHandle | None = None,
    chat: Chat | None = None,
    metadata: Mapping[str, Any] | None = None,
    max_updates_per_second: float = 10.0,
    show_error: bool = True,
    prompts: PromptsHook | None = None,
) -> RenderResult:
    """Render one turn's events into the current cell; see the module docstring."""
    renderer = TurnRenderer(
        mode=mode, handle=handle, chat=chat, metadata=metadata,
        max_updates_per_second=max_updates_per_second, show_error=show_error, prompts=prompts,
    )
    return renderer.render(events)


def answer_hints(pending: Iterable[PendingCall]) -> list[str]:
    """Each pending call's question (with its options) and how to answer it from code."""
    calls = list(pending)
    lines = []
    for call in calls:
        which = f"{call.call_id} " if len(calls) > 1 else ""
        lines.append(f"{markup.MARK_QUESTION} {markup.for_terminal(call.tool)}: {call.question}")
        lines.append(f"   answer with: %chat -t {call.thread_id} --answer {which}VALUE")
    return lines


def _close(events: Iterable[Any]) -> None:
    """Close the turn's generator: the engine records the interruption, the socket closes."""
    close = getattr(events, "close", None)
    if close is not None:
        with contextlib.suppress(KeyboardInterrupt):  # a second interrupt: closed enough
            close()
