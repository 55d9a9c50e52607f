"""One thread file of the TinyDB store: a header document, then one document per turn.

:class:`~nbchat.store.tinydb.ThreadStore` decides when to lock and which file
to open; these read and change one open thread file (a TinyDB on
:class:`~nbchat.store._storage.AtomicJSONStorage`), checking what they read.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from tinydb import TinyDB
from tinydb.table import Document

from ._files import Entry
from ._storage import AtomicJSONStorage, corrupt
from .base import _HEADER_TYPES, Turn


def turn_docs(db: TinyDB) -> list[Document]:
    """The turn documents, oldest first; a gap or a turn without its texts is corruption."""
    docs = sorted(db.table("turns").all(), key=lambda doc: doc.doc_id)
    for index, doc in enumerate(docs):
        if (
            doc.doc_id != index + 1
            or not isinstance(doc.get("query"), str)
            or not isinstance(doc.get("answer"), str)
        ):
            raise corrupt(db_path(db), "holds turns nbchat did not write")
    return docs


def header_of(db: TinyDB) -> Any:
    """The header document (None if there is none; not yet checked)."""
    return db.table("thread").get(doc_id=1)


def thread_id_of(db: TinyDB) -> int:
    """The id the header names, 0 if it names none."""
    header = header_of(db)
    return int(header["id"]) if isinstance(header, dict) else 0


def db_path(db: TinyDB) -> Path:
    """The path of the file, for messages."""
    return cast(AtomicJSONStorage, db.storage).path


def add_turn(
    db: TinyDB,
    header: dict[str, Any],
    turn: Turn,
    changes: dict[str, Any],
    writer: str | None = None,
) -> int:
    """Append *turn* (its model defaults to the thread's), apply header *changes*; its index."""
    turns = db.table("turns")
    index = len(turns)
    doc = {**asdict(turn), "writer": writer}
    if doc["model"] is None:
        doc["model"] = header["model"]
    turns.insert(Document(doc, doc_id=index + 1))
    set_header(db, **changes)
    return index


def set_header(db: TinyDB, **changes: Any) -> None:
    """Change the header and mark the thread updated now."""
    db.table("thread").update({**changes, "updated": time.time()}, doc_ids=[1])


def entry_of(header: dict[str, Any], turns: int) -> Entry:
    """The listing summary of a thread, for the index."""
    keys = ("title", "model", "created", "updated")
    return {**{k: header[k] for k in keys}, "turns": turns}


def valid_header(header: dict[str, Any]) -> bool:
    """Whether every header field nbchat writes is there, of its type."""
    return all(isinstance(header.get(k), t) for k, t in _HEADER_TYPES) and (
        header.get("system") is None or isinstance(header.get("system"), str)
    )


