"""Thread stores: every user's threads, in TinyDB files or PostgreSQL, never lost.

:class:`ThreadStore` (:mod:`nbchat.store.tinydb`) keeps them in a folder;
:class:`PostgresStore` (:mod:`nbchat.store.postgres`, imported only when asked
for) in a database; :func:`open_store` picks one from a location. Both keep
the records of :mod:`nbchat.store.base`; :mod:`nbchat.store.copy` copies and
checks whole stores.
"""

from __future__ import annotations

from typing import Any

from ._open import open_store
from .base import SCHEMA, STATUSES, SearchHit, Store, Thread, ThreadInfo, Turn
from .tinydb import ThreadStore

__all__ = [
    "SCHEMA", "STATUSES", "PostgresStore", "SearchHit", "Store", "Thread", "ThreadInfo",
    "ThreadStore", "Turn", "open_store",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    # PostgresStore imports psycopg (~0.1 s): only when asked for.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'nbchat.store' has no attribute {name!r}")
