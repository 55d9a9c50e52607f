"""The statements that write a user's thread and turn rows in PostgreSQL.

:class:`~nbchat.store.postgres.PostgresStore` calls them; each runs inside the
caller's transaction (or opens one connection's transaction of its own) and
names the user in every clause, so that row-level security and the query agree.
"""

from __future__ import annotations

import time
from typing import Any

from ..base.errors import InputError
from ._pg import Database, enc_json, enc_text
from ._pgrows import TURN_COLUMNS, encode_changes
from .base import _not_found

__all__ = ["add_turn", "lock_turn", "thread_row", "update_header", "write_turn"]


def add_turn(
    db: Database,
    timeout: float,
    user: str,
    tid: int,
    query: str,
    answer: str,
    status: str,
    model: str | None,
    title: str | None,
    writer: int | None,
    context: list[dict[str, Any]] | None = None,
) -> int:
    now = time.time()
    with db.connection(timeout) as conn:
        row = conn.execute(
            """
            WITH thread AS (
                UPDATE nbchat_threads SET turns = turns + 1, updated = %(now)s,
                    title = COALESCE(%(title)s, title)
                WHERE owner = %(user)s AND id = %(tid)s
                RETURNING turns - 1 AS idx, model
            )
            INSERT INTO nbchat_turns (owner, thread_id, idx, query, answer, messages,
                status, pending, answered, model, started, finished, writer, context)
            SELECT %(user)s, %(tid)s, idx, %(query)s, %(answer)s, '[]', %(status)s, '[]',
                '[]', COALESCE(%(model)s, model), %(now)s, %(finished)s, %(writer)s,
                %(context)s::jsonb
            FROM thread
            RETURNING idx
            """,
            {
                "now": now, "title": title, "user": user, "tid": tid,
                "query": enc_text(query), "answer": enc_text(answer), "status": status,
                "model": None if model is None else enc_text(model), "writer": writer,
                "finished": now if status == "complete" else None,
                "context": enc_json(context or []),
            },
        ).fetchone()  # fmt: skip
    if row is None:
        raise _not_found(user, tid)
    return int(row[0])

def thread_row(conn: Any, user: str, tid: int, columns: str) -> tuple[Any, ...]:
    row = conn.execute(
        f"SELECT {columns} FROM nbchat_threads WHERE owner = %s AND id = %s",
        [user, tid],
    ).fetchone()
    if row is None:
        raise _not_found(user, tid)
    return tuple(row)

def update_header(
    db: Database, timeout: float, user: str, tid: int, changes: dict[str, Any], *,
    only_untitled: bool = False,
) -> bool:
    sets = ", ".join(
        f"{name} = %({name})s::jsonb" if name == "settings" else f"{name} = %({name})s"
        for name in changes
    )
    # A generated title is no activity: the thread keeps its place in lists.
    untitled = " AND title = ''" if only_untitled else ""
    touch = "" if only_untitled else ", updated = %(now)s"
    with db.connection(timeout) as conn:
        cursor = conn.execute(
            f"UPDATE nbchat_threads SET {sets}{touch} "
            f"WHERE owner = %(user)s AND id = %(tid)s{untitled}",
            {**changes, "now": time.time(), "user": user, "tid": tid},
        )
        if cursor.rowcount == 0:
            thread_row(conn, user, tid, "id")  # raises ThreadNotFound if it is gone
            return False
    return True

def lock_turn(conn: Any, user: str, tid: int, index: int) -> tuple[Any, ...]:
    """The turn's row, locked until the transaction ends (the thread's row too)."""
    (count,) = thread_row(conn, user, tid, "turns")
    row = conn.execute(
        f"SELECT {TURN_COLUMNS} FROM nbchat_turns "
        "WHERE owner = %s AND thread_id = %s AND idx = %s FOR UPDATE",
        [user, tid, index],
    ).fetchone()
    if row is None:
        have = f"its turns are 0 to {count - 1}" if count else "it has no turns yet"
        raise InputError(f"thread {tid} has no turn {index}; {have}")
    return tuple(row)

def write_turn(
    conn: Any,
    user: str,
    tid: int,
    index: int,
    changes: dict[str, Any],
    status: str,
    writer: int | None,
) -> tuple[Any, ...]:
    sets, values = encode_changes(changes)
    streaming = changes.get("status", status) == "streaming"
    now = time.time()
    row = conn.execute(
        f"UPDATE nbchat_turns SET {sets}, writer = %(writer_)s "
        "WHERE owner = %(user_)s AND thread_id = %(tid_)s AND idx = %(idx_)s "
        f"RETURNING {TURN_COLUMNS}",
        {**values, "writer_": writer if streaming else None, "user_": user,
         "tid_": tid, "idx_": index},
    ).fetchone()  # fmt: skip
    conn.execute(
        "UPDATE nbchat_threads SET updated = %s WHERE owner = %s AND id = %s",
        [now, user, tid],
    )
    return tuple(row)

