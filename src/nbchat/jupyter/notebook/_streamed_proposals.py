"""The cell edits a model is writing, sent to the page while they grow.

While a turn the side panel streams holds an ``edit_cell`` call whose arguments
are still coming, the kernel sends the page holding its notebook the cell's new
source as far as it has come, on the ``nbchat.notebook`` comm:
``{"op": "streaming", "thread", "call_id", "cell_id", "proposed"}``, at most
:data:`RATE` times a second (less often as the text grows, since each update
carries the whole text), what came in between sent once the interval is over
(a model that pauses is drawn as far as it wrote), and once more with the whole
source when the call is complete. The page draws it on the cell to read, never
to answer: what can be accepted is the stored proposal, in the proposals list.

When the turn's events end, the kernel sends that list first, then
``{"op": "streamed", "call_ids": [...]}``: the page takes away each drawing of
a call streamed in the turn that no stored proposal replaced (the turn failed or
was interrupted, the call was cut off). A call that got its result at once (the
change landed, or its arguments were refused) is taken away then.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...base._partial_json import partial_string
from ...base.events import ToolCall, ToolCallDelta, ToolCallRequested, ToolResult, TurnStarted

__all__ = ["RATE", "StreamedEdits", "Throttle"]

RATE = 20.0  # updates a second at most
BACKOFF_CHARS = 20_000  # the interval doubles for every this many characters of source
EDIT_TOOLS = frozenset({"edit_cell"})
Send = Callable[[dict[str, Any]], None]
# Call a function after some seconds (on another thread); returns what cancels it.
Schedule = Callable[[float, Callable[[], None]], Callable[[], None]]


def _timer(seconds: float, call: Callable[[], None]) -> Callable[[], None]:
    timer = threading.Timer(seconds, call)
    timer.daemon = True
    timer.start()
    return timer.cancel


class Throttle:
    """Whether an update is due: at most ``rate`` a second, half as often per ``backoff`` chars."""

    def __init__(self, rate: float = RATE, backoff: int = BACKOFF_CHARS,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.interval, self.backoff, self.clock = 1.0 / rate, backoff, clock
        self.next = -math.inf

    def is_due(self) -> bool:
        """Whether an update may go now."""
        return self.clock() >= self.next

    @property
    def wait(self) -> float:
        """Seconds until an update may go."""
        return max(0.0, self.next - self.clock())

    def sent(self, size: int) -> None:
        """An update of ``size`` characters went: the next one waits."""
        self.next = self.clock() + self.interval * 2 ** min(size // self.backoff, 5)


@dataclass
class _Call:
    """One edit call as far as its arguments have come."""

    key: str  # the call id the page knows it by
    pieces: list[str] = field(default_factory=list)
    size: int = 0  # characters of arguments so far
    cell_id: str | None = None
    sent: str | None = None  # the source the page has
    is_behind: bool = False  # pieces came since the last update

    def text(self) -> str:
        return "".join(self.pieces)


class StreamedEdits:
    """A turn's events, read for the edit calls being written; ``send`` gets the page's updates."""

    def __init__(self, send: Send, publish: Callable[[], None] = lambda: None, *,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Schedule = _timer) -> None:  # fmt: skip
        self.send = send
        self.publish = publish
        self.clock = clock
        self.thread: int | None = None
        self.streamed: list[str] = []  # the call ids the page was sent, in order
        self._writing: dict[int, _Call] = {}  # by the call's index in the model's reply
        self._throttle = Throttle(clock=clock)
        self._schedule = schedule
        self._cancel: Callable[[], None] | None = None  # the update of what came meanwhile
        self._lock = threading.Lock()  # the turn's thread and the timer's

    def on(self, event: Any) -> None:
        """Take in one event of the turn (anything but the few read here passes unseen)."""
        kind = type(event)
        if kind is ToolCallDelta:
            with self._lock:
                self._piece(event)
        elif kind is ToolCallRequested:
            with self._lock:
                self._whole(event.call)
        elif kind is ToolResult and event.call.id in self.streamed:
            self.send({"op": "streamed", "call_ids": [event.call.id]})  # landed, or refused
        elif kind is TurnStarted:
            self.thread = event.thread_id

    def end(self) -> None:
        """The turn's events ended: the stored proposals, then which drawings are done."""
        with self._lock:
            if self._cancel is not None:
                self._cancel()
                self._cancel = None
            self._writing.clear()
        if self.streamed:
            self.publish()
            self.send({"op": "streamed", "call_ids": self.streamed})

    def _catch_up(self) -> None:
        """The interval is over: send what came during it."""
        with self._lock:
            self._cancel = None
            for call in self._writing.values():
                if call.is_behind:
                    self._update(call, call.text())

    def _piece(self, delta: ToolCallDelta) -> None:
        if delta.name and delta.name not in EDIT_TOOLS:
            return
        key = delta.call_id or f"call_{delta.index}"
        call = self._writing.get(delta.index)
        if call is None or (delta.call_id and call.key != key):  # a new reply, a new call
            call = self._writing[delta.index] = _Call(key)
        call.pieces.append(delta.arguments)
        call.size += len(delta.arguments)
        if not delta.name:
            return
        if self._throttle.is_due():
            self._update(call, call.text())
        else:
            call.is_behind = True
            if self._cancel is None:
                self._cancel = self._schedule(self._throttle.wait, self._catch_up)

    def _whole(self, whole: ToolCall) -> None:
        """The call is complete: its whole source, once (the one final update)."""
        index = next((i for i, c in self._writing.items() if c.key == whole.id), None)
        call = self._writing.pop(index) if index is not None else None
        if call is None or whole.name not in EDIT_TOOLS:
            return
        try:
            arguments = json.loads(whole.arguments)
        except ValueError:
            return
        source, cell_id = (arguments.get("source"), arguments.get("cell_id")) \
            if isinstance(arguments, dict) else (None, None)  # fmt: skip
        if isinstance(source, str) and isinstance(cell_id, str) and cell_id and \
                source != call.sent:  # fmt: skip
            call.cell_id = cell_id
            self._send(call, source)

    def _update(self, call: _Call, text: str) -> None:
        call.is_behind = False
        if call.cell_id is None:
            call.cell_id = partial_string(text, "cell_id", whole=True)
        source = partial_string(text, "source")
        if call.cell_id and source is not None and source != call.sent:
            self._send(call, source)

    def _send(self, call: _Call, source: str) -> None:
        call.sent = source
        self._throttle.sent(len(source))
        if call.key not in self.streamed:
            self.streamed.append(call.key)
        self.send({"op": "streaming", "thread": self.thread, "call_id": call.key,
                   "cell_id": call.cell_id, "proposed": source})  # fmt: skip
