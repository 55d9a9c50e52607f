"""What a turn streaming into the panel goes through: a stoppable event stream, one live message.

:class:`Stoppable` lets Escape (a comm message, handled on the kernel's main
thread) end an answer streaming in a background thread. :class:`LiveSink` is
the display handle the renderer updates: it puts the answer in the panel's
``streaming_message`` trait, so each update sends that one message.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from ...base import markup
from ...base.events import Event

__all__ = ["LiveSink", "Stoppable", "mentioned"]


class LiveSink:
    """The display handle the renderer streams into: the panel's one streaming message."""

    def __init__(self, panel: Any) -> None:
        self.panel = panel
        self.query = ""
        self.data: dict[str, Any] = {}

    def display(self, obj: object, **kwargs: Any) -> None:
        self.update(obj, **kwargs)

    def update(self, obj: object, *, raw: bool = False, **_: Any) -> None:
        """Show the renderer's mimebundle ``obj`` (always raw: markup made it)."""
        data = dict(obj) if raw else {"text/plain": str(obj)}  # type: ignore[call-overload]
        self.data = data
        # The panel's stylesheet holds the renderer's: a <style> in every update would make
        # the browser check the whole page's styles again each time.
        html = str(data.get("text/html", "")).removeprefix(markup.STYLE)
        self.panel.streaming_message = {"query": self.query, "html": html,
                                        "model": self.panel.model}  # fmt: skip

    def clear(self) -> None:
        self.data = {}
        self.panel.streaming_message = {}

    @property
    def text(self) -> str:
        return str(self.data.get("text/plain", ""))


class Stoppable:
    """A turn's events that :meth:`stop`, called from any thread, ends as interrupted.

    An :class:`~nbchat.Answer` stops at once (its connection is shut down and
    it ends with the interrupted TurnFinished). Whatever still comes after the
    stop ends the turn too: the generator is closed (the engine records the
    turn as interrupted) and the renderer sees the interrupt it knows from a cell.
    """

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = events
        self.is_stopped = threading.Event()

    def __iter__(self) -> Iterator[Event]:
        for event in self.events:
            yield event
            if self.is_stopped.is_set():
                self.close()
                raise KeyboardInterrupt

    def stop(self) -> None:
        self.is_stopped.set()
        stop = getattr(self.events, "stop", None)
        if stop is not None:
            stop()

    def close(self) -> None:
        close = getattr(self.events, "close", None)
        if close is not None:
            close()


def mentioned(query: str) -> tuple[list[Any], str]:
    """The objects ``query`` mentions with ``@name`` in this kernel's namespace, and a note
    naming those it did not find."""
    from IPython import get_ipython

    from ..notebook.tools import Notebook

    shell = get_ipython()
    if shell is None:
        return [], ""
    from ..magic._notebook_context import notebook_context

    cells = notebook_context(shell, query)  # @notebook, @cell N, @cells A-B
    attached = Notebook(shell).attach(query)
    missing = ", ".join(attached.unresolved)
    return [*attached.items, *cells], \
        f"not defined here, no context attached: {missing}" * bool(missing)  # fmt: skip
