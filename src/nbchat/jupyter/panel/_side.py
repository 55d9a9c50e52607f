"""The chat panel in JupyterLab's right side area, one per kernel.

The side area comes from the ``sidecar`` package (a dependency of nbchat):
a Sidecar widget opens a tab in JupyterLab's right area as soon as it exists,
and shows the panel there. Asking again closes that tab and opens a new one on
the *same* panel (the person may have closed the tab; a new one always shows
and is brought to the front), so the panel keeps its thread, its question
history and any answer streaming into it. Where there is no side area
(classic Notebook, VS Code, Colab, no sidecar) the panel goes in the cell, with
a one-line note.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from IPython import get_ipython

from ...base.errors import NbchatError
from ...engine._usage import parse_prices
from ...engine.chat import Chat
from .._loaded import loaded_in
from .widget import ChatPanel

__all__ = ["open_from_lab", "side_area_unavailable", "side_panel"]

TITLE = "Chat"


@dataclass
class _Side:
    panel: ChatPanel
    car: Any  # sidecar.Sidecar


_SIDE: _Side | None = None
# The notebook JupyterLab's extension last opened the panel for (its path).
_NOTEBOOK: str | None = None


def side_area_unavailable() -> str | None:
    """Why the panel cannot go in JupyterLab's side area here, or None if it can."""
    if getattr(get_ipython(), "kernel", None) is None:
        return "the side area needs a Jupyter kernel"
    if "google.colab" in sys.modules or os.environ.get("VSCODE_PID"):
        return "only JupyterLab has a side area"
    try:
        import sidecar  # noqa: F401
    except ImportError:
        return "the side area needs the sidecar package: pip install sidecar"
    return None


def side_panel(chat: Chat | None = None, *, focus: bool = True, **kwargs: Any) -> ChatPanel:
    """The kernel's chat panel, opened (or brought back) in JupyterLab's right side area.

    Returns the panel; in a cell it shows as a one-line note. Where there is
    no side area, prints why and returns a panel for the cell instead.
    ``kwargs`` are those of :class:`~nbchat.jupyter.panel.widget.ChatPanel`; a
    ``thread_id`` selects that thread in the existing panel. ``focus``: the panel takes
    the keyboard (not when a question asked in a cell opens it: its answer lands there).
    """
    global _SIDE
    reason = side_area_unavailable()
    if reason is not None:
        print(f"nbchat: {reason}; the panel is shown here instead.")
        return ChatPanel(chat, **kwargs)
    from sidecar import Sidecar

    side = _SIDE
    panel = _reuse(side, chat, kwargs) if side is not None else None
    if side is not None:
        side.car.close()
        if panel is None:
            side.panel.close()
    if panel is None:
        panel = ChatPanel(chat, area="side", **kwargs)
    car = Sidecar(title=_title(), anchor="right")
    # The panel's view straight into the sidecar's outputs: display() would
    # give the one-line note a side panel shows in cells.
    car.outputs = (_view(panel),)
    _SIDE = _Side(panel, car)
    if focus:
        panel.focus(steal=True)
    return panel


def _reuse(side: _Side, chat: Chat | None, kwargs: dict[str, Any]) -> ChatPanel | None:
    """The existing panel, if it shows the same store and user as asked for now."""
    panel = side.panel
    if any(name not in ("thread_id", "prices") for name in kwargs):
        return None  # other settings: a new panel
    if chat is not None:
        if chat.store.location() != panel.chat.store.location():
            return None
        panel.chat = chat  # the magics' current settings (model, tools) from now on
    if kwargs.get("prices") is not None:
        panel.prices = parse_prices(kwargs["prices"], source="prices")
    if kwargs.get("thread_id") is not None:
        panel.select(kwargs["thread_id"])
    else:
        panel.sync()
    return panel


def _view(widget: Any) -> dict[str, Any]:
    return {
        "output_type": "display_data",
        "data": {
            "application/vnd.jupyter.widget-view+json": {
                "version_major": 2, "version_minor": 0, "model_id": widget.model_id,
            },
            "text/plain": repr(widget),
        },
        "metadata": {},
    }


def open_from_lab(path: str = "", *, focus: bool = True) -> ChatPanel:
    """Open (or bring back) the kernel's side panel for JupyterLab's nbchat extension.

    What its sidebar icon, launcher tile, command and shortcut run, silently, in
    the notebook's kernel: the panel of :func:`side_panel`, with the settings of
    ``%chat`` if it is loaded. ``path`` is the notebook's, for the panel's title.
    Prints nothing and returns the panel; where it cannot open, raises an error
    whose message JupyterLab shows in a notification.
    """
    global _NOTEBOOK
    reason = side_area_unavailable()
    if reason is not None:
        raise NbchatError(f"the chat panel cannot open: {reason}")
    if path:
        _NOTEBOOK = path
    loaded = loaded_in(get_ipython())
    return side_panel(focus=focus) if loaded is None else loaded.side_panel(focus=focus)


def _title() -> str:
    """The side area tab's title: "Chat", and the notebook's name when it is known."""
    path = _NOTEBOOK or os.environ.get("JPY_SESSION_NAME", "")
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{TITLE} · {name}" if name else TITLE
