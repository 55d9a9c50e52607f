"""What sits under the PostgreSQL store: pools, the schema and its migrations, writers, encoding.

One :class:`Database` per connection string and process holds a
``psycopg_pool`` pool of autocommit connections (each operation opens its own
transaction when it needs more than one statement) and checks each connection
before lending it, so after a server restart the next operation gets a fresh
one. The first open creates or migrates the schema under an advisory lock, so
that two processes starting at once do it once.

Writers: a process that streams a turn holds a session advisory lock on a
random key, on a connection of its own kept for the life of the process; the
turn records that key. The server drops the lock when the process dies, however
it dies (and on a server restart), so a reader tells "still being written" from
"the writer is gone" by looking the key up in ``pg_locks``.

Text: PostgreSQL refuses NUL characters and lone surrogates in ``text`` and
``jsonb``. Strings holding them (or starting with :data:`MARK`) are stored as
:data:`MARK` + their JSON escape and read back exactly; other strings are stored
as they are, so full-text search sees them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..base.errors import StoreError, StoreUnavailable, StoreVersionError

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError:  # pragma: no cover - reported by Database.open
    psycopg = None  # type: ignore[assignment]

SCHEMA_VERSION = 4
CONNECT_TIMEOUT = 10.0
POOL_SIZE = 4  # a kernel rarely runs more than two operations at once
MARK = "\ue000"
_MIGRATION_LOCK = 0x6E62636861745F31  # the ASCII of "nbchat_1": one schema migrator at a time

TABLES = ("nbchat_users", "nbchat_threads", "nbchat_turns", "nbchat_kernel_spending")

# Migration n (1-based) brings the schema from version n - 1 to n. Row-level security:
# a role that neither owns the tables nor bypasses RLS sees and writes only the rows
# whose owner is its own role name.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE nbchat_schema (version integer NOT NULL);
    INSERT INTO nbchat_schema VALUES (0);
    CREATE TABLE nbchat_users (
        owner text PRIMARY KEY,
        next_id bigint NOT NULL
    );
    CREATE TABLE nbchat_threads (
        owner text NOT NULL,
        id bigint NOT NULL,
        title text NOT NULL,
        model text NOT NULL,
        system text,
        settings jsonb NOT NULL,
        created double precision NOT NULL,
        updated double precision NOT NULL,
        turns integer NOT NULL DEFAULT 0,
        PRIMARY KEY (owner, id)
    );
    CREATE INDEX nbchat_threads_recent ON nbchat_threads (owner, updated DESC, id DESC);
    CREATE TABLE nbchat_turns (
        owner text NOT NULL,
        thread_id bigint NOT NULL,
        idx integer NOT NULL,
        query text NOT NULL,
        answer text NOT NULL,
        messages jsonb NOT NULL,
        status text NOT NULL,
        pending jsonb NOT NULL,
        answered jsonb NOT NULL,
        error text,
        model text,
        usage jsonb,
        started double precision NOT NULL,
        finished double precision,
        writer bigint,
        words tsvector GENERATED ALWAYS AS (to_tsvector('simple', query || ' ' || answer)) STORED,
        PRIMARY KEY (owner, thread_id, idx),
        FOREIGN KEY (owner, thread_id) REFERENCES nbchat_threads (owner, id) ON DELETE CASCADE
    );
    CREATE INDEX nbchat_turns_words ON nbchat_turns USING gin (words);
    GRANT SELECT ON nbchat_schema TO PUBLIC;
    GRANT SELECT, INSERT, UPDATE, DELETE ON nbchat_users, nbchat_threads, nbchat_turns TO PUBLIC;
    ALTER TABLE nbchat_users ENABLE ROW LEVEL SECURITY;
    ALTER TABLE nbchat_threads ENABLE ROW LEVEL SECURITY;
    ALTER TABLE nbchat_turns ENABLE ROW LEVEL SECURITY;
    CREATE POLICY own_rows ON nbchat_users
        USING (owner = current_user) WITH CHECK (owner = current_user);
    CREATE POLICY own_rows ON nbchat_threads
        USING (owner = current_user) WITH CHECK (owner = current_user);
    CREATE POLICY own_rows ON nbchat_turns
        USING (owner = current_user) WITH CHECK (owner = current_user);
    DO $$ BEGIN
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO PUBLIC', current_schema());
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END $$;
    """,
    # 2: how each reply ended, the options it was asked with, the model's thinking.
    """
    ALTER TABLE nbchat_turns
        ADD COLUMN options jsonb,
        ADD COLUMN finish_reason text,
        ADD COLUMN reasoning text NOT NULL DEFAULT '';
    """,
    # 3: the objects attached to a question (notebook context).
    """
    ALTER TABLE nbchat_turns ADD COLUMN context jsonb NOT NULL DEFAULT '[]';
    """,
    # 4: what each kernel of a user has spent, so a kernel's budget survives its restarts.
    """
    CREATE TABLE nbchat_kernel_spending (
        owner text NOT NULL,
        kernel text NOT NULL,
        spent double precision NOT NULL,
        started double precision NOT NULL,
        updated double precision NOT NULL,
        PRIMARY KEY (owner, kernel)
    );
    GRANT SELECT, INSERT, UPDATE, DELETE ON nbchat_kernel_spending TO PUBLIC;
    ALTER TABLE nbchat_kernel_spending ENABLE ROW LEVEL SECURITY;
    CREATE POLICY own_rows ON nbchat_kernel_spending
        USING (owner = current_user) WITH CHECK (owner = current_user);
    """,
)


def redact(conninfo: str) -> str:
    """``postgresql://host:port/db``: the URL without its user, password or options."""
    try:
        parts = conninfo_to_dict(conninfo)
    except Exception:  # a malformed URL: say nothing that could hold a secret
        return "postgresql://(unparsable URL)"
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port, db = parts.get("port") or "5432", parts.get("dbname") or parts.get("user") or ""
    return f"postgresql://{host}:{port}/{db}"


@dataclass
class Database:
    """One PostgreSQL database, as this process reaches it: the pool and the role."""

    conninfo: str
    where: str
    pool: Any
    role: str
    enforced: bool  # row-level security applies to this role: it is the only user

    @contextlib.contextmanager
    def connection(self, timeout: float = CONNECT_TIMEOUT) -> Iterator[Any]:
        """A pooled connection; psycopg errors become nbchat errors here and only here."""
        try:
            with self.pool.connection(timeout=timeout) as conn:
                yield conn
        except PoolTimeout as exc:
            raise unavailable(self.where, exc) from None
        except psycopg.OperationalError as exc:
            raise unavailable(self.where, exc) from None
        except pg_errors.InsufficientPrivilege as exc:
            raise StoreError(
                f"the database at {self.where} refused role {self.role!r}: "
                f"{_first_line(exc)}; its administrator grants access"
            ) from None
        except psycopg.Error as exc:
            raise StoreError(
                f"the thread store at {self.where} failed: {_first_line(exc)}"
            ) from None


def unavailable(where: str, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"lost the thread store at {where} ({_first_line(exc)}); what was saved before "
        f"is kept; try again once the database server is back"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


_databases: dict[tuple[str, int], Database] = {}
_writers: dict[tuple[str, int], tuple[Any, int]] = {}
_lock = threading.Lock()


def open_database(conninfo: str) -> Database:
    """This process's :class:`Database` for *conninfo*, created (and the schema checked) once."""
    if psycopg is None:
        raise StoreError(
            "a postgresql:// store needs psycopg; install it with: pip install 'nbchat[postgres]'"
        )
    key = (conninfo, os.getpid())
    with _lock:
        database = _databases.get(key)
        if database is None:
            database = _databases[key] = _connect(conninfo)
    return database


def _connect(conninfo: str) -> Database:
    where = redact(conninfo)
    kwargs = {"autocommit": True, "application_name": "nbchat"}
    pool = ConnectionPool(
        conninfo, min_size=1, max_size=POOL_SIZE, kwargs=kwargs, open=False,
        check=ConnectionPool.check_connection, timeout=CONNECT_TIMEOUT, name="nbchat",
    )  # fmt: skip
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except PoolTimeout:
        pool.close()
        raise StoreUnavailable(
            f"cannot reach the thread store at {where} within {CONNECT_TIMEOUT:g} s; "
            f"check that the server runs and the URL in NBCHAT_STORE_URL"
        ) from None
    database = Database(conninfo, where, pool, role="", enforced=False)
    try:
        with database.connection() as conn:
            database.role, database.enforced = migrate(conn, where)
    except BaseException:
        pool.close()
        raise
    return database


def migrate(conn: Any, where: str) -> tuple[str, bool]:
    """Create or upgrade the schema if needed; (the role, whether RLS applies to it)."""
    role, bypass = conn.execute(
        "SELECT current_user, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if _version(conn) != SCHEMA_VERSION:
        # The lock is taken before the transaction starts: a transaction reads the
        # catalog as it was when it began, so one that waited inside for another
        # process's migration would not see the tables that migration created.
        conn.execute("SELECT pg_advisory_lock(%s)", [_MIGRATION_LOCK])
        try:
            with conn.transaction():
                version = _version(conn)
                if version > SCHEMA_VERSION:
                    raise StoreVersionError(
                        f"the thread store at {where} has schema {version}, from a newer "
                        f"nbchat; upgrade nbchat (this one knows schema {SCHEMA_VERSION})"
                    )
                for number in range(version + 1, SCHEMA_VERSION + 1):
                    conn.execute(MIGRATIONS[number - 1])
                    conn.execute("UPDATE nbchat_schema SET version = %s", [number])
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", [_MIGRATION_LOCK])
    owner = conn.execute(
        "SELECT pg_has_role(current_user, relowner, 'USAGE') FROM pg_class "
        "WHERE oid = 'nbchat_threads'::regclass"
    ).fetchone()[0]
    return role, not (bypass or owner)


def _version(conn: Any) -> int:
    if conn.execute("SELECT to_regclass('nbchat_schema')").fetchone()[0] is None:
        return 0
    row = conn.execute("SELECT version FROM nbchat_schema").fetchone()
    return int(row[0]) if row else 0


def writer_key(database: Database) -> int:
    """This process's writer key in *database*: an advisory lock held while the process lives."""
    key = (database.conninfo, os.getpid())
    with _lock:
        held = _writers.get(key)
        if held is not None:
            conn, lock_key = held
            try:
                conn.execute("SELECT 1")
                return lock_key
            except psycopg.Error:  # the server restarted: the lock is gone, take a new one
                with contextlib.suppress(psycopg.Error):
                    conn.close()
        lock_key = secrets.randbits(62) + 1
        try:
            conn = psycopg.connect(
                database.conninfo, autocommit=True, application_name="nbchat writer",
                connect_timeout=int(CONNECT_TIMEOUT),
            )  # fmt: skip
            conn.execute("SELECT pg_advisory_lock(%s)", [lock_key])
        except psycopg.Error as exc:
            raise unavailable(database.where, exc) from None
        _writers[key] = (conn, lock_key)
        return lock_key


LIVE_WRITERS = """
    SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 1 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def live_writers(conn: Any) -> set[int]:
    """The keys of writers whose process still holds its lock."""
    return {row[0] for row in conn.execute(LIVE_WRITERS)}


@atexit.register
def close_all() -> None:
    """Close this process's pools and writer connections (at exit, or between tests)."""
    pid = os.getpid()
    with _lock:
        for key in [k for k in _databases if k[1] == pid]:
            _databases.pop(key).pool.close()
        for key in [k for k in _writers if k[1] == pid]:
            with contextlib.suppress(Exception):
                _writers.pop(key)[0].close()


# -- text that PostgreSQL would refuse -------------------------------------------------


def _needs_escape(text: str) -> bool:
    if text.startswith(MARK) or "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def enc_text(text: str) -> str:
    """*text* as PostgreSQL accepts it (see the module docstring)."""
    return MARK + json.dumps(text) if _needs_escape(text) else text


def dec_text(text: str | None) -> str | None:
    if text is None or not text.startswith(MARK):
        return text
    return str(json.loads(text[len(MARK) :]))


def enc_json(value: Any) -> str:
    """JSON text for a ``jsonb`` column, with refused strings escaped."""
    raw = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if "\\u0000" not in raw and MARK not in raw and _utf8(raw):
        return raw
    return json.dumps(_walk(value, enc_text), ensure_ascii=False)


def dec_json(raw: str | None) -> Any:
    if raw is None:
        return None
    value = json.loads(raw)
    return _walk(value, dec_text) if MARK in raw else value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk(value: Any, convert: Any) -> Any:
    if isinstance(value, str):
        return convert(value)
    if isinstance(value, list):
        return [_walk(item, convert) for item in value]
    if isinstance(value, dict):
        return {convert(k): _walk(v, convert) for k, v in value.items()}
    return value


def close(conninfo: str) -> None:
    """Close this process's pool and writer connection for *conninfo*, if open."""
    key = (conninfo, os.getpid())
    with _lock:
        database = _databases.pop(key, None)
        writer = _writers.pop(key, None)
    if database is not None:
        database.pool.close()
    if writer is not None:
        with contextlib.suppress(Exception):
            writer[0].close()
