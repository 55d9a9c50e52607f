"""The TinyDB store's counter file: its schema, its owner, and the next thread id.

``meta.json`` in a user's folder says which nbchat schema wrote the folder and
for whom, and holds the counter that makes thread ids sequential and never
reused (also after deletes). Every function here runs under the folder's lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinydb.table import Document

from ..base.errors import StoreVersionError
from ._files import UserFolder
from ._storage import corrupt, load_json, open_db
from .base import SCHEMA

__all__ = ["check_owner", "next_id", "raise_counter", "read_meta", "take_id"]


def read_meta(folder: UserFolder, user: str) -> dict[str, Any] | None:
    """The folder's counter record, checked; None before the first thread."""
    path = folder.meta
    data = load_json(path, private=True)
    if data is None:
        return None
    meta = data.get("store", {}).get("1")
    if not isinstance(meta, dict) or not isinstance(meta.get("next_id"), int):
        raise corrupt(path, "is not an nbchat store file")
    check_owner(meta, path, user)
    return meta


def take_id(folder: UserFolder, user: str) -> int:
    """The next thread id, handed out: the counter moves past it."""
    meta = _counter(folder, user)
    thread_id = next_id(folder, user, meta)
    raise_counter(folder, user, thread_id + 1, meta)
    return thread_id


def next_id(folder: UserFolder, user: str, meta: dict[str, Any] | None = None) -> int:
    """The id handed out next: past the counter and every thread file."""
    counter = (meta or _counter(folder, user))["next_id"]
    return max(counter, max(folder.scan()[0], default=0) + 1)


def raise_counter(
    folder: UserFolder, user: str, next_id: int, meta: dict[str, Any] | None = None
) -> None:
    """Move the counter up to ``next_id``; it never goes down."""
    meta = meta or _counter(folder, user)
    if meta["next_id"] < next_id:
        with open_db(folder.meta, sync_dir=False) as db:
            db.table("store").upsert(Document({**meta, "next_id": next_id}, doc_id=1))


def _counter(folder: UserFolder, user: str) -> dict[str, Any]:
    return read_meta(folder, user) or {"nbchat": SCHEMA, "user": user, "next_id": 1}


def check_owner(header: dict[str, Any], path: Path, user: str) -> None:
    """Refuse a file of a newer schema, not nbchat's, or another user's."""
    schema = header.get("nbchat")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise corrupt(path, "is not an nbchat store file")
    if schema > SCHEMA:
        raise StoreVersionError(
            f"{path} was written by a newer nbchat (schema {schema}); upgrade nbchat "
            f"(this one reads schema {SCHEMA})"
        )
    if header.get("user") != user:
        raise corrupt(path, f"does not belong to user {user!r}")
