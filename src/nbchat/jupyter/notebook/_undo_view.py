"""*Undo this turn* below a turn that changed the notebook: one button, and what it did.

Shown where a person can click (a cell's live output, below a resumed turn's
answer); the panel draws its own in each message's footer. A click puts the
turn's cells back as ``%chat --undo TURN`` does, and says which it put back and
which it kept; the button stays usable while the undo cannot be done yet
(proposals still wait), and is locked once it is done.
"""

from __future__ import annotations

import contextlib
from typing import Any

import ipywidgets as widgets

from ...base import markup
from ...base.errors import InputError
from ._undo import changed_turns, undo_here

__all__ = ["UndoButton", "undo_footer"]


class UndoButton(widgets.HBox):
    """The button that undoes turn ``turn`` of thread ``thread_id``, and its outcome."""

    def __init__(self, store: Any, thread_id: int, turn: int, shell: Any = None) -> None:
        self.store, self.thread_id, self.turn, self.shell = store, thread_id, turn, shell
        self.button = widgets.Button(
            description="Undo this turn", icon="undo",
            tooltip=f"%chat -t {thread_id} --undo {turn}",
            layout=widgets.Layout(width="auto", min_width="fit-content"),
        )  # fmt: skip
        self.status = widgets.HTML()
        self.summary = ""
        self.button.on_click(self._on_undo_button_click)
        row = widgets.Layout(align_items="center", flex_flow="row wrap")
        super().__init__([self.button, self.status], layout=row)
        self.add_class("nbchat-undo")

    def __repr__(self) -> str:
        return self.summary or f"Undo: %chat -t {self.thread_id} --undo {self.turn}"

    def undo(self) -> str:
        """Put the turn's cells back (as a click does); what was put back and what was kept."""
        try:
            self.summary = undo_here(self.shell, self.store, self.thread_id, self.turn)
        except InputError as error:
            self.status.value = markup.styled(markup.text(f"{markup.MARK_PROBLEM} {error}",
                                                          cls="nbchat-error"))  # fmt: skip
            raise
        self.button.disabled = True
        self.button.button_style = "success"
        self.status.value = markup.styled(markup.text(self.summary, cls="nbchat-ok"))
        return self.summary

    def _on_undo_button_click(self, _: widgets.Button) -> None:
        with contextlib.suppress(InputError):  # shown beside the button
            self.undo()


def undo_footer(store: Any, thread_id: int | None, turn: int | None,
                shell: Any = None) -> UndoButton | None:  # fmt: skip
    """The Undo button for a turn that changed the notebook and is not undone; else None."""
    if thread_id is None or turn is None:
        return None
    try:
        settings = store.get(thread_id).settings or {}
    except Exception:  # a thread deleted meanwhile: nothing to undo
        return None
    return UndoButton(store, thread_id, turn, shell) if turn in changed_turns(settings) else None
