"""The panel's question box, a small front-end widget (anywidget, no build step).

ipywidgets' Textarea sends no key events, so Enter could not send. This box
does it in the browser (``_chat_input.js``): Enter sends, Shift+Enter is a
new line, Escape asks to stop a streaming answer, Up in an empty box recalls
the earlier questions in :attr:`ChatInput.history`. It also polls: about once
a second while it is visible, and never with a question still unanswered, it
sends ``poll`` so the panel can notice threads written elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets as widgets
from traitlets import Bool, Float, Int, List, Unicode

__all__ = ["ChatInput"]

_HERE = Path(__file__).parent


class ChatInput(anywidget.AnyWidget):
    """A question box that sends on Enter; ``value`` is its text, as with a Textarea."""

    _esm = (_HERE / "_chat_input.js").read_text(encoding="utf-8")
    _css = (_HERE / "_chat_input.css").read_text(encoding="utf-8")

    # Typed text arrives as messages (see _chat_input.js); echoing it back would
    # overwrite what was typed since.
    value = Unicode("", help="The text in the box.").tag(sync=True, echo_update=False)
    placeholder = Unicode("", help="Shown while the box is empty.").tag(sync=True)
    disabled = Bool(False, help="Whether the box takes input.").tag(sync=True)
    streaming = Bool(False, help="An answer streams: Enter waits, Escape stops it.").tag(sync=True)
    history = List(Unicode(), help="Earlier questions, oldest first, for Up.").tag(sync=True)
    poll_seconds = Float(1.0, help="Seconds between polls while visible; 0: never.").tag(
        sync=True
    )
    _focus = Int(0).tag(sync=True)
    _focus_steal = Bool(False).tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._submit_callbacks = widgets.CallbackDispatcher()
        self._stop_callbacks = widgets.CallbackDispatcher()
        self._poll_callbacks = widgets.CallbackDispatcher()
        self.on_msg(self._on_front_end_msg)

    def on_submit(self, callback: Callable[[ChatInput], Any], remove: bool = False) -> None:
        """Call ``callback(box)`` when Enter sends the text."""
        self._submit_callbacks.register_callback(callback, remove=remove)

    def on_stop(self, callback: Callable[[ChatInput], Any], remove: bool = False) -> None:
        """Call ``callback(box)`` when Escape asks to stop the streaming answer."""
        self._stop_callbacks.register_callback(callback, remove=remove)

    def on_poll(self, callback: Callable[[ChatInput], Any], remove: bool = False) -> None:
        """Call ``callback(box)`` on each poll from the browser."""
        self._poll_callbacks.register_callback(callback, remove=remove)

    def submit(self) -> None:
        """Send the text, as Enter does."""
        self._submit_callbacks(self)

    def stop(self) -> None:
        """Ask to stop the streaming answer, as Escape does."""
        self._stop_callbacks(self)

    def poll(self) -> None:
        """What the browser's poll does: run the poll callbacks."""
        self._poll_callbacks(self)

    def focus(self, *, steal: bool = False) -> None:
        """Put the keyboard focus in the box, unless the person is busy elsewhere.

        ``steal`` takes it from wherever it is (for a panel just opened on purpose).
        """
        if steal:
            self._focus_steal = True
        self._focus += 1

    def _on_front_end_msg(self, _: Any, content: Any, buffers: Any) -> None:
        event = content.get("event") if isinstance(content, dict) else None
        if event == "value":
            value = content.get("value")
            if isinstance(value, str):
                self.set_state({"value": value})  # as a state update: not sent back
        elif event == "submit":
            value = content.get("value")
            if isinstance(value, str):
                self.set_state({"value": value})
            self.submit()
        elif event == "focused":
            self._focus_steal = False
        elif event == "stop":
            self.stop()
        elif event == "poll":
            try:
                self.poll()
            finally:
                self.send({"event": "polled"})
