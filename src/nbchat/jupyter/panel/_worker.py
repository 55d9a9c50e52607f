"""Where the panel's answer streams: before the call returns, or in a thread Escape can stop.

How Escape stops an answer. When a person sends from the browser, the answer
streams in a background thread and the widget callback returns at once; the
stop request (a comm message) calls the answer's :meth:`~nbchat.Answer.stop`,
which shuts the connection down, so the answer ends at once even while the
model sends nothing (the engine saves it as interrupted). Measured in
JupyterLab + Chromium on ipykernel 7.4, Escape to the interrupted answer on
screen: 85 ms with the stream in a thread, 182 ms with it in the callback on
the main thread. That 7.4 handled the stop message while the callback ran is
not something to build on: a kernel that queues comm messages behind a running
handler, as kernels do behind a blocking cell, would see it only after the
answer. The thread also leaves the kernel free to run cells while the panel
answers. A kernel interrupt, which stops answers in cells, does not reach the
thread: Escape and Stop do. A :meth:`ChatPanel.submit` from code streams before
it returns.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable

from ...base.events import Event
from ._stream import Stoppable

__all__ = ["AnswerWorker"]


class AnswerWorker:
    """Runs one turn at a time to its end with ``finish(turn, query)``; :meth:`stop` stops it."""

    def __init__(self, finish: Callable[[Stoppable, str | None], None]) -> None:
        self._finish = finish
        self.turn: Stoppable | None = None
        self._thread: threading.Thread | None = None

    def start(self, events: Iterable[Event], query: str | None, *, background: bool) -> None:
        """Stream ``events``: in a background thread, or before returning."""
        turn = self.turn = Stoppable(events)
        if not background:
            self._finish(turn, query)
            return
        # The widget callback returns at once: the kernel stays free, and the
        # stop request (a comm message) is handled while the answer streams.
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._finish, turn, query),
            name="nbchat-panel-answer", daemon=True,
        )
        self._thread.start()

    def stop(self) -> bool:
        """Stop the turn under way now; whether there was one."""
        turn = self.turn
        if turn is None:
            return False
        turn.stop()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background turn to end; whether it has."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True
