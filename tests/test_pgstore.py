"""What only the PostgreSQL store has: row-level security, a server that restarts, its rows.

The guarantees both stores share are in test_store.py and test_store_processes.py,
run against both.
"""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from nbchat import Chat
from nbchat.base.errors import (
    ConfigError,
    NoPendingCall,
    StoreCorrupt,
    StoreUnavailable,
    StoreVersionError,
)
from nbchat.store import _pg, open_store
from nbchat.store._pg import redact
from nbchat.store.postgres import PostgresStore
from nbchat.testing import Reply, ScriptedServer
from store_backends import PgSchema, admin, pg_ctl


def roles(schema: PgSchema) -> tuple[str, str, str, str]:
    """Two users with database roles of their own: (ana, ana's URL, bob, bob's URL)."""
    PostgresStore(schema.url, "admin")  # the tables' owner creates the schema
    tag = secrets.token_hex(3)
    ana, bob = f"ana_{tag}", f"bob {tag}"
    return ana, schema.login_role(ana), bob, schema.login_role(bob)


def test_another_role_cannot_read_or_change_rows_even_with_sql(pg_schema: PgSchema) -> None:
    import psycopg

    ana, ana_url, bob, bob_url = roles(pg_schema)
    store = open_store(ana_url, ana)
    tid = store.new_thread("m", title="secret plans")
    store.append_response(tid, "my secret", "kept")
    store.add_kernel_spent("kernel-1", 2.5)
    open_store(bob_url, bob).new_thread("m")
    with psycopg.connect(bob_url, autocommit=True) as conn:
        for table in ("nbchat_threads", "nbchat_turns", "nbchat_users", "nbchat_kernel_spending"):
            owners = conn.execute(f"SELECT DISTINCT owner FROM {table}").fetchall()
            assert owners in ([(bob,)], [])
        count = "SELECT count(*) FROM nbchat_turns WHERE owner = %s"
        assert conn.execute(count, [ana]).fetchone() == (0,)
        cursor = conn.execute("UPDATE nbchat_turns SET answer = 'stolen' WHERE owner = %s", [ana])
        assert cursor.rowcount == 0
        assert conn.execute("DELETE FROM nbchat_threads WHERE owner = %s", [ana]).rowcount == 0
        lowered = "UPDATE nbchat_kernel_spending SET spent = 0 WHERE owner = %s"
        assert conn.execute(lowered, [ana]).rowcount == 0
        forged = (
            "INSERT INTO nbchat_threads (owner, id, title, model, settings, created, updated) "
            "VALUES (%s, 99, 'x', 'm', '{}', 0, 0)"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute(forged, [ana])
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f'SET ROLE "{ana}"')
        conn.execute("RESET ROLE")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="owner"):
            conn.execute("ALTER TABLE nbchat_turns DISABLE ROW LEVEL SECURITY")
    assert store.thread_details(tid) == [("my secret", "kept")]
    assert store.thread_list() == [(tid, "secret plans")]
    assert store.kernel_spent("kernel-1") == 2.5


def test_a_role_under_row_security_keeps_only_its_own_threads(pg_schema: PgSchema) -> None:
    ana, _, bob, bob_url = roles(pg_schema)
    with pytest.raises(ConfigError) as caught:
        open_store(bob_url, ana)
    assert str(caught.value) == (
        f"the database role {bob!r} may keep only its own threads, not those of user "
        f"{ana!r}; connect as role {ana!r} or set NBCHAT_USER={bob}"
    )


def test_the_owner_acting_as_a_user_with_set_role_is_bound_too(pg_schema: PgSchema) -> None:
    ana, ana_url, _, _ = roles(pg_schema)
    open_store(ana_url, ana).new_thread("m", title="ana's")
    acting = pg_schema.url.replace("options=", f"options=-crole%3D{ana}%20", 1)
    pg_schema.urls.append(acting)
    assert open_store(acting, ana).thread_list() == [(1, "ana's")]
    with pytest.raises(ConfigError):
        open_store(acting, "someone else")


def test_a_stopped_server_gives_a_clear_error_and_the_pool_recovers(pg_schema: PgSchema) -> None:
    store = PostgresStore(pg_schema.url, "ana", timeout=2)
    tid = store.new_thread("m")
    index = store.start_turn(tid, "q")
    store.update_turn(tid, index, answer="part of the ans")
    pg_ctl("stop", "-m", "fast", "-w")
    try:
        with pytest.raises(StoreUnavailable) as caught:
            store.update_turn(tid, index, answer="part of the answer")
        message = str(caught.value)
        assert message.startswith(f"lost the thread store at {store.url} (")
        assert message.endswith("what was saved before is kept; try again once the database "
                                "server is back")  # fmt: skip
    finally:
        pg_ctl("start", "-w")
    [turn] = store.get(tid).turns
    assert (turn.answer, turn.status) == ("part of the ans", "interrupted")  # the lock died too
    turn = store.update_turn(tid, index, answer="part of the answer", status="streaming")
    assert (turn.answer, turn.status) == ("part of the answer", "streaming")
    assert store.get(tid).turns[0].status == "streaming"  # a new writer lock after the restart


def test_a_restart_between_operations_goes_unnoticed(pg_schema: PgSchema) -> None:
    store = PostgresStore(pg_schema.url, "ana")
    tid = store.new_thread("m")
    store.start_turn(tid, "q")
    pg_ctl("restart", "-m", "fast", "-w")
    assert store.update_turn(tid, 0, answer="after").status == "streaming"
    assert store.append_response(tid, "q2", "a2") == 1


def test_a_damaged_row_is_reported_and_left_alone(pg_schema: PgSchema) -> None:
    store = PostgresStore(pg_schema.url, "ana")
    tid = store.new_thread("m")
    store.start_turn(tid, "q")
    with admin() as conn:
        conn.execute(f"SET search_path = {pg_schema.name}")
        conn.execute("UPDATE nbchat_turns SET pending = '[{\"call\": 3}]'")
    with pytest.raises(StoreCorrupt) as caught:
        store.get(tid)
    where = f"{store.url} thread {tid} of user 'ana'"
    assert str(caught.value).startswith(f"{where} holds a damaged record in turn 0 (")
    assert caught.value.path == where == store.location(tid)
    with admin() as conn:
        conn.execute(f"SET search_path = {pg_schema.name}")
        assert conn.execute("SELECT pending::text FROM nbchat_turns").fetchone() == (
            '[{"call": 3}]',
        )


def test_a_newer_schema_is_refused(pg_schema: PgSchema) -> None:
    PostgresStore(pg_schema.url, "ana")
    with admin() as conn:
        conn.execute(f"UPDATE {pg_schema.name}.nbchat_schema SET version = 99")
    _pg.close(pg_schema.url)
    with pytest.raises(StoreVersionError, match="schema 99, from a newer nbchat"):
        PostgresStore(pg_schema.url, "ana")


def test_no_password_in_names_or_errors(pg_schema: PgSchema) -> None:
    user, rest = pg_schema.url.split("://", 1)[1].split("@", 1)
    url = f"postgresql://{user}:s3cret-pw@{rest}"
    pg_schema.urls.append(url)
    store = open_store(url, "ana")
    store.new_thread("m")
    assert "s3cret" not in repr(store) + store.location() + store.location(1)
    down = "postgresql://postgres:s3cret-pw@127.0.0.1:1/nothing"
    with pytest.raises(StoreUnavailable) as caught:
        PostgresStore(down, "ana", timeout=1)
    assert "s3cret" not in str(caught.value)
    assert str(caught.value).startswith("cannot reach the thread store at postgresql://127.0.0.1:1/")


def test_every_query_names_the_user_for_a_shared_role(pg_schema: PgSchema) -> None:
    ana, bob = open_store(pg_schema.url, "ana"), open_store(pg_schema.url, "bob")
    secret = bob.new_thread("m", title="bob's")
    bob.append_response(secret, "secret words", "here")
    assert ana.thread_list() == [] and ana.search("secret") == []
    assert ana.new_thread("m") == 1 and secret == 1


def test_search_matches_words_and_their_starts(pg_schema: PgSchema) -> None:
    store = open_store(pg_schema.url, "ana")
    tid = store.new_thread("m", title="t")
    store.append_response(tid, "How do window functions work?", "Use OVER (PARTITION BY …)")
    store.append_response(tid, "unrelated", "nothing")
    assert [hit.turn for hit in store.search("WINDOW func")] == [0]
    assert [hit.turn for hit in store.search("partition")] == [0]
    assert [hit.turn for hit in store.search("…)")] == [0]  # no word in it: a substring
    assert store.search("functions nothing") == []


def test_a_chat_on_postgresql_asks_answers_tools_and_searches(
    pg_schema: PgSchema, scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_STORE_URL", pg_schema.url)
    chat = Chat(base_url=scripted_server.url, model="scripted-small")
    assert chat.store.location() == f"{redact(pg_schema.url)} threads of user 'tester'"
    choose = ("choose", {"question": "Which colour?", "options": ["red", "green"]})
    scripted_server.script(
        Reply(when="colour", tool_calls=[choose]), Reply("Red, then.", after_tool="choose")
    )
    thread = chat.new_thread()
    assert chat.ask(thread, "Pick a colour").status == "suspended"
    [call] = chat.pending_calls(thread)
    assert chat.answer_tool_call(thread, "1", call_id=call.call_id).text == "Red, then."
    with pytest.raises(NoPendingCall):
        chat.answer_tool_call(thread, "2", call_id=call.call_id)
    assert chat.thread_details(thread) == [("Pick a colour", "Red, then.")]
    [hit] = chat.search("colour")
    assert (hit.thread_id, hit.turn, hit.snippet("colour")) == (
        thread, 0, "Pick a **colour** — Red, then.",
    )  # fmt: skip


def test_a_server_stopped_during_a_turn_fails_it_clearly_and_keeps_the_part_saved(
    pg_schema: PgSchema, scripted_server: ScriptedServer
) -> None:
    store = PostgresStore(pg_schema.url, "ana", timeout=2)
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=store)
    thread = chat.new_thread()
    words = [f"word{i} " for i in range(8)]
    scripted_server.script(Reply(chunks=words, delay=0.8, when="long"), Reply("Back."))
    watcher = PostgresStore(pg_schema.url, "ana", timeout=2)

    def stop_once_something_is_saved() -> None:
        while not watcher.get(thread).turns or not watcher.get(thread).turns[0].answer:
            time.sleep(0.05)
        pg_ctl("stop", "-m", "fast", "-w")

    stopper = threading.Thread(target=stop_once_something_is_saved)
    stopper.start()
    try:
        with pytest.raises(StoreUnavailable, match="lost the thread store at postgresql://"):
            chat.ask(thread, "a long answer please")
    finally:
        stopper.join()
        pg_ctl("start", "-w")
    [turn] = store.get(thread).turns
    assert turn.status == "interrupted"  # its writer's lock went with the server
    assert turn.answer and "".join(words).startswith(turn.answer)
    assert chat.ask(thread, "again?").text == "Back."  # same kernel, same pool
