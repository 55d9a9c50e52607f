"""PostgresStore: every user's threads in one PostgreSQL database, for hubs and teams.

The same :class:`~nbchat.store.Store` as the TinyDB folder, with the same
guarantees, for many users on many machines: each method is one transaction
(most are one statement), thread ids come from a per-user counter row that
``INSERT … ON CONFLICT DO UPDATE`` bumps atomically (sequential, never
reused), a turn's index from the thread row that the append locks, and
answering a pending call locks the turn (``SELECT … FOR UPDATE``) so that
exactly one answer wins. Message bodies, pending and answered calls are
``jsonb``; queries and answers are indexed for full-text search.

Every query names the user. When each user connects with a database role of
their own (the hub's job), row-level security also binds every row to the role
that wrote it, so a user's own code cannot read or change anyone else's rows
even with hand-written SQL; see docs/teams/postgresql.md.

The schema is created and migrated by :mod:`nbchat.store._pg` the first time a
process opens the database; :mod:`nbchat.store._pgrows` turns rows into records
and changes into columns. Each method keeps its SQL statement beside the
parameters it binds, so that one reads with the other; the statements that
write a thread's rows inside a transaction are in :mod:`nbchat.store._pgwrites`.

Measured by ``benchmarks/store_backends.py`` on a busy 2-core machine with
1,000 threads x 100 turns, PostgreSQL 15 on loopback with fsync on (two runs):
append p50 2.2-3.9 ms, nearly all of it the WAL fsync of the commit (0.3 ms
with fsync off), the same with 10, 100 or 1,000 threads; thread_list
0.6-0.8 ms; thread_details 0.3-0.4 ms; answer claim 3-4 ms; search 0.6-3.8 ms
(the TinyDB folder reads every file: 0.7-0.9 s); 16 processes appending
together 730-740 appends/s, 5-7x the TinyDB folder. A new process spends
~170 ms on its first call, mostly importing psycopg and connecting.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from ..base.config import ENV_STORE_URL, default_user
from ..base.content import ContextItem
from ..base.errors import (
    ConfigError,
    InputError,
    StoreCorrupt,
)
from ..base.records import AnsweredCall, RecordError
from ._pg import (
    CONNECT_TIMEOUT,
    Database,
    dec_json,
    dec_text,
    enc_json,
    enc_text,
    live_writers,
    open_database,
    redact,
    writer_key,
)
from ._pgrows import TURN_COLUMNS, search_match, turn_from_row
from ._pgwrites import add_turn, lock_turn, thread_row, update_header, write_turn
from .base import (
    _UNSET,
    SPENDING_DAYS,
    SearchHit,
    Thread,
    ThreadInfo,
    Turn,
    _check_amount,
    _check_id,
    _check_index,
    _check_json,
    _check_kernel,
    _check_model,
    _check_optional_str,
    _check_query,
    _check_title,
    _check_turn_field,
    _check_type,
    _check_user,
    _claim_changes,
    _not_found,
)

__all__ = ["PostgresStore"]

class PostgresStore:
    """The threads of one user, kept in a PostgreSQL database that many machines share.

    Parameters
    ----------
    url
        A ``postgresql://`` URL (libpq's form: user, password, host, port,
        database, options); default ``NBCHAT_STORE_URL``.
    user
        Whose threads; default ``NBCHAT_USER``, ``JUPYTERHUB_USER``, the login.
        When row-level security applies to the connecting role, the user must
        be that role's name.
    timeout
        Seconds to wait for a connection before
        :class:`~nbchat.base.errors.StoreUnavailable`.
    """

    def __init__(
        self, url: str | None = None, user: str | None = None, *, timeout: float = CONNECT_TIMEOUT
    ) -> None:
        url = url if url is not None else os.environ.get(ENV_STORE_URL, "").strip()
        if not url:
            raise ConfigError(f"no database URL: pass one or set {ENV_STORE_URL}")
        self.user = _check_user(default_user() if user is None else user)
        self.url = redact(url)
        self._db: Database = open_database(url)
        self._timeout = timeout
        if self._db.enforced and self._db.role != self.user:
            raise ConfigError(
                f"the database role {self._db.role!r} may keep only its own threads, not "
                f"those of user {self.user!r}; connect as role {self.user!r} or set "
                f"NBCHAT_USER={self._db.role}"
            )

    @property
    def path(self) -> str:
        """The database, as ``postgresql://host:port/db`` (never the password)."""
        return self.url

    def __repr__(self) -> str:
        return f"PostgresStore(url={self.url!r}, user={self.user!r})"

    def location(self, thread_id: int | None = None) -> str:
        """Where a thread (or this user's threads) is kept, for messages."""
        if thread_id is None:
            return f"{self.url} threads of user {self.user!r}"
        return f"{self.url} thread {thread_id} of user {self.user!r}"

    def stamp(self, thread_id: int) -> object:
        """What changes whenever the thread is written (its update time and turn count),
        one small query: for a caller that waits on another process's write. None: gone."""
        tid = _check_id(thread_id, self.user)
        with self._db.connection(self._timeout) as conn:
            row = conn.execute("SELECT updated, turns FROM nbchat_threads WHERE owner = %s "
                               "AND id = %s", [self.user, tid]).fetchone()  # fmt: skip
        return None if row is None else tuple(row)

    def change_stamp(self) -> object:
        """What changes whenever any of the user's threads is written, in one query whose
        answer is one short row: the count, the latest update, the turns, and the titles'
        digest (a generated title does not count as an update)."""
        with self._db.connection(self._timeout) as conn:
            row = conn.execute(
                "SELECT count(*), max(updated), sum(turns), "
                "md5(string_agg(id::text || ':' || title, ',' ORDER BY id)) "
                "FROM nbchat_threads WHERE owner = %s", [self.user],
            ).fetchone()
        return tuple(row)

    # -- threads ---------------------------------------------------------------------

    def new_thread(
        self,
        model: str,
        *,
        system: str | None = None,
        title: str = "",
        settings: dict | None = None,
    ) -> int:
        """Start an empty thread and return its id."""
        model = _check_model(model)
        system = _check_optional_str(system, "system")
        title = _check_title(title, allow_empty=True)
        settings = _check_json({} if settings is None else settings, "settings", dict)
        now = time.time()
        with self._db.connection(self._timeout) as conn:
            row = conn.execute(
                """
                WITH counter AS (
                    INSERT INTO nbchat_users AS u (owner, next_id) VALUES (%(user)s, 2)
                    ON CONFLICT (owner) DO UPDATE SET next_id = u.next_id + 1
                    RETURNING next_id - 1 AS id
                )
                INSERT INTO nbchat_threads (owner, id, title, model, system, settings,
                                            created, updated)
                SELECT %(user)s, id, %(title)s, %(model)s, %(system)s, %(settings)s::jsonb,
                       %(now)s, %(now)s FROM counter
                RETURNING id
                """,
                {
                    "user": self.user, "title": enc_text(title), "model": enc_text(model),
                    "system": None if system is None else enc_text(system),
                    "settings": enc_json(settings), "now": now,
                },
            ).fetchone()  # fmt: skip
        return int(row[0])

    def threads(self) -> list[ThreadInfo]:
        """Summaries of the user's threads, most recently updated first."""
        with self._db.connection(self._timeout) as conn:
            rows = conn.execute(
                "SELECT id, title, model, turns, created, updated FROM nbchat_threads "
                "WHERE owner = %s ORDER BY updated DESC, id DESC",
                [self.user],
            ).fetchall()
        return [
            ThreadInfo(int(tid), dec_text(title) or "", dec_text(model) or "", turns, c, u)
            for tid, title, model, turns, c, u in rows
        ]

    def thread_list(self) -> list[tuple[int, str]]:
        """(id, title) of the user's threads, most recently updated first."""
        with self._db.connection(self._timeout) as conn:
            rows = conn.execute(
                "SELECT id, title FROM nbchat_threads WHERE owner = %s "
                "ORDER BY updated DESC, id DESC",
                [self.user],
            ).fetchall()
        return [(int(tid), dec_text(title) or "") for tid, title in rows]

    def thread_details(self, thread_id: int) -> list[tuple[str, str]]:
        """(query, answer) of each turn of a thread, oldest first."""
        tid = _check_id(thread_id, self.user)
        with self._db.connection(self._timeout) as conn, conn.transaction():
            thread_row(conn, self.user, tid, "id")
            rows = conn.execute(
                "SELECT query, answer FROM nbchat_turns WHERE owner = %s AND thread_id = %s "
                "ORDER BY idx",
                [self.user, tid],
            ).fetchall()
        return [(dec_text(q) or "", dec_text(a) or "") for q, a in rows]

    def get(self, thread_id: int) -> Thread:
        """The whole thread; a turn whose writer died while streaming reads as interrupted."""
        tid = _check_id(thread_id, self.user)
        with self._db.connection(self._timeout) as conn, conn.transaction():
            header = thread_row(
                conn, self.user, tid, "title, model, system, settings::text, created, updated"
            )
            rows = conn.execute(
                f"SELECT {TURN_COLUMNS} FROM nbchat_turns "
                "WHERE owner = %s AND thread_id = %s ORDER BY idx",
                [self.user, tid],
            ).fetchall()
            live = live_writers(conn) if any(row[4] == "streaming" for row in rows) else set()
        title, model, system, settings, created, updated = header
        turns = [self._turn(tid, row, live) for row in rows]
        return Thread(
            id=tid, user=self.user, title=dec_text(title) or "", model=dec_text(model) or "",
            system=dec_text(system), created=created, updated=updated, turns=turns,
            settings=self._settings(tid, settings),
        )  # fmt: skip

    def update_thread_title(
        self, thread_id: int, title: str, *, if_untitled: bool = False
    ) -> bool:
        """Retitle a thread (whitespace runs become single spaces); with ``if_untitled``,
        only a thread that has no title yet. Whether the title changed."""
        tid = _check_id(thread_id, self.user)
        changes = {"title": enc_text(_check_title(title))}
        return update_header(self._db, self._timeout, self.user, tid, changes,
                             only_untitled=if_untitled)  # fmt: skip

    def update_thread(
        self,
        thread_id: int,
        *,
        model: str | None = None,
        system: str | None = _UNSET,
        settings: dict | None = None,
    ) -> None:
        """Change a thread's model, system prompt (None clears it) or settings."""
        tid = _check_id(thread_id, self.user)
        changes: dict[str, Any] = {}
        if model is not None:
            changes["model"] = enc_text(_check_model(model))
        if system is not _UNSET:
            checked = _check_optional_str(system, "system")
            changes["system"] = None if checked is None else enc_text(checked)
        if settings is not None:
            changes["settings"] = enc_json(_check_json(settings, "settings", dict))
        if changes:
            update_header(self._db, self._timeout, self.user, tid, changes)

    def delete_thread(self, thread_id: int) -> None:
        """Delete a thread and its turns for good; its id is never given out again."""
        tid = _check_id(thread_id, self.user)
        with self._db.connection(self._timeout) as conn:
            cursor = conn.execute(
                "DELETE FROM nbchat_threads WHERE owner = %s AND id = %s", [self.user, tid]
            )
            if cursor.rowcount == 0:
                raise _not_found(self.user, tid)

    def search(self, text: str) -> list[SearchHit]:
        """Turns whose query or answer has every word of *text* (as a word or its start).

        Full-text search on an index, ignoring case; newest threads first,
        then turn by turn.
        """
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"search needs some text to look for, got {text!r}")
        match, value = search_match(text)
        with self._db.connection(self._timeout) as conn:
            rows = conn.execute(
                f"""
                SELECT t.id, t.title, u.idx, u.query, u.answer
                FROM nbchat_turns u
                JOIN nbchat_threads t ON t.owner = u.owner AND t.id = u.thread_id
                WHERE u.owner = %(user)s AND {match}
                ORDER BY t.updated DESC, t.id DESC, u.idx
                """,
                {"user": self.user, "match": value},
            ).fetchall()
        return [
            SearchHit(int(tid), dec_text(title) or "", idx, dec_text(q) or "", dec_text(a) or "")
            for tid, title, idx, q, a in rows
        ]

    # -- turns -----------------------------------------------------------------------

    def append_response(
        self, thread_id: int, query: str, answer: str, title: str | None = None
    ) -> int:
        """Add a complete turn in one transaction and return its index; *title* retitles."""
        tid = _check_id(thread_id, self.user)
        query = _check_query(query)
        answer = _check_type(answer, "answer", str)
        new_title = None if title is None else enc_text(_check_title(title))
        return add_turn(self._db, self._timeout, self.user, tid, query, answer, "complete",
                        None, new_title, None)  # fmt: skip

    def start_turn(
        self,
        thread_id: int,
        query: str,
        *,
        model: str | None = None,
        context: Sequence[ContextItem] = (),
    ) -> int:
        """Save the query (and the objects attached to it) as a streaming turn before it is
        sent; return the turn's index."""
        tid = _check_id(thread_id, self.user)
        query = _check_query(query)
        model = None if model is None else _check_model(model)
        items = [ContextItem.from_dict(item).to_dict() for item in context]
        writer = writer_key(self._db)
        return add_turn(self._db, self._timeout, self.user, tid, query, "", "streaming",
                        model, None, writer, items)  # fmt: skip

    def update_turn(self, thread_id: int, turn: int, **changes: Any) -> Turn:
        """Change some fields of a turn and return it as saved.

        Fields: answer, messages, status, pending, answered, error, usage,
        finished, model, options, finish_reason, reasoning. A turn left
        "streaming" belongs to the calling process from then on.
        """
        tid = _check_id(thread_id, self.user)
        index = _check_index(turn)
        checked = {name: _check_turn_field(name, value) for name, value in changes.items()}
        writer = None if checked.get("status", "streaming") != "streaming" else self._writer()
        with self._db.connection(self._timeout) as conn, conn.transaction():
            row = lock_turn(conn, self.user, tid, index)
            if checked:
                row = write_turn(conn, self.user, tid, index, checked, row[4], writer)
                live = {writer} if writer is not None else set()
            else:
                live = live_writers(conn) if row[4] == "streaming" else set()
        return self._turn(tid, row, live)

    def claim_call(
        self,
        thread_id: int,
        turn: int,
        call_id: str,
        *,
        output: str,
        answer: AnsweredCall,
    ) -> Turn:
        """Record the answer to a pending call, exactly once; the turn as saved.

        The turn's row is locked for the transaction: the call must still be
        pending. Its entry moves to ``answered``, the tool message with
        ``output`` joins the messages and, once no call waits any more, the
        turn turns "streaming" (owned by this process, which resumes it). A
        second answer raises :class:`~nbchat.base.errors.AlreadyAnswered` and
        changes nothing.
        """
        tid = _check_id(thread_id, self.user)
        index = _check_index(turn)
        output = _check_type(output, "output", str)
        writer = self._writer()
        with self._db.connection(self._timeout) as conn, conn.transaction():
            current = self._turn(tid, lock_turn(conn, self.user, tid, index), set())
            changes = _claim_changes(current, tid, call_id, output, answer)
            checked = {name: _check_turn_field(name, value) for name, value in changes.items()}
            row = write_turn(conn, self.user, tid, index, checked, current.status, writer)
        return self._turn(tid, row, {writer})

    def kernel_spent(self, kernel: str) -> float:
        """What ``kernel`` (a key the front end chose) has spent, in dollars."""
        key = _check_kernel(kernel)
        with self._db.connection(self._timeout) as conn:
            row = conn.execute(
                "SELECT spent FROM nbchat_kernel_spending WHERE owner = %s AND kernel = %s",
                [self.user, enc_text(key)],
            ).fetchone()
        return float(row[0]) if row is not None and 0 <= row[0] < 1e12 else 0.0

    def add_kernel_spent(self, kernel: str, amount: float) -> float:
        """Add ``amount`` dollars to what ``kernel`` has spent; the new total (one transaction)."""
        key, dollars, now = _check_kernel(kernel), _check_amount(amount), time.time()
        with self._db.connection(self._timeout) as conn, conn.transaction():
            conn.execute("DELETE FROM nbchat_kernel_spending WHERE owner = %s AND updated < %s",
                         [self.user, now - SPENDING_DAYS * 86400])  # fmt: skip
            row = conn.execute(
                """
                INSERT INTO nbchat_kernel_spending AS k (owner, kernel, spent, started, updated)
                VALUES (%(user)s, %(kernel)s, %(amount)s, %(now)s, %(now)s)
                ON CONFLICT (owner, kernel) DO UPDATE
                    SET spent = k.spent + EXCLUDED.spent, updated = EXCLUDED.updated
                RETURNING spent
                """,
                {"user": self.user, "kernel": enc_text(key), "amount": dollars, "now": now},
            ).fetchone()  # fmt: skip
        return float(row[0])

    # -- inside a transaction ---------------------------------------------------------------

    def _writer(self) -> int:
        return writer_key(self._db)

    def _turn(self, tid: int, row: tuple[Any, ...], live: set[int]) -> Turn:
        try:
            return turn_from_row(tid, row, live)
        except (RecordError, ValueError) as exc:  # InputError: a damaged context item
            raise self._corrupt(tid, f"holds a damaged record in turn {row[0]} ({exc})") from None

    def _settings(self, tid: int, raw: str) -> dict:
        settings = dec_json(raw)
        if not isinstance(settings, dict):
            raise self._corrupt(tid, "has settings that are not an object")
        return settings

    # -- checks ----------------------------------------------------------------------------

    def _corrupt(self, tid: int, what: str) -> StoreCorrupt:
        where = self.location(tid)
        return StoreCorrupt(
            f"{where} {what}; it was left untouched; repair the row or delete the thread",
            path=where,
        )
