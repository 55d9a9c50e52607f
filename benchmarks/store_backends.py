"""The two thread stores side by side: TinyDB folder and PostgreSQL, through the Store API.

    python benchmarks/store_backends.py --postgres postgresql://user@127.0.0.1:5432/db
    python benchmarks/store_backends.py --postgres URL --threads 100 --turns 20

Both stores get the same threads, written straight into their storage (the
public API would take minutes); everything timed goes through the public
API. The PostgreSQL store lives in a fresh schema of the given database,
dropped afterwards. Each turn is ~1 KB (a 200-char query, an 800-char answer).
Concurrency: 16 processes append 100 turns each to random threads of the same
user, started together; the rate counts from the start to the last process's
last append. Give it a server with its usual durability (fsync on), as
production runs: the test suite's throwaway cluster turns fsync off.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from store import MODEL, USER, build, pct, text, timed

from nbchat.base.records import AnsweredCall, PendingCall, Prompt
from nbchat.store import Store, open_store

WRITERS = 16
WRITER_APPENDS = 100

WRITER = r"""
import os, random, sys, time
from nbchat.store import open_store
location, go, threads, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = open_store(location, "bench")
store.thread_list()  # connect (or find the folder) before the start
rng = random.Random(os.getpid())
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
for i in range(count):
    store.append_response(rng.randint(1, threads), f"writer {os.getpid()} turn {i}", "answer")
print(time.time(), flush=True)  # the work is done; interpreter exit is not timed
"""


def build_postgres(url: str, threads: int, turns: int, rng: random.Random) -> None:
    """Threads 1..threads for USER, copied straight into the tables."""
    import psycopg

    open_store(url, USER)  # creates the schema
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor().copy(
            "COPY nbchat_threads (owner, id, title, model, settings, created, updated, turns) "
            "FROM STDIN"
        ) as copy:
            for tid in range(1, threads + 1):
                now = time.time() - 86400 + tid
                copy.write_row((USER, tid, f"thread {tid}", MODEL, "{}", now, now, turns))
        with conn.cursor().copy(
            "COPY nbchat_turns (owner, thread_id, idx, query, answer, messages, status, "
            "pending, answered, model, started, finished) FROM STDIN"
        ) as copy:
            for tid in range(1, threads + 1):
                now = time.time() - 86400 + tid
                for idx in range(turns):
                    copy.write_row((USER, tid, idx, text(rng, 200), text(rng, 800), "[]",
                                    "complete", "[]", "[]", MODEL, now, now))  # fmt: skip
        conn.execute(
            "INSERT INTO nbchat_users (owner, next_id) VALUES (%s, %s)", [USER, threads + 1]
        )
        conn.execute("ANALYZE")


def build_tinydb(root: Path, threads: int, turns: int, rng: random.Random) -> None:
    build(root, {}, 1, threads, turns, rng)
    open_store(root, USER).thread_list()  # writes the index files


def appends(store: Store, count: int, threads: int, rng: random.Random) -> list[float]:
    query, answer = text(rng, 200), text(rng, 800)
    for _ in range(10):
        store.append_response(rng.randint(1, threads), query, answer)
    return [
        timed(lambda: store.append_response(rng.randint(1, threads), query, answer), 1)[0]
        for _ in range(count)
    ]


def claims(store: Store, threads: int, count: int, rng: random.Random) -> list[float]:
    """ms of answering a pending call, each in a turn of its own."""
    prompt = Prompt("text", "Your name?")
    setups = []
    for i in range(count):
        tid = rng.randint(1, threads)
        index = store.start_turn(tid, "who are you?")
        call = PendingCall(tid, index, f"call-{i}", "ask", {}, prompt)
        store.update_turn(tid, index, status="suspended", pending=[call])
        setups.append((tid, index, call))
    return [
        timed(
            lambda t=tid, x=index, c=call: store.claim_call(
                t, x, c.call_id, output="Ana", answer=AnsweredCall(c.call_id, "ask", "q", "Ana")
            ),
            1,
        )[0]
        for tid, index, call in setups
    ]


def cold_open(location: str) -> float:
    """ms for open_store + the first thread_list inside a new process."""
    code = (
        "import sys, time; from nbchat.store import open_store; t = time.perf_counter(); "
        f"open_store(sys.argv[1], {USER!r}).thread_list(); "
        "print((time.perf_counter() - t) * 1000)"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code, location], capture_output=True,
                             text=True, check=True).stdout)
        for _ in range(3)
    ]  # fmt: skip
    return statistics.median(runs)


def concurrent_appends(location: str, threads: int, root: Path) -> float:
    """Appends per second with WRITERS processes appending at once."""
    go = root / f"go-{time.monotonic_ns()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, location, str(go), str(threads), str(WRITER_APPENDS)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for _ in range(WRITERS)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    start = time.time()
    go.touch()
    ends = [float(proc.communicate(timeout=600)[0]) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    return WRITERS * WRITER_APPENDS / (max(ends) - start)


def measure(location: str, threads: int, rng: random.Random, root: Path, n_appends: int) -> dict:
    store = open_store(location, USER)
    tid = rng.randint(1, threads)
    samples = appends(store, n_appends, threads, rng)
    search_ms = timed(lambda: store.search("zebra"), 3)
    return {
        "append p50": pct(samples, 0.5),
        "append p99": pct(samples, 0.99),
        "thread_list": statistics.median(timed(store.thread_list, 30)),
        "thread_details": statistics.median(timed(lambda: store.thread_details(tid), 30)),
        "answer claim p50": statistics.median(claims(store, threads, 50, rng)),
        "cold open (new process)": cold_open(location),
        "search (no hit)": statistics.median(search_ms),
        "appends/s, 16 writers": concurrent_appends(location, threads, root),
    }


def growth(location_for: Callable[[int], str], sizes: list[int], rng: random.Random) -> list:
    rows = []
    for n in sizes:
        store = open_store(location_for(n), USER)
        rows.append((n, pct(appends(store, 100, n, rng), 0.5),
                     statistics.median(timed(store.thread_list, 20))))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="a postgresql:// URL (creates a schema)")
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()
    import psycopg

    root = Path(tempfile.mkdtemp(prefix="nbchat-bench-"))
    schemas: list[str] = []

    def pg_location(n: int) -> str:
        schema = f"nbchat_bench_{os.getpid()}_{n}"
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        schemas.append(schema)
        sep = "&" if "?" in args.postgres else "?"
        return f"{args.postgres}{sep}options=-csearch_path%3D{schema}"

    try:
        run(args, root, pg_location)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


def run(args: argparse.Namespace, root: Path, pg_location: Callable[[int], str]) -> None:
    rng = random.Random(7)
    n, turns = args.threads, args.turns
    sizes = sorted({s for s in (10, 100, 1000) if s < n} | {n})
    pg = {s: pg_location(s) for s in sizes}
    tiny = {s: str(root / f"store-{s}") for s in sizes}
    for s in sizes:
        start = time.perf_counter()
        build_postgres(pg[s], s, turns, rng)
        build_tinydb(Path(tiny[s]), s, turns, rng)
        print(f"built {s} threads x {turns} turns in both in {time.perf_counter() - start:.0f} s",
              file=sys.stderr)  # fmt: skip
    results = {
        "tinydb": measure(tiny[n], n, rng, root, args.appends),
        "postgresql": measure(pg[n], n, rng, root, args.appends),
    }
    pg_growth = growth(lambda s: pg[s], sizes, rng)
    tiny_growth = growth(lambda s: tiny[s], sizes, rng)
    report(n, turns, results, pg_growth, tiny_growth)


TARGETS = {
    "append p50": "<= 3 ms",
    "thread_list": "<= 10 ms",
    "appends/s, 16 writers": ">= 4x TinyDB",
}


def report(n: int, turns: int, results: dict[str, dict[str, float]], pg: list, tiny: list) -> None:
    print(f"\nThread stores, {n} threads x {turns} turns, {os.cpu_count()} cores, "
          f"PostgreSQL on loopback")  # fmt: skip
    head = f"{'operation (ms unless said)':30} {'TinyDB':>10} {'PostgreSQL':>11}"
    print(f"{head}  target (PostgreSQL)")
    for name in results["tinydb"]:
        a, b = results["tinydb"][name], results["postgresql"][name]
        print(f"{name:30} {a:10.2f} {b:11.2f}  {TARGETS.get(name, '')}")
    speed = "appends/s, 16 writers"
    ratio = results["postgresql"][speed] / results["tinydb"][speed]
    print(f"{'16 writers, PostgreSQL/TinyDB':30} {ratio:22.1f}x")
    print("\nas the number of threads grows (ms)")
    print(f"{'threads':>8} {'TinyDB append':>14} {'TinyDB list':>12} {'PG append':>10} "
          f"{'PG list':>8}")  # fmt: skip
    for (count, ta, tl), (_, pa, pl) in zip(tiny, pg, strict=True):
        print(f"{count:8} {ta:14.2f} {tl:12.2f} {pa:10.2f} {pl:8.2f}")
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
