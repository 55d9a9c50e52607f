"""The ``%chat`` magics loaded in each shell, as ``load`` hands them over.

The kernel's other parts use the same Chat as ``%chat`` — the answering of
outside agents' calls, the side panel JupyterLab's extension opens — so that
one store, one user, one key and one set of answering tools serve them all.
They find what they need here, never in IPython's magics registry.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

__all__ = ["Loaded", "asked", "asking", "chat_of", "hand_over", "loaded_in", "notebook_chat_of",
           "on_turn_end", "on_turn_events", "TurnWatcher", "turn_ended", "watched"]


class Loaded(Protocol):
    """What the loaded magics give the kernel's other parts."""

    @property
    def chat(self) -> Any:
        """The Chat ``%chat`` asks with now."""

    def notebook_chat(self) -> Any:
        """The Chat that also offers the notebook tools, which answers their calls."""

    def side_panel(self, *, focus: bool = True) -> Any:
        """The side panel on that Chat, following the magics' prices (as ``--panel --side``)."""


# By the shell itself, never its id: a new shell may get a closed one's address.
_LOADED: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()


def hand_over(shell: Any, loaded: Loaded | None) -> None:
    """``loaded`` are the magics of ``shell`` from now on; None: they are unloaded."""
    if loaded is None:
        _LOADED.pop(shell, None)
    else:
        _LOADED[shell] = weakref.ref(loaded)


def loaded_in(shell: Any) -> Loaded | None:
    """The magics loaded in ``shell``, or None (never loads them)."""
    found = _LOADED.get(shell) if shell is not None else None
    return found() if found is not None else None


def chat_of(shell: Any) -> Any:
    """The magics' Chat in ``shell``, loading nbchat's extension there first if need be."""
    if loaded_in(shell) is None:
        shell.extension_manager.load_extension("nbchat")
    loaded = loaded_in(shell)
    if loaded is None:
        raise RuntimeError("nbchat's extension did not load its magics in this shell")
    return loaded.chat


def notebook_chat_of(shell: Any) -> Any:
    """The magics' Chat with the notebook tools in ``shell`` (loading the extension if need be)."""
    chat_of(shell)
    loaded = loaded_in(shell)
    assert loaded is not None
    return loaded.notebook_chat()


_ASKED: list[int | None] = [None]  # the thread the side panel asks in now, if it does


def asking(thread_id: int | None) -> None:
    """The panel asks in ``thread_id`` (None: it is done): its mode is that thread's."""
    _ASKED[0] = thread_id


def asked() -> int | None:
    """The thread the panel asks in now; None when it does not."""
    return _ASKED[0]


_TURN_ENDED: list[Any] = []  # what runs after a turn that no cell ran (the panel's)


def on_turn_end(callback: Any) -> None:
    """Call ``callback()`` after each turn the panel streamed (a cell's has post_run_cell)."""
    _TURN_ENDED.append(callback)


def turn_ended() -> None:
    """A turn outside any cell ended: tell whoever asked (the page's proposals, say)."""
    for callback in list(_TURN_ENDED):
        callback()



class TurnWatcher(Protocol):
    """What reads a turn's events as they stream (the page's growing edits)."""

    def on(self, event: Any) -> None:
        """One event of the turn, before it is shown."""

    def end(self) -> None:
        """The turn's events ended (also on an error or an interrupt)."""


_TURN_WATCHERS: list[Callable[[], TurnWatcher | None]] = []


def on_turn_events(start: Callable[[], TurnWatcher | None], remove: bool = False) -> None:
    """Show each turn the panel streams to ``start()``'s watcher (None: not this turn)."""
    if remove:
        _TURN_WATCHERS.remove(start)
    else:
        _TURN_WATCHERS.append(start)


def watched(events: Iterable[Any]) -> Iterator[Any]:
    """A turn's events passed on as they come, each seen first by the watchers.

    One registered during the turn (its first question loads the notebook tools,
    which register theirs) starts watching from the next event.
    """
    watchers: list[TurnWatcher] = []
    started = 0
    try:
        for event in events:
            while started < len(_TURN_WATCHERS):
                watcher = _TURN_WATCHERS[started]()
                started += 1
                if watcher is not None:
                    watchers.append(watcher)
            for watcher in watchers:
                watcher.on(event)
            yield event
    finally:
        for watcher in watchers:
            with contextlib.suppress(Exception):  # a watcher must never break the turn
                watcher.end()
        close = getattr(events, "close", None)
        if close is not None:
            close()  # a stopped turn's generator: the engine records the interruption
