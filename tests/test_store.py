"""ThreadStore in one process: the API, input checks, scoping, corrupt files, the index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

import nbchat
from nbchat.base.errors import (
    AlreadyAnswered,
    InputError,
    NoPendingCall,
    StoreCorrupt,
    StoreLocked,
    StoreVersionError,
    ThreadNotFound,
)
from nbchat.base.records import AnsweredCall, PendingCall, Prompt
from nbchat.store import SearchHit, Store, Thread, ThreadInfo, ThreadStore, Turn
from nbchat.store._files import user_dirname
from store_backends import Opener

SRC = str(Path(nbchat.__file__).resolve().parents[1])


@pytest.fixture
def store(open_for: Opener) -> Store:
    """User ana's store, on each backend (``location`` picks the backend)."""
    return open_for("ana")


tinydb_only = pytest.mark.parametrize("location", ["tinydb"], indirect=True)


def folder(store: ThreadStore) -> Path:
    assert store.folder == store.path / user_dirname(store.user)
    return store.folder


def thread_file(store: ThreadStore, tid: int) -> Path:
    return folder(store) / f"thread-{tid}.json"


# -- the API ---------------------------------------------------------------------------


def test_thread_ids_start_at_1_and_are_never_reused(store: ThreadStore) -> None:
    assert [store.new_thread("m") for _ in range(3)] == [1, 2, 3]
    store.delete_thread(3)
    store.delete_thread(2)
    assert store.new_thread("m") == 4
    assert store.thread_list() == [(4, ""), (1, "")]


def test_ids_are_per_user(open_for: Opener) -> None:
    ana, bob = open_for("ana"), open_for("bob")
    assert (ana.new_thread("m"), ana.new_thread("m"), bob.new_thread("m")) == (1, 2, 1)
    assert bob.thread_list() == [(1, "")]


def test_append_response_and_details(store: ThreadStore) -> None:
    tid = store.new_thread("m1", title="Trip")
    assert store.append_response(tid, "q1", "a1") == 0
    assert store.append_response(tid, "q2", "a2", title="Trip to Oslo") == 1
    assert store.thread_details(tid) == [("q1", "a1"), ("q2", "a2")]
    assert store.thread_list() == [(tid, "Trip to Oslo")]
    turn = store.get(tid).turns[1]
    assert (turn.status, turn.model, turn.finished) == ("complete", "m1", turn.started)


def test_lists_newest_updated_first(store: ThreadStore) -> None:
    one, two, three = (store.new_thread("m", title=t) for t in ("one", "two", "three"))
    store.append_response(one, "q", "a")
    assert [tid for tid, _ in store.thread_list()] == [one, three, two]
    store.update_thread_title(two, "deux")
    assert store.thread_list() == [(two, "deux"), (one, "one"), (three, "three")]


def test_threads_gives_summaries(store: ThreadStore) -> None:
    tid = store.new_thread("llama3", title="t")
    store.append_response(tid, "q", "a")
    store.append_response(tid, "q", "a")
    [info] = store.threads()
    thread = store.get(tid)
    assert info == ThreadInfo(tid, "t", "llama3", 2, thread.created, thread.updated)
    assert thread.updated > thread.created


def test_get_returns_the_whole_thread(store: ThreadStore) -> None:
    tid = store.new_thread("m", system="be brief", title="T", settings={"cleanup": "window"})
    store.append_response(tid, "q", "a")
    thread = store.get(tid)
    assert thread == Thread(
        id=tid, user="ana", title="T", model="m", system="be brief",
        created=thread.created, updated=thread.updated,
        turns=[Turn("q", "a", status="complete", model="m", started=thread.turns[0].started,
                    finished=thread.turns[0].started)],
        settings={"cleanup": "window"},
    )  # fmt: skip


def test_update_thread(store: ThreadStore) -> None:
    tid = store.new_thread("m", system="old")
    store.update_thread(tid, model="m2", settings={"limit": 4})
    assert (store.get(tid).model, store.get(tid).system) == ("m2", "old")
    store.update_thread(tid, system=None)
    thread = store.get(tid)
    assert (thread.model, thread.system, thread.settings) == ("m2", None, {"limit": 4})
    assert store.threads()[0].model == "m2"


def test_a_generated_title_never_overwrites_one_given_meanwhile(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    other = store.new_thread("m")
    assert store.update_thread_title(tid, "Generated", if_untitled=True) is True
    assert [t.id for t in store.threads()] == [other, tid]  # no activity: the order stays
    assert store.update_thread_title(tid, "Later generated", if_untitled=True) is False
    assert store.update_thread_title(tid, "Renamed") is True
    assert store.thread_list()[0] == (tid, "Renamed")
    with pytest.raises(ThreadNotFound):
        store.update_thread_title(other + 1, "Nobody's", if_untitled=True)


def test_titles_are_checked_and_tidied(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    store.update_thread_title(tid, "  Rust\n lifetimes  ")
    assert store.thread_list() == [(tid, "Rust lifetimes")]
    for bad in ("", "   \n", "x" * 201, 5, None):
        with pytest.raises(InputError, match="title"):
            store.update_thread_title(tid, bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="200"):
        store.new_thread("m", title="x" * 201)
    with pytest.raises(InputError, match="title"):
        store.append_response(tid, "q", "a", title=" ")
    assert store.thread_details(tid) == []


def test_search_ignores_case_and_other_users(open_for: Opener) -> None:
    ana, bob = open_for("ana"), open_for("bob")
    one, two = ana.new_thread("m", title="one"), ana.new_thread("m", title="two")
    ana.append_response(one, "What is TinyDB?", "a small database")
    ana.append_response(two, "hello", "tinydb stores JSON")
    ana.append_response(two, "unrelated", "nothing")
    bob.append_response(bob.new_thread("m"), "tinydb", "tinydb")
    assert ana.search("TINYdb") == [
        SearchHit(two, "two", 0, "hello", "tinydb stores JSON"),
        SearchHit(one, "one", 0, "What is TinyDB?", "a small database"),
    ]
    with pytest.raises(InputError):
        ana.search(" ")


def test_start_turn_persists_the_query_first(store: ThreadStore, open_for: Opener) -> None:
    tid = store.new_thread("m")
    index = store.start_turn(tid, "q", model="other")
    other = open_for("ana")
    [turn] = other.get(tid).turns
    assert (index, turn.query, turn.status, turn.model, turn.answer) == (
        0,
        "q",
        "streaming",
        "other",
        "",
    )
    assert turn.started > 0


def test_update_turn_changes_only_given_fields(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    index = store.start_turn(tid, "q")
    calls = [PendingCall(tid, index, "c1", "ask", {}, Prompt("text", "Name?"))]
    turn = store.update_turn(tid, index, answer="part", status="suspended", pending=calls)
    assert (turn.answer, turn.status, turn.pending, turn.query) == ("part", "suspended", calls, "q")
    messages = [{"role": "assistant", "content": "x", "tool_calls": [calls[0].call.to_dict()]}]
    turn = store.update_turn(tid, index, messages=messages, status="complete", pending=[],
                             usage={"total_tokens": 12}, finished=5, error=None)  # fmt: skip
    assert store.get(tid).turns == [turn]
    assert (turn.messages, turn.usage, turn.finished, turn.answer) == (
        messages,
        {"total_tokens": 12},
        5.0,
        "part",
    )


def test_stored_values_round_trip_as_json(store: ThreadStore) -> None:
    tid = store.new_thread("m", settings={"k": (1, 2)})
    index = store.append_response(tid, "é 日本 😀 \ud800", "\x00 tab\t")
    store.update_turn(tid, index, messages=[{"role": "tool", "content": ("a",)}])
    thread = store.get(tid)
    assert thread.settings == {"k": [1, 2]}
    assert thread.turns[0].messages == [{"role": "tool", "content": ["a"]}]
    assert store.thread_details(tid) == [("é 日本 😀 \ud800", "\x00 tab\t")]


def suspended_turn(store: Store, calls: int) -> tuple[int, list[PendingCall]]:
    tid = store.new_thread("m")
    store.start_turn(tid, "q")
    pending = [PendingCall(tid, 0, f"c{i}", "ask", {"n": i}, Prompt("text", "Name?"))
               for i in range(calls)]  # fmt: skip
    store.update_turn(tid, 0, status="suspended", pending=pending)
    return tid, pending


def test_claiming_answers_a_call_once(store: ThreadStore) -> None:
    tid, [first, second] = suspended_turn(store, 2)
    answer = AnsweredCall("c0", "ask", "Name?", "Ana", by="ana", at=1.0)
    turn = store.claim_call(tid, 0, "c0", output="Ana", answer=answer)
    assert (turn.status, turn.pending, turn.answered) == ("suspended", [second], [answer])
    tool_message = {"role": "tool", "tool_call_id": "c0", "name": "ask", "content": "Ana"}
    assert turn.messages == [tool_message]
    with pytest.raises(AlreadyAnswered) as caught:
        store.claim_call(tid, 0, "c0", output="Bob", answer=answer)
    assert (caught.value.thread_id, caught.value.call_id) == (tid, "c0")
    assert store.get(tid).turns[0] == turn  # the second answer changed nothing
    last = AnsweredCall("c1", "ask", "Name?", True)
    turn = store.claim_call(tid, 0, "c1", output="yes", answer=last)
    assert (turn.status, turn.pending, turn.answered) == ("streaming", [], [answer, last])
    assert store.get(tid).turns[0].status == "streaming"  # this process resumes it
    assert [m["tool_call_id"] for m in turn.messages] == ["c0", "c1"]


def test_claiming_what_does_not_wait(store: ThreadStore) -> None:
    tid, _ = suspended_turn(store, 1)
    answer = AnsweredCall("nope", "ask", "Name?", "Ana")
    with pytest.raises(NoPendingCall, match="no call 'nope' waits for an answer in thread 1"):
        store.claim_call(tid, 0, "nope", output="x", answer=answer)
    store.update_turn(tid, 0, status="failed")
    with pytest.raises(NoPendingCall) as caught:
        store.claim_call(tid, 0, "c0", output="x", answer=answer)
    assert type(caught.value) is NoPendingCall
    with pytest.raises(ThreadNotFound):
        store.claim_call(tid + 1, 0, "c0", output="x", answer=answer)
    with pytest.raises(InputError, match="thread 1 has no turn 3; its turns are 0 to 0"):
        store.claim_call(tid, 3, "c0", output="x", answer=answer)


def test_location_names_the_thread(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    assert str(tid) in store.location(tid) and store.location(tid) != store.location()


def test_any_text_round_trips_everywhere(store: ThreadStore) -> None:
    awkward = ["\x00", "a\x00b", "\ud800", "\ue000", "\ue000\"x\"", "😀", "", "\\u0000"]
    tid = store.new_thread("\ue000m", system="\x00sys", title="\ue000 title")
    store.update_thread(tid, settings={text: [text] for text in awkward})
    index = store.start_turn(tid, "\ue000 query \x00")
    messages = [{"role": "user", "content": text, text: {"nested": [text, 1, None]}}
                for text in awkward]  # fmt: skip
    store.update_turn(tid, index, answer="\x00\ud800\ue000", messages=messages,
                      error="\x00", usage={"\x00": 1})  # fmt: skip
    thread = store.get(tid)
    [turn] = thread.turns
    assert (thread.model, thread.system, thread.title) == ("\ue000m", "\x00sys", "\ue000 title")
    assert thread.settings == {text: [text] for text in awkward}
    assert (turn.query, turn.answer) == ("\ue000 query \x00", "\x00\ud800\ue000")
    assert turn.error == "\x00"
    assert (turn.messages, turn.usage) == (messages, {"\x00": 1})
    assert store.thread_list() == [(tid, "\ue000 title")]


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [True, False, "1", 1.0, None, [1]])
def test_thread_ids_of_the_wrong_type(store: ThreadStore, bad: object) -> None:
    store.new_thread("m")
    with pytest.raises(InputError, match="whole number"):
        store.get(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, 2])
def test_thread_ids_that_do_not_exist(store: ThreadStore, bad: int) -> None:
    store.new_thread("m")
    calls = (
        store.get,
        store.thread_details,
        store.delete_thread,
        lambda t: store.append_response(t, "q", "a"),
        lambda t: store.start_turn(t, "q"),
        lambda t: store.update_thread_title(t, "t"),
        lambda t: store.update_turn(t, 0),
    )
    for call in calls:
        with pytest.raises(ThreadNotFound) as caught:
            call(bad)
        assert str(caught.value) == (
            f"invalid thread id {bad} for user 'ana'; see your threads with %chat --list"
        )
        assert (caught.value.thread_id, caught.value.user) == (bad, "ana")
    assert store.thread_list() == [(1, "")]


def test_another_users_thread_is_not_found_like_a_missing_one(open_for: Opener) -> None:
    bob = open_for("bob")
    secret = bob.new_thread("m", title="secret")
    bob.append_response(secret, "my secret", "ok")
    ana = open_for("ana")
    with pytest.raises(ThreadNotFound) as existing:
        ana.get(secret)
    with pytest.raises(ThreadNotFound) as missing:
        ana.get(secret + 1)
    assert str(existing.value) == str(missing.value).replace(str(secret + 1), str(secret))
    assert ana.thread_list() == [] and ana.search("secret") == []
    with pytest.raises(ThreadNotFound):
        ana.append_response(secret, "q", "a")
    assert bob.thread_details(secret) == [("my secret", "ok")]


def test_user_names_get_their_own_folder(tmp_path: Path) -> None:
    names = [
        "ana",
        "Ana",
        "ana ",
        "../x",
        "x",
        "..",
        "a/b",
        "a\\b",
        "日本",
        "élodie",
        "e\u0301lodie",
    ]
    folders = {user_dirname(name) for name in names}
    assert len(folders) == len(names)
    for name in names:
        store = ThreadStore(tmp_path / "s", name)
        store.append_response(store.new_thread("m"), name, "a")
        assert folder(store).parent == tmp_path / "s"
    assert sorted(os.listdir(tmp_path / "s")) == sorted(folders)
    for name in names:
        assert ThreadStore(tmp_path / "s", name).thread_details(1) == [(name, "a")]


@pytest.mark.parametrize("bad", ["", "  ", 3, b"ana"])
def test_user_must_be_a_name(open_for: Opener, bad: object) -> None:
    with pytest.raises(InputError, match="user"):
        open_for(bad)


def test_queries_and_answers_are_checked(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    for query in (None, 3, b"q", "", "  "):
        with pytest.raises(InputError, match="query"):
            store.append_response(tid, query, "a")  # type: ignore[arg-type]
        with pytest.raises(InputError, match="query"):
            store.start_turn(tid, query)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="answer"):
        store.append_response(tid, "q", None)  # type: ignore[arg-type]
    for model in ("", None, 4):
        with pytest.raises(InputError, match="model"):
            store.new_thread(model)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="settings"):
        store.new_thread("m", settings=["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="system"):
        store.update_thread(tid, system=3)  # type: ignore[arg-type]
    assert store.thread_details(tid) == [] and store.thread_list() == [(tid, "")]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"query": "x"}, "cannot change 'query'"),
        ({"writer": "x"}, "cannot change 'writer'"),
        ({"status": "done"}, "status must be one of"),
        ({"answer": None}, "answer must be a str"),
        ({"messages": {"role": "user"}}, "messages must be a list"),
        ({"messages": ["hi"]}, "list of dicts"),
        ({"messages": [{"x": object()}]}, "JSON"),
        ({"messages": [{"x": float("nan")}]}, "JSON"),
        ({"pending": [{"f": {1, 2}}]}, "JSON"),
        ({"pending": [{"call": {"id": "c"}}]}, "pending call records"),
        ({"usage": [1]}, "usage must be a dict"),
        ({"finished": "now"}, "finished"),
        ({"finished": True}, "finished"),
        ({"error": 3}, "error must be a str"),
    ],
)
def test_update_turn_checks_fields(store: ThreadStore, changes: dict, match: str) -> None:
    tid = store.new_thread("m")
    store.start_turn(tid, "q")
    with pytest.raises(InputError, match=match):
        store.update_turn(tid, 0, **changes)
    assert store.get(tid).turns[0] == Turn("q", model="m", started=store.get(tid).turns[0].started)


@pytest.mark.parametrize("bad", [1, 5, -1, True, "0", 0.0])
def test_update_turn_checks_the_index(store: ThreadStore, bad: object) -> None:
    tid = store.new_thread("m")
    store.append_response(tid, "q", "a")
    with pytest.raises(InputError, match="turn"):
        store.update_turn(tid, bad, answer="x")  # type: ignore[arg-type]


def test_update_turn_on_an_empty_thread(store: ThreadStore) -> None:
    with pytest.raises(InputError, match="thread 1 has no turn 0; it has no turns yet"):
        store.update_turn(store.new_thread("m"), 0, answer="x")


# -- files -------------------------------------------------------------------------------


def test_defaults_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_STORE", str(tmp_path / "env-store"))
    monkeypatch.setenv("NBCHAT_USER", "zoe")
    store = ThreadStore()
    assert (store.path, store.user) == (tmp_path / "env-store", "zoe")
    store.new_thread("m")
    assert (tmp_path / "env-store" / user_dirname("zoe") / "thread-1.json").exists()
    assert repr(store) == f"ThreadStore(path={str(tmp_path / 'env-store')!r}, user='zoe')"


@tinydb_only
def test_every_write_replaces_the_file(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    path = thread_file(store, tid)
    inodes = set()
    for i in range(5):
        store.append_response(tid, f"q{i}", "a")
        inodes.add(path.stat().st_ino)
        assert path.stat().st_mode & 0o077 == 0  # private to its user
    assert len(inodes) >= 2  # a rewrite in place would keep one inode
    assert not [p for p in folder(store).iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
@tinydb_only
def test_no_file_handle_stays_open(store: ThreadStore) -> None:
    tid = store.new_thread("m")
    store.append_response(tid, "q", "a")
    store.thread_list()
    store.get(tid)
    targets = set()
    for fd in os.listdir("/proc/self/fd"):
        with __import__("contextlib").suppress(OSError):
            targets.add(os.readlink(f"/proc/self/fd/{fd}"))
    assert not [t for t in targets if t.startswith(str(folder(store))) and t.endswith(".json")]


@tinydb_only
def test_newer_schema_is_refused(store: ThreadStore, tmp_path: Path) -> None:
    tid = store.new_thread("m")
    path = thread_file(store, tid)
    data = json.loads(path.read_text())
    data["thread"]["1"]["nbchat"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(
        StoreVersionError, match=r"written by a newer nbchat \(schema 99\); upgrade nbchat"
    ):
        store.get(tid)
    meta = folder(store) / "meta.json"
    meta.write_text(json.dumps({"store": {"1": {"nbchat": 7, "user": "ana", "next_id": 2}}}))
    with pytest.raises(
        StoreVersionError, match=r"meta.json was written by a newer nbchat \(schema 7\)"
    ):
        ThreadStore(tmp_path / "store", "ana")


CORRUPTIONS = {
    "truncated": lambda raw: raw[: len(raw) // 2],
    "empty": lambda raw: b"",
    "garbage": lambda raw: b"\x00\xff" * 50,
    "old tail": lambda raw: raw + raw[-40:],
    "foreign JSON": lambda raw: b'{"_default": {"1": {"name": "not ours"}}}',
    "a list": lambda raw: b"[1, 2, 3]",
}


@pytest.mark.parametrize("damage", CORRUPTIONS)
@tinydb_only
def test_corrupt_thread_file_is_reported_and_left_alone(store: ThreadStore, damage: str) -> None:
    one, two = store.new_thread("m", title="one"), store.new_thread("m", title="two")
    store.append_response(one, "q", "a")
    path = thread_file(store, one)
    raw = CORRUPTIONS[damage](path.read_bytes())
    path.write_bytes(raw)
    calls = (
        store.get,
        store.thread_details,
        store.delete_thread,
        lambda t: store.append_response(t, "q", "a"),
        lambda t: store.update_turn(t, 0, answer="x"),
        lambda t: store.update_thread_title(t, "new"),
    )
    for call in calls:
        with pytest.raises(StoreCorrupt) as caught:
            call(one)
        assert str(path) in str(caught.value) and "left untouched" in str(caught.value)
        assert caught.value.path == str(path)
    assert path.read_bytes() == raw
    store.append_response(two, "still", "works")
    assert store.thread_details(two) == [("still", "works")]
    assert store.thread_list() == [(two, "two"), (one, "(unreadable thread file)")]
    assert store.search("still") == [SearchHit(two, "two", 0, "still", "works")]
    assert store.new_thread("m") == 3
    assert path.read_bytes() == raw


def test_file_of_another_user_or_thread_is_corrupt(tmp_path: Path) -> None:
    ana, bob = ThreadStore(tmp_path, "ana"), ThreadStore(tmp_path, "bob")
    ana.new_thread("m")
    ana.new_thread("m")
    bob.new_thread("m", title="bob's")
    thread_file(ana, 1).write_bytes(thread_file(bob, 1).read_bytes())
    with pytest.raises(StoreCorrupt, match="does not belong to user 'ana'"):
        ana.get(1)
    thread_file(ana, 1).write_bytes(thread_file(ana, 2).read_bytes())
    with pytest.raises(StoreCorrupt, match="holds thread 2, not 1"):
        ana.get(1)


@tinydb_only
def test_corrupt_index_is_reported_and_rebuilt_once_moved(store: ThreadStore) -> None:
    tids = [store.new_thread("m", title=f"t{i}") for i in range(3)]
    index = folder(store) / "index-0.json"
    index.write_bytes(b"{not json")
    with pytest.raises(
        StoreCorrupt, match="index-0.json is not valid JSON.*left untouched; it only indexes"
    ):
        store.thread_list()
    assert store.append_response(tids[0], "q", "a") == 0  # the thread file is the truth
    assert index.read_bytes() == b"{not json"
    index.rename(index.with_suffix(".bad"))
    assert store.threads()[0] == ThreadInfo(tids[0], "t0", "m", 1, *_times(store, tids[0]))
    assert sorted(store.thread_list()) == [(1, "t0"), (2, "t1"), (3, "t2")]


@tinydb_only
def test_corrupt_meta_stops_only_new_threads(store: ThreadStore, tmp_path: Path) -> None:
    tid = store.new_thread("m")
    meta = folder(store) / "meta.json"
    meta.write_bytes(b"")
    reopened = ThreadStore(tmp_path / "store", "ana")
    with pytest.raises(StoreCorrupt, match="meta.json is empty; it was left untouched"):
        reopened.new_thread("m")
    reopened.append_response(tid, "q", "a")
    assert reopened.thread_list() == [(tid, "")]
    assert meta.read_bytes() == b""


def test_store_path_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "threads.json"
    path.write_text("my notes")
    with pytest.raises(StoreCorrupt, match="is a file, not a folder.*left untouched"):
        ThreadStore(path, "ana")
    assert path.read_text() == "my notes"


def _times(store: ThreadStore, tid: int) -> tuple[float, float]:
    thread = store.get(tid)
    return thread.created, thread.updated


@tinydb_only
def test_stale_index_is_repaired(store: ThreadStore) -> None:
    """A process killed between writing a thread file and its index entry."""
    one, two = store.new_thread("m", title="one"), store.new_thread("m", title="two")
    store.thread_list()
    index = folder(store) / "index-0.json"
    before = index.read_bytes()
    store.append_response(one, "q", "a", title="uno")
    store.append_response(one, "q", "a")
    index.write_bytes(before)
    assert store.threads() == [
        ThreadInfo(one, "uno", "m", 2, *_times(store, one)),
        ThreadInfo(two, "two", "m", 0, *_times(store, two)),
    ]
    thread_file(store, two).unlink()  # killed between deleting the file and its entry
    assert store.thread_list() == [(one, "uno")]
    assert "2" not in json.loads(index.read_text())["threads"]


@tinydb_only
def test_missing_index_is_rebuilt_and_temp_files_cleaned(store: ThreadStore) -> None:
    tids = [store.new_thread("m", title=f"t{i}") for i in range(150)]
    for path in folder(store).glob("index-*.json"):
        path.unlink()
    leftover = folder(store) / ".thread-1.json.abc123.tmp"
    leftover.write_text('{"half')
    assert sorted(store.thread_list()) == [(t, f"t{t - 1}") for t in tids]
    assert sorted(p.name for p in folder(store).glob("index-*")) == ["index-0.json", "index-1.json"]
    assert not leftover.exists()


def test_store_locked_by_another_process(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path, "ana", lock_timeout=0.2)
    store.new_thread("m")
    holder = FileLock(folder(store) / ".lock")
    with (
        holder,
        pytest.raises(StoreLocked, match=r"user 'ana'.*locked by another process for 0.2 s"),
    ):
        store.thread_list()
    assert store.thread_list() == [(1, "")]


def test_threads_of_one_process_share_a_store(tmp_path: Path) -> None:
    tid = ThreadStore(tmp_path, "ana").new_thread("m")

    shared = ThreadStore(tmp_path, "ana")

    def work(n: int) -> None:
        # Two threads share an instance, two have their own: the lock must hold either way.
        store = shared if n < 2 else ThreadStore(tmp_path, "ana")
        for i in range(20):
            store.append_response(tid, f"{n}-{i}", "a")

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    queries = [q for q, _ in ThreadStore(tmp_path, "ana").thread_details(tid)]
    assert sorted(queries) == sorted(f"{n}-{i}" for n in range(4) for i in range(20))
    for n in range(4):
        mine = [q for q in queries if q.startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(20)]


def test_store_imports_no_jupyter() -> None:
    code = (
        "import sys, nbchat.store; "
        "print([m for m in ('IPython', 'ipywidgets', 'jupyterlab') if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


@tinydb_only
def test_a_thread_known_before_it_broke_keeps_its_title(store: ThreadStore) -> None:
    tid = store.new_thread("m", title="known")
    store.append_response(tid, "q", "a")
    store.thread_list()
    thread_file(store, tid).write_bytes(b"")
    assert store.threads()[0].title == "known" and store.threads()[0].turns == 1


@tinydb_only
def test_changing_a_thread_writes_only_its_file(store: ThreadStore) -> None:
    """Why an append costs the same with 10 or 10,000 threads."""
    tids = [store.new_thread("m") for _ in range(3)]
    store.thread_list()
    others = {p.name: p.stat().st_ino for p in folder(store).glob("*.json")}
    del others["thread-2.json"]
    store.append_response(tids[1], "q", "a", title="t")
    index = store.start_turn(tids[1], "q")
    store.update_turn(tids[1], index, answer="a", status="complete")
    store.update_thread(tids[1], model="m2", system="s", settings={"a": 1})
    assert {p.name: p.stat().st_ino for p in folder(store).glob("*.json")} == {
        **others,
        "thread-2.json": thread_file(store, 2).stat().st_ino,
    }
    assert store.threads()[0] == ThreadInfo(2, "t", "m2", 2, *_times(store, 2))


@tinydb_only
def test_a_thread_changed_in_the_index_clock_tick_is_reread(store: ThreadStore) -> None:
    """Two writes in one clock tick can leave the same stamp: such entries are not trusted."""
    tid = store.new_thread("m", title="one")
    store.thread_list()
    path, index = thread_file(store, tid), folder(store) / "index-0.json"
    before = path.stat()
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))  # index written in that tick
    with open(path, "r+b") as file:  # a rewrite with the same inode, size and mtime
        file.write(path.read_bytes().replace(b'"title":"one"', b'"title":"two"'))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert store.thread_list() == [(tid, "two")]


def test_a_turn_keeps_its_options_ending_and_thinking(store: Store) -> None:
    tid = store.new_thread("m")
    index = store.start_turn(tid, "q")
    turn = store.update_turn(
        tid, index, answer="One two", status="incomplete", finish_reason="length",
        options={"max_tokens": 2, "stop": ["\n\n"]}, reasoning="First, count.",
    )  # fmt: skip
    assert store.get(tid).turns == [turn]
    assert (turn.status, turn.finish_reason, turn.options, turn.reasoning) == (
        "incomplete", "length", {"max_tokens": 2, "stop": ["\n\n"]}, "First, count.",
    )  # fmt: skip
    with pytest.raises(InputError, match="options"):
        store.update_turn(tid, index, options=["max_tokens"])


def test_the_objects_attached_to_a_question_are_kept_with_its_turn(store: Store) -> None:
    from nbchat.context import ContextImage, ContextItem

    tid = store.new_thread("m")
    items = [
        ContextItem("df", "DataFrame 2×1", "pandas DataFrame: 2 rows × 1 columns"),
        ContextItem("fig", "Figure 1 axes", "a figure", ContextImage("image/png", "iVBO", 4, 3)),
    ]
    index = store.start_turn(tid, "Why?", context=items)
    assert store.get(tid).turns[index].context == items
    plain = store.start_turn(tid, "And?")
    assert store.get(tid).turns[plain].context == []


def test_the_change_stamp_moves_with_every_write_of_any_thread(
    store: ThreadStore, open_for: Opener
) -> None:
    other = open_for("ana")  # another process's store object on the same threads
    stamps = [store.change_stamp()]
    tid = other.new_thread("m")
    stamps.append(store.change_stamp())
    other.append_response(tid, "q", "a")
    stamps.append(store.change_stamp())
    other.update_thread_title(tid, "Generated", if_untitled=True)  # no activity, still a change
    stamps.append(store.change_stamp())
    other.delete_thread(tid)
    stamps.append(store.change_stamp())
    assert all(a != b for a, b in zip(stamps, stamps[1:], strict=False))
    time.sleep(0.06)  # past the folder clock's tick: an unchanged store reads the same
    assert store.change_stamp() == store.change_stamp()
