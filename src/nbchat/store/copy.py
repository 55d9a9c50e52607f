"""Copy threads between stores and check a store: ``python -m nbchat store migrate|check``.

Migration keeps each thread's id, so links and ``%chat -t N`` stay right, and
carries each user's id counter, so an id deleted in the source is never handed
out again in the destination. It is idempotent: a thread the destination
already has is left alone, and a second run copies nothing. Afterwards the
destination must hold every source thread with at least as many turns;
otherwise :class:`~nbchat.base.errors.StoreError` names the differences.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tinydb.table import Document

from ..base.config import store_location
from ..base.errors import StoreCorrupt, StoreError, StoreVersionError, ThreadNotFound
from ._meta import next_id, raise_counter
from ._open import open_store
from ._storage import load_json, open_db
from .base import SCHEMA, Store, Thread
from .tinydb import ThreadStore

__all__ = ["CheckReport", "MigrationReport", "check_store", "migrate_store", "store_users"]


@dataclass
class MigrationReport:
    """What a migration did, user by user."""

    copied: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [
            f"{user}: {self.copied[user]} threads copied, {self.present[user]} already there"
            for user in self.copied
        ]
        return "\n".join(lines) or "no threads to copy"


@dataclass
class CheckReport:
    """What checking a store found: threads and turns per user, and the problems."""

    threads: dict[str, int] = field(default_factory=dict)
    turns: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        lines = [
            f"{user}: {self.threads[user]} threads, {self.turns[user]} turns"
            for user in self.threads
        ]
        lines += [f"problem: {problem}" for problem in self.problems]
        return "\n".join(lines) or "no threads"


def store_users(location: str | os.PathLike[str] | None = None) -> list[str]:
    """The users with threads (or a thread counter) in the store at *location*, sorted.

    A database role under row-level security sees only itself.
    """
    where = store_location(location)
    if isinstance(where, Path):
        return sorted(_folder_users(where))
    from ._pg import open_database

    with open_database(where).connection() as conn:
        rows = conn.execute(
            "SELECT owner FROM nbchat_users UNION SELECT owner FROM nbchat_threads"
        ).fetchall()
    return sorted(row[0] for row in rows)


def migrate_store(
    source: str | os.PathLike[str] | None,
    destination: str | os.PathLike[str],
    user: str | None = None,
) -> MigrationReport:
    """Copy every thread of every user (or of *user*) from *source* to *destination*."""
    report = MigrationReport()
    for name in [user] if user is not None else store_users(source):
        src, dst = open_store(source, name), open_store(destination, name)
        copied = present = 0
        for info in sorted(src.threads(), key=lambda info: info.id):
            if restore_thread(dst, src.get(info.id)):
                copied += 1
            else:
                present += 1
        carry_counter(dst, next_thread_id(src))
        report.copied[name], report.present[name] = copied, present
        _check_copy(src, dst)
    return report


def _check_copy(src: Store, dst: Store) -> None:
    have = {info.id: info.turns for info in dst.threads()}
    missing = [
        f"thread {info.id} ({info.turns} turns, {have.get(info.id, 0)} copied)"
        for info in src.threads()
        if have.get(info.id, -1) < info.turns
    ]
    if missing:
        raise StoreError(
            f"the copy of user {src.user!r}'s threads in {dst.location()} is short: "
            f"{', '.join(missing)}; run the migration again"
        )


def check_store(
    location: str | os.PathLike[str] | None = None, user: str | None = None
) -> CheckReport:
    """Read every thread of every user (or of *user*) and report what cannot be read."""
    report = CheckReport()
    for name in [user] if user is not None else store_users(location):
        store = open_store(location, name)
        infos = store.threads()
        report.threads[name] = len(infos)
        report.turns[name] = 0
        for info in infos:
            try:
                report.turns[name] += len(store.get(info.id).turns)
            except (StoreCorrupt, StoreVersionError, ThreadNotFound) as exc:
                report.problems.append(str(exc))
    return report


# -- writing a thread with its id -------------------------------------------------------


def next_thread_id(store: Store) -> int:
    """The id *store* hands out next for its user: every lower one is taken, deleted or not."""
    if isinstance(store, ThreadStore):
        with store._folder.locked():
            return next_id(store._folder, store.user)
    return _postgres_next_id(store)


def _postgres_next_id(store: Any) -> int:
    with store._db.connection() as conn:
        row = conn.execute(
            "SELECT GREATEST((SELECT next_id FROM nbchat_users WHERE owner = %(user)s), "
            "(SELECT max(id) + 1 FROM nbchat_threads WHERE owner = %(user)s), 1)",
            {"user": store.user},
        ).fetchone()
    return int(row[0])


def carry_counter(store: Store, next_id: int) -> None:
    """Move *store*'s id counter up to *next_id*, so that it never hands out a lower id."""
    if isinstance(store, ThreadStore):
        with store._folder.locked():
            raise_counter(store._folder, store.user, next_id)
        return
    with store._db.connection() as conn, conn.transaction():  # type: ignore[attr-defined]
        _raise_postgres_counter(conn, store.user, next_id)


def _raise_postgres_counter(conn: Any, user: str, next_id: int) -> None:
    conn.execute(
        "INSERT INTO nbchat_users AS u (owner, next_id) VALUES (%(user)s, %(next)s) "
        "ON CONFLICT (owner) DO UPDATE SET next_id = GREATEST(u.next_id, %(next)s)",
        {"user": user, "next": next_id},
    )


def restore_thread(store: Store, thread: Thread) -> bool:
    """Write *thread*, keeping its id, unless *store* has that id already; whether it wrote.

    The destination's id counter moves past the id, so new threads never reuse it.
    """
    if isinstance(store, ThreadStore):
        return _restore_tinydb(store, thread)
    return _restore_postgres(store, thread)


def _turn_docs(thread: Thread) -> list[dict[str, Any]]:
    docs = []
    for turn in thread.turns:
        doc = asdict(turn)
        doc["pending"] = [call.to_dict() for call in turn.pending]
        doc["answered"] = [answer.to_dict() for answer in turn.answered]
        if doc["status"] == "streaming":  # its writer is in another store's world
            doc["status"] = "interrupted"
        docs.append(doc)
    return docs


def _restore_tinydb(store: ThreadStore, thread: Thread) -> bool:
    folder = store._folder
    with folder.locked():
        path = folder.thread(thread.id)
        if path.exists():
            return False
        header = {
            "nbchat": SCHEMA, "id": thread.id, "user": store.user, "title": thread.title,
            "model": thread.model, "system": thread.system, "created": thread.created,
            "updated": thread.updated, "settings": thread.settings,
        }  # fmt: skip
        with open_db(path) as db:
            db.table("thread").insert(Document(header, doc_id=1))
            for index, doc in enumerate(_turn_docs(thread)):
                db.table("turns").insert(Document({**doc, "writer": None}, doc_id=index + 1))
        raise_counter(store._folder, store.user, thread.id + 1)
    return True


def _restore_postgres(store: Any, thread: Thread) -> bool:
    from ._pg import enc_json, enc_text

    def text(value: str | None) -> str | None:
        return None if value is None else enc_text(value)

    with store._db.connection() as conn, conn.transaction():
        inserted = conn.execute(
            "INSERT INTO nbchat_threads (owner, id, title, model, system, settings, created, "
            "updated, turns) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            [store.user, thread.id, text(thread.title), text(thread.model), text(thread.system),
             enc_json(thread.settings), thread.created, thread.updated, len(thread.turns)],
        ).rowcount  # fmt: skip
        _raise_postgres_counter(conn, store.user, thread.id + 1)
        if not inserted:
            return False
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO nbchat_turns (owner, thread_id, idx, query, answer, messages, "
                "status, pending, answered, error, model, usage, started, finished) VALUES "
                "(%s, %s, %s, %s, %s, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s, %s, %s::jsonb, "
                "%s, %s)",
                [
                    (store.user, thread.id, index, text(doc["query"]), text(doc["answer"]),
                     enc_json(doc["messages"]), doc["status"], enc_json(doc["pending"]),
                     enc_json(doc["answered"]), text(doc["error"]), text(doc["model"]),
                     None if doc["usage"] is None else enc_json(doc["usage"]),
                     doc["started"], doc["finished"])
                    for index, doc in enumerate(_turn_docs(thread))
                ],
            )  # fmt: skip
    return True


def _folder_users(root: Path) -> Iterator[str]:
    if not root.is_dir():
        return
    for folder in root.iterdir():
        meta = folder / "meta.json"
        with contextlib.suppress(StoreCorrupt, OSError):
            data = load_json(meta) if meta.exists() else None
            user = (data or {}).get("store", {}).get("1", {}).get("user")
            if isinstance(user, str):
                yield user
