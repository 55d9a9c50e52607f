"""Both stores across real processes: SIGKILL mid-write, concurrent writers, dead streamers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

import nbchat
from nbchat.base.config import is_store_url
from nbchat.base.records import PendingCall, Prompt
from nbchat.store import ThreadStore, open_store

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

SRC = str(Path(nbchat.__file__).resolve().parents[1])

# Appends to thread 1 (and now and then starts a thread) until killed; a line is
# printed only after the call returned, so every printed change must survive. Cutting
# the answer short makes the file shrink, which is when a write in place leaves the
# old tail behind.
APPENDER = r"""
import random, sys
from nbchat.store import open_store
store, run = open_store(sys.argv[1], "ana"), sys.argv[2]
rng = random.Random(run)
for i in range(10**9):
    if i % 7 == 1:
        print("new", store.new_thread("m", title=f"{run}-{i}"), flush=True)
        continue
    query = f"{run}-{i}"
    index = store.append_response(1, query, "x" * rng.randint(1000, 5000))
    print("turn", index, query, flush=True)
    store.update_turn(1, index, answer="cut")
    print("cut", index, flush=True)
"""

# Waits for the go file, then appends its 100 turns to thread 1 as fast as it can.
WORKER = r"""
import os, sys, time
from nbchat.store import open_store
path, worker, go, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_store(path, "ana")
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
for i in range(count):
    store.append_response(1, f"{worker}:{i}", "answer")
"""

CREATOR = r"""
import os, sys, time
from nbchat.store import open_store
store, go = open_store(sys.argv[1], "ana"), sys.argv[2]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
print(" ".join(str(store.new_thread("m")) for _ in range(40)), flush=True)
"""

# Appends its turns to threads 1 to 4 of the same user, printing where each landed.
SPREADER = r"""
import os, sys, time
from nbchat.store import open_store
path, worker, go, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_store(path, "ana")
store.thread_list()
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.002)
for i in range(count):
    tid = 1 + (int(worker) + i) % 4
    print(tid, store.append_response(tid, f"{worker}:{i}", "answer"), flush=True)
"""

# Answers call c<round> of turn <round> of thread 1 when the go file appears.
ANSWERER = r"""
import os, sys, time
from nbchat.base.errors import AlreadyAnswered
from nbchat.base.records import AnsweredCall
from nbchat.store import open_store
path, name, go, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
store = open_store(path, "ana")
store.thread_list()
print("ready", flush=True)
for turn in range(rounds):
    while not os.path.exists(f"{go}-{turn}"):
        time.sleep(0.001)
    answer = AnsweredCall(f"c{turn}", "ask", "Name?", name, by=name)
    try:
        store.claim_call(1, turn, f"c{turn}", output=name, answer=answer)
        print("won", turn, flush=True)
    except AlreadyAnswered:
        print("lost", turn, flush=True)
"""

# Starts a turn, says so, and waits to be killed.
STREAMER = r"""
import sys, time
from nbchat.store import open_store
store = open_store(sys.argv[1], "ana")
print(store.start_turn(1, "still streaming?"), flush=True)
store.update_turn(1, 0, answer="part of the ans")
print("updated", flush=True)
time.sleep(60)
"""


def spawn(code: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def wait_all(procs: Sequence[subprocess.Popen[str]]) -> list[str]:
    outputs = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        outputs.append(out)
    return outputs


def test_sigkill_at_random_moments_loses_no_returned_write(location: str) -> None:
    rng = random.Random(2024)
    open_store(location, "ana").new_thread("m")
    turns: dict[int, str] = {}
    cut: set[int] = set()
    new_ids: list[int] = []
    for run in range(30):
        proc = spawn(APPENDER, location, run)
        lines = [proc.stdout.readline()]  # type: ignore[union-attr]
        time.sleep(rng.uniform(0, 0.04))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        assert proc.returncode == -signal.SIGKILL
        for line in "".join(lines + [out]).splitlines(keepends=True):
            if not line.endswith("\n"):
                continue  # killed mid-print: the claim is incomplete, not the store
            kind, *rest = line.split()
            if kind == "turn":
                turns[int(rest[0])] = rest[1]
            elif kind == "cut":
                cut.add(int(rest[0]))
            else:
                new_ids.append(int(rest[0]))
        check_store(location, turns, cut, new_ids)
    assert len(turns) > 30 and new_ids
    if not is_store_url(location):
        leftovers = list(ThreadStore(location, "ana").folder.glob(".*.tmp"))
        assert leftovers == []  # listing cleaned up after the killed writers


def check_store(location: str, turns: dict[int, str], cut: set[int], new_ids: list[int]) -> None:
    store = open_store(location, "ana")
    details = store.thread_details(1)
    assert {index: details[index][0] for index in turns} == turns
    assert {index for index in turns if details[index][1] == "cut"} >= cut
    queries = [query for query, _ in details]
    assert len(queries) == len(set(queries))
    assert len(new_ids) == len(set(new_ids))
    listed = {info.id: info.turns for info in store.threads()}
    assert set(new_ids) <= set(listed)
    assert listed[1] == len(details)  # the index caught up with the thread file


def test_eight_processes_append_to_one_thread(location: str, tmp_path: Path) -> None:
    open_store(location, "ana").new_thread("m")
    go = tmp_path / "go"
    procs = [spawn(WORKER, location, worker, go, 100) for worker in range(8)]
    for proc in procs:
        assert proc.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    go.touch()
    wait_all(procs)
    queries = [query for query, _ in open_store(location, "ana").thread_details(1)]
    assert len(queries) == 800
    for worker in range(8):
        assert [q for q in queries if q.startswith(f"{worker}:")] == [
            f"{worker}:{i}" for i in range(100)
        ]


def test_sixteen_processes_append_to_one_users_threads(location: str, tmp_path: Path) -> None:
    store = open_store(location, "ana")
    assert [store.new_thread("m") for _ in range(4)] == [1, 2, 3, 4]
    go = tmp_path / "go"
    procs = [spawn(SPREADER, location, worker, go, 100) for worker in range(16)]
    for proc in procs:
        assert proc.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    go.touch()
    landed = [tuple(map(int, line.split())) for out in wait_all(procs) for line in out.split("\n")
              if line]  # fmt: skip
    assert len(landed) == len(set(landed)) == 1600  # no two appends got the same turn
    for tid in range(1, 5):
        queries = [query for query, _ in store.thread_details(tid)]
        assert len(queries) == 400 and sorted(i for t, i in landed if t == tid) == list(range(400))
        for worker in range(16):
            mine = [q for q in queries if q.startswith(f"{worker}:")]
            assert mine == [f"{worker}:{i}" for i in range(100) if 1 + (worker + i) % 4 == tid]
    assert {info.id: info.turns for info in store.threads()} == {1: 400, 2: 400, 3: 400, 4: 400}


def test_exactly_one_of_two_processes_answers_a_call(location: str, tmp_path: Path) -> None:
    store = open_store(location, "ana")
    tid = store.new_thread("m")
    rounds = 12
    for turn in range(rounds):
        store.start_turn(tid, f"question {turn}")
        call = PendingCall(tid, turn, f"c{turn}", "ask", {}, Prompt("text", "Name?"))
        store.update_turn(tid, turn, status="suspended", pending=[call])
    go = tmp_path / "go"
    procs = [spawn(ANSWERER, location, name, go, rounds) for name in ("ana", "bob")]
    for proc in procs:
        assert proc.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    for turn in range(rounds):
        Path(f"{go}-{turn}").touch()
    outputs = wait_all(procs)
    outcomes = [
        sorted(line.split()[0] for out in outputs for line in out.splitlines()
               if line.split()[1] == str(turn))
        for turn in range(rounds)
    ]  # fmt: skip
    assert outcomes == [["lost", "won"]] * rounds
    for turn in store.get(tid).turns:
        [answered] = turn.answered
        [tool_message] = turn.messages
        assert tool_message == {"role": "tool", "tool_call_id": answered.call_id, "name": "ask",
                                "content": answered.answer}  # fmt: skip
        assert (turn.pending, turn.status) == ([], "interrupted")  # its claimer has exited


def test_two_processes_create_threads_without_sharing_an_id(
    location: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    procs = [spawn(CREATOR, location, go) for _ in range(2)]
    for proc in procs:
        assert proc.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    go.touch()
    ids = [int(tid) for out in wait_all(procs) for tid in out.split()]
    assert sorted(ids) == list(range(1, 81))
    assert sorted(tid for tid, _ in open_store(location, "ana").thread_list()) == list(
        range(1, 81)
    )


def test_turn_of_a_killed_streamer_reads_as_interrupted(location: str) -> None:
    store = open_store(location, "ana")
    store.new_thread("m")
    proc = spawn(STREAMER, location)
    try:
        assert proc.stdout.readline() == "0\n"  # type: ignore[union-attr]
        assert proc.stdout.readline() == "updated\n"  # type: ignore[union-attr]
        [turn] = store.get(1).turns
        assert (turn.status, turn.answer) == ("streaming", "part of the ans")
    finally:
        proc.kill()
        proc.communicate()
    [turn] = store.get(1).turns
    assert (turn.status, turn.answer) == ("interrupted", "part of the ans")
    assert store.update_turn(1, 0, status="streaming").status == "streaming"  # this process now
    assert store.get(1).turns[0].status == "streaming"
    assert store.update_turn(1, 0, status="complete", answer="done").status == "complete"
    if isinstance(store, ThreadStore):
        writers = store.folder / "writers"
        assert len(list(writers.glob("*.lock"))) == 1  # the dead streamer's lock file is gone


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_store_survives_fork_without_touching_the_parents_locks(tmp_path: Path) -> None:
    store = ThreadStore(tmp_path, "ana")
    tid = store.new_thread("m")
    store.start_turn(tid, "parent streams")
    pid = os.fork()
    if pid == 0:  # the child: same ThreadStore object, its own locks
        code = 1
        try:
            store.append_response(tid, "from the child", "a")
            store.start_turn(tid, "child streams")  # its own writer lock, not the parent's
            code = 0 if store.get(tid).turns[0].status == "streaming" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.thread_details(tid) == [
        ("parent streams", ""),
        ("from the child", "a"),
        ("child streams", ""),
    ]
    statuses = [turn.status for turn in store.get(tid).turns]
    assert statuses == ["streaming", "complete", "interrupted"]  # the parent's lock still held
