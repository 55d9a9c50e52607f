"""The Chat of the magics loaded in each shell, as ``load`` hands it over.

The kernel's other parts (the answering of outside agents' calls) use the
same Chat as ``%chat``, so that one store, one user and one set of answering
tools serve both; they find it here, never in IPython's magics registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_CHATS: dict[int, Callable[[], Any]] = {}


def hand_over(shell: Any, chat: Callable[[], Any] | None) -> None:
    """``chat()`` gives the Chat of the magics loaded in ``shell``; None: they are unloaded."""
    if chat is None:
        _CHATS.pop(id(shell), None)
    else:
        _CHATS[id(shell)] = chat


def chat_of(shell: Any) -> Any:
    """The magics' Chat in ``shell``, loading nbchat's extension there first if need be."""
    if id(shell) not in _CHATS:
        shell.extension_manager.load_extension("nbchat")
    return _CHATS[id(shell)]()
