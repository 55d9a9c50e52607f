"""The panel's context picker: chips for the notebook's variables, sent with the next question."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ._notebook import Notebook
from .context import ContextItem


class ContextPicker(widgets.HBox):
    """Pick variables as chips; the picked ones go with the next question, then clear.

    The names offered are the notebook's own variables, read again on every
    :meth:`refresh` (the ↻ button, and each send). Without an IPython shell
    (a panel outside a kernel) the picker hides itself.
    """

    def __init__(self, shell: Any = None) -> None:
        if shell is None:
            from IPython import get_ipython

            shell = get_ipython()
        self.notebook = Notebook(shell) if shell is not None else None
        self.tags = widgets.TagsInput(
            value=[], allowed_tags=[], allow_duplicates=False,
            placeholder="attach a variable", layout=widgets.Layout(flex="1"),
        )  # fmt: skip
        self.refresh_button = widgets.Button(
            description="↻", tooltip="Read the notebook's variables again",
            layout=widgets.Layout(width="auto"),
        )  # fmt: skip
        self.refresh_button.on_click(self._on_refresh_button_click)
        super().__init__(
            [widgets.Label("Context:"), self.tags, self.refresh_button],
            layout=widgets.Layout(align_items="center", width="100%"),
        )
        if self.notebook is None:
            self.layout.display = "none"
        self.refresh()

    def refresh(self) -> None:
        """Offer the notebook's current variables; drop picks that no longer exist."""
        names = self.notebook.variable_names() if self.notebook is not None else []
        self.tags.value = [name for name in self.tags.value if name in names]
        self.tags.allowed_tags = names

    def take(self) -> list[ContextItem]:
        """The picked variables, described; the picks are cleared."""
        if self.notebook is None:
            return []
        picked, self.tags.value = list(self.tags.value), []
        return [self.notebook.describe(name) for name in picked]

    def _on_refresh_button_click(self, _: widgets.Button) -> None:
        self.refresh()
