"""Informational notes: one short, calm line, shown by whichever front end is active.

The core announces things that are not errors (which model answers, a server
starting) through :func:`notify`. In plain Python a note is a line on stderr;
``%load_ext nbchat`` replaces the notifier with one that shows a dimmed note
in the cell, because Jupyter paints stderr red and a newcomer reads red as a
failure. Errors are never notes: they are raised.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

Notifier = Callable[[str], None]


def print_note(text: str) -> None:
    """The plain-Python notifier: the note as one line on stderr."""
    print(text, file=sys.stderr, flush=True)


_notifier: Notifier = print_note
_lock = threading.Lock()


def notify(text: str) -> None:
    """Show an informational note (one line, prefixed ``nbchat:``) the current way."""
    _notifier(text if text.startswith("nbchat: ") else f"nbchat: {text}")


def set_notifier(notifier: Notifier | None) -> Notifier:
    """Make ``notifier`` show every note from now on (None: back to stderr); the previous one."""
    global _notifier
    with _lock:
        previous, _notifier = _notifier, notifier or print_note
    return previous
