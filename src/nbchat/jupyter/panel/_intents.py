"""What the panel's page asks for: its custom messages, each mapped to one panel method.

The page sends intents (``submit``, ``stop``, ``select``, ``rename``, ``undo``, ``poll``,
…) as custom messages, with the typed text as their ``value``; anything
else it might send is ignored. An intent's error shows in the panel's status
line, never as a traceback in the kernel's log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...base.errors import NbchatError
from . import _assets

if TYPE_CHECKING:
    from .widget import ChatPanel

__all__ = ["INTENTS", "handle"]

# Intents that carry nothing but their name, and the panel method each calls.
INTENTS = {
    "new": "new_thread", "delete": "delete", "confirm_delete": "accept_confirm",
    "cancel_delete": "cancel_delete", "earlier": "show_earlier", "refresh": "refresh",
    "variables": "refresh_variables", "close_preview": "close_preview", "stop": "stop",
    "connect_elsewhere": "say_how_to_connect",
}  # fmt: skip


def handle(panel: ChatPanel, content: Any) -> None:
    """Do what the page's message ``content`` asks of ``panel``."""
    if not isinstance(content, dict):
        return
    event, value = content.get("event"), content.get("value")
    if event in ("value", "submit", "preview") and isinstance(value, str):
        panel.set_state({"value": value})  # as a state update: not sent back
    if event == "submit":
        _showing(panel, panel.submit)
    elif event == "preview":
        _showing(panel, panel.preview)
    elif event == "poll":
        changed = False
        try:
            changed = bool(_showing(panel, panel.sync))
        finally:
            panel.send({"event": "polled", "changed": changed})
    elif event == "assets":  # no Jupyter Server serves the code to this front end
        panel.send({"event": "assets", "code": _assets.code(), "css": _assets.stylesheet()})
    elif event == "focused":
        panel._focus_steal = False
    elif event == "select" and isinstance(value, int) and not isinstance(value, bool):
        _showing(panel, panel.select, value)
    elif event == "undo" and isinstance(value, int) and not isinstance(value, bool):
        _showing(panel, panel.undo, value)
    elif event == "rename" and isinstance(value, str):
        _showing(panel, panel.rename, value)
    elif isinstance(event, str) and event in INTENTS:
        _showing(panel, getattr(panel, INTENTS[event]))


def _showing(panel: ChatPanel, method: Callable[..., Any], *args: Any) -> Any:
    """``method(*args)``, its NbchatError shown in the panel's status line instead."""
    try:
        return method(*args)
    except NbchatError as error:
        panel.show_error(error)
        return None
