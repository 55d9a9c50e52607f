"""The Chat of the magics loaded in each shell, as ``load`` hands it over.

The kernel's other parts (the answering of outside agents' calls) use the
same Chat as ``%chat``, so that one store, one user and one set of answering
tools serve both; they find it here, never in IPython's magics registry.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

# By the shell itself, never its id: a new shell may get a closed one's address.
_CHATS: weakref.WeakKeyDictionary[Any, Callable[[], Any]] = weakref.WeakKeyDictionary()


def hand_over(shell: Any, chat: Callable[[], Any] | None) -> None:
    """``chat()`` gives the Chat of the magics loaded in ``shell``; None: they are unloaded."""
    if chat is None:
        _CHATS.pop(shell, None)
    else:
        _CHATS[shell] = chat


def chat_of(shell: Any) -> Any:
    """The magics' Chat in ``shell``, loading nbchat's extension there first if need be."""
    if shell not in _CHATS:
        shell.extension_manager.load_extension("nbchat")
    return _CHATS[shell]()
