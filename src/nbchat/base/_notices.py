"""Informational notes: one short, calm line, shown by whichever front end is active.

The core announces things that are not errors (which model answers, a server
starting) through :func:`notify`. In plain Python a note is a line on stderr.
Jupyter paints stderr red and a newcomer reads red as a failure, so in a
Jupyter kernel a note goes to stdout, and ``%load_ext nbchat`` (or the first
``%chat``) replaces the notifier with one that shows a dimmed note in the
cell. Errors are never notes: they are raised.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from ._visible import for_terminal

Notifier = Callable[[str], None]


def print_note(text: str) -> None:
    """The plain-Python notifier: the note as one line on stderr (stdout in a Jupyter kernel)."""
    print(for_terminal(text), file=sys.stdout if _in_jupyter_kernel() else sys.stderr, flush=True)


def _in_jupyter_kernel() -> bool:
    """Whether stderr is a Jupyter kernel's stream, which front ends show as an error."""
    return type(sys.stderr).__module__.startswith("ipykernel.")


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
