"""Copying threads between stores (keeping ids, idempotent) and checking a store."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbchat.__main__ import main
from nbchat.base.config import store_location
from nbchat.base.errors import ConfigError
from nbchat.base.records import AnsweredCall, PendingCall, Prompt
from nbchat.store import Store, ThreadStore, open_store
from nbchat.store._pg import redact
from nbchat.store.copy import check_store, migrate_store, store_users


def fill(store: Store) -> None:
    """Threads with a gap in their ids, every kind of turn and awkward text."""
    one = store.new_thread("m1", system="be brief", title="first", settings={"limit": 3})
    store.append_response(one, "q é 日本 \x00", "a \ud800")
    gone = store.new_thread("m")
    store.delete_thread(gone)
    three = store.new_thread("m2", title="tools")
    turn = store.start_turn(three, "ask me")
    calls = [PendingCall(three, turn, f"c{i}", "ask", {"q": i}, Prompt("text", "Name?"))
             for i in (1, 2)]  # fmt: skip
    store.update_turn(three, turn, status="suspended", pending=calls, answer="part")
    answer = AnsweredCall("c1", "ask", "Name?", "Ana")
    store.claim_call(three, turn, "c1", output="Ana", answer=answer)
    store.append_response(three, "and then?", "done", title="tools, retitled")


def same_threads(a: Store, b: Store) -> None:
    assert a.threads() == b.threads()
    for info in a.threads():
        assert a.get(info.id) == b.get(info.id)


def test_migrate_there_and_back_keeps_everything(location: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    for user in ("ana", "bob"):
        fill(open_store(source, user))
    first = migrate_store(source, location)
    assert (first.copied, first.present) == ({"ana": 2, "bob": 2}, {"ana": 0, "bob": 0})
    assert store_users(location) == ["ana", "bob"]
    for user in ("ana", "bob"):
        same_threads(open_store(source, user), open_store(location, user))
    again = migrate_store(source, location)
    assert (again.copied, again.present) == ({"ana": 0, "bob": 0}, {"ana": 2, "bob": 2})
    assert str(again).splitlines() == [
        "ana: 0 threads copied, 2 already there",
        "bob: 0 threads copied, 2 already there",
    ]
    assert open_store(location, "ana").new_thread("m") == 4  # the copied ids stay taken
    back = tmp_path / "back"
    assert migrate_store(location, back, user="bob").copied == {"bob": 2}
    same_threads(open_store(source, "bob"), open_store(back, "bob"))
    assert store_users(back) == ["bob"]
    report = check_store(location)
    assert (report.ok, report.threads, report.turns) == (
        True, {"ana": 3, "bob": 2}, {"ana": 3, "bob": 3},
    )  # fmt: skip


def test_ids_deleted_in_the_source_are_not_handed_out_again(
    location: str, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    ana, bob = open_store(source, "ana"), open_store(source, "bob")
    ana.new_thread("m")
    ana.delete_thread(ana.new_thread("m"))
    bob.delete_thread(bob.new_thread("m"))  # a counter and no threads
    assert migrate_store(source, location).copied == {"ana": 1, "bob": 0}
    assert [open_store(location, user).new_thread("m") for user in ("ana", "bob")] == [3, 2]
    open_store(location, "ana").delete_thread(3)
    migrate_store(location, tmp_path / "back", user="ana")
    assert open_store(tmp_path / "back", "ana").new_thread("m") == 4


def test_a_streaming_turn_is_copied_as_interrupted(location: str, tmp_path: Path) -> None:
    store = open_store(location, "ana")
    store.start_turn(store.new_thread("m"), "q")
    assert store.get(1).turns[0].status == "streaming"  # this process writes it
    migrate_store(location, tmp_path / "copy", user="ana")
    assert ThreadStore(tmp_path / "copy", "ana").get(1).turns[0].status == "interrupted"


def test_check_reports_an_unreadable_thread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ThreadStore(tmp_path, "ana")
    fill(store)
    (store.folder / "thread-3.json").write_text("{not json")
    assert main(["store", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ana: 2 threads, 1 turns"
    assert len(out) == 2 and out[1].startswith(f"problem: {store.folder / 'thread-3.json'} ")


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(ThreadStore(tmp_path / "a", "ana"))
    assert main(["store", "migrate", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert capsys.readouterr().out == "ana: 2 threads copied, 0 already there\n"
    assert main(["store", "check", str(tmp_path / "b"), "--user", "ana"]) == 0
    assert capsys.readouterr().out == "ana: 2 threads, 3 turns\n"
    assert main(["store", "migrate", str(tmp_path / "nothing"), str(tmp_path / "c")]) == 0
    assert capsys.readouterr().out == "no threads to copy\n"


def test_the_location_picks_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "postgresql://ana:secret@db.example:5432/nbchat"
    monkeypatch.setenv("NBCHAT_STORE", str(tmp_path / "folder"))
    assert store_location() == tmp_path / "folder"
    assert isinstance(open_store(None, "ana"), ThreadStore)
    monkeypatch.setenv("NBCHAT_STORE", url)
    assert store_location() == url and store_location(tmp_path) == tmp_path
    with pytest.raises(ConfigError, match="NBCHAT_STORE is a database URL, not a folder"):
        ThreadStore(None, "ana")
    monkeypatch.setenv("NBCHAT_STORE", str(tmp_path / "folder"))
    monkeypatch.setenv("NBCHAT_STORE_URL", url)
    assert store_location() == url and store_location("postgres://h/db") == "postgres://h/db"
    store = ThreadStore(tmp_path, "ana")
    assert open_store(store) is store
    assert redact(url) == "postgresql://db.example:5432/nbchat"
