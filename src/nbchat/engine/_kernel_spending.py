"""What a kernel has spent: kept in the store, per person, so that a restart keeps counting.

A kernel is named by its connection file (``kernel-<id>.json``, passed as
``-f`` when Jupyter starts it): restarting a kernel keeps that file, so the
spending of the notebook's kernel goes on across restarts, while a kernel
shut down and started afresh (a new id) starts at $0. A process that is no
kernel (a script, ``python -m nbchat``) is its own: a key made at import.
:class:`StoreLedger` keeps the total in the person's store
(:meth:`~nbchat.store.base.Store.add_kernel_spent`); :class:`MemoryLedger`, for
an engine without a store (:class:`~nbchat.LLM`), in this process only.
"""

from __future__ import annotations

import secrets
import sys
import threading
from collections.abc import Sequence
from pathlib import PurePath
from typing import Protocol

from ..store.base import KERNEL_KEY_MAX, Store

_PROCESS_KEY = f"process-{secrets.token_hex(8)}"
_FLAGS = ("-f", "--f", "--IPKernelApp.connection_file")


def kernel_key(argv: Sequence[str] | None = None) -> str:
    """This kernel's name: its connection file's (``kernel-<id>``), else this process's.

    Only an ipykernel process (one that has loaded it) is named by the
    ``-f FILE.json`` it was started with; any other process keeps its own key.
    """
    if argv is None:
        if "ipykernel" not in sys.modules:  # looked up, not imported: no kernel, no file
            return _PROCESS_KEY
        argv = sys.argv
    args = list(argv)
    for index, arg in enumerate(args):
        flag, equals, value = arg.partition("=")
        if flag not in _FLAGS:
            continue
        if not equals:
            value = args[index + 1] if index + 1 < len(args) else ""
        path = PurePath(value)
        if path.suffix == ".json" and path.stem:
            return path.stem[:KERNEL_KEY_MAX]
    return _PROCESS_KEY


class Ledger(Protocol):
    """What a kernel has spent, in dollars, and a way to add to it."""

    @property
    def spent(self) -> float: ...

    def add(self, amount: float) -> None: ...


class StoreLedger:
    """A kernel's spending in the person's store: read and added to at each request."""

    def __init__(self, store: Store, key: str | None = None) -> None:
        self.store, self.key = store, key or kernel_key()

    @property
    def spent(self) -> float:
        return self.store.kernel_spent(self.key)

    def add(self, amount: float) -> None:
        self.store.add_kernel_spent(self.key, amount)


class MemoryLedger:
    """A process's spending in memory (an engine without a store): a restart forgets it."""

    def __init__(self) -> None:
        self._spent = 0.0
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        return self._spent

    def add(self, amount: float) -> None:
        with self._lock:
            self._spent += amount


PROCESS = MemoryLedger()
