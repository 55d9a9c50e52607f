"""Benchmark ThreadStore against the naive layout (one TinyDB JSONStorage file).

    python benchmarks/store.py                       # 1,000 threads x 100 turns
    python benchmarks/store.py --threads 100 --turns 20

The store is built by writing thread files directly through the storage layer
(the public API would take minutes); everything is measured through the public
API. The naive layout holds the same threads, each with its turns, in one
TinyDB file with TinyDB's default JSONStorage. Each turn is ~1 KB (a 200-char
query and an 800-char answer).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from tinydb import TinyDB

from nbchat.store import SCHEMA, ThreadStore, Turn
from nbchat.store._files import AtomicJSONStorage, atomic_write, open_db

USER = "bench"
MODEL = "bench-model"
WORDS = re.findall(
    r"\w+",
    "the of thread kernel model answer notebook python store query token stream cell "
    "widget history title lock file write read json tinydb process user turn tool call",
)


def text(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def make_turns(rng: random.Random, count: int, now: float) -> list[dict]:
    return [
        {**asdict(Turn(text(rng, 200), text(rng, 800), status="complete", model=MODEL,
                       started=now, finished=now)), "writer": None}
        for _ in range(count)
    ]  # fmt: skip


def build(root: Path, naive: dict, first: int, last: int, turns: int, rng: random.Random) -> None:
    """Write threads first..last straight through the storage layer; mirror them in *naive*."""
    folder = ThreadStore(root, USER).folder
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for tid in range(first, last + 1):
        now = time.time() - 86400 + tid
        header = {
            "nbchat": SCHEMA, "id": tid, "user": USER, "title": f"thread {tid}", "model": MODEL,
            "system": None, "created": now, "updated": now, "settings": {},
        }  # fmt: skip
        docs = make_turns(rng, turns, now)
        storage = AtomicJSONStorage(folder / f"thread-{tid}.json")
        storage.write(
            {"thread": {"1": header}, "turns": {str(i + 1): d for i, d in enumerate(docs)}}
        )
        storage.flush()
        naive[str(tid)] = {**header, "turns": docs}
    with open_db(folder / "meta.json") as db:
        db.table("store").truncate()
        db.table("store").insert({"nbchat": SCHEMA, "user": USER, "next_id": last + 1})


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Naive:
    """The same operations on one TinyDB file with the default JSONStorage."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, tid: int, query: str, answer: str) -> None:
        turn = {**asdict(Turn(query, answer, status="complete")), "writer": None}
        with TinyDB(self.path) as db:
            db.table("threads").update(lambda doc: doc["turns"].append(turn), doc_ids=[tid])

    def thread_list(self) -> list[tuple[int, str]]:
        with TinyDB(self.path) as db:
            docs = db.table("threads").all()
        return [(d.doc_id, d["title"]) for d in sorted(docs, key=lambda d: -d["updated"])]

    def thread_details(self, tid: int) -> list[tuple[str, str]]:
        with TinyDB(self.path) as db:
            doc = db.table("threads").get(doc_id=tid)
        return [(t["query"], t["answer"]) for t in doc["turns"]]


def appends(store: ThreadStore, count: int, threads: int, rng: random.Random) -> list[float]:
    query, answer = text(rng, 200), text(rng, 800)
    for _ in range(10):  # warm up: imports, page cache, first lock file open
        store.append_response(rng.randint(1, threads), query, answer)
    return [
        timed(lambda: store.append_response(rng.randint(1, threads), query, answer), 1)[0]
        for _ in range(count)
    ]


def cold_open_process(root: Path) -> tuple[float, float]:
    """(ms for ThreadStore() + first thread_list inside a new process, ms for the whole process)."""
    code = (
        "import time; from nbchat.store import ThreadStore; t1 = time.perf_counter(); "
        f"ThreadStore({str(root)!r}, {USER!r}).thread_list(); "
        "print((time.perf_counter() - t1) * 1000)"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout), (time.perf_counter() - start) * 1000


def fsync_cost(folder: Path, size: int) -> tuple[float, float]:
    """(ms of an atomic write with fsyncs, ms of the same temp-file + replace without them)."""
    data = b"x" * size
    path = folder / "fsync-probe.json"
    durable = timed(lambda: atomic_write(path, data), 30)

    def no_sync() -> None:
        temp = folder / ".probe.tmp"
        temp.write_bytes(data)
        os.replace(temp, path)

    fast = timed(no_sync, 30)
    path.unlink()
    return statistics.median(durable), statistics.median(fast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--appends", type=int, default=300, help="appends timed at full size")
    parser.add_argument("--naive-repeat", type=int, default=3, help="runs of each naive operation")
    parser.add_argument("--dir", help="where to build (default: a temp folder, removed after)")
    args = parser.parse_args()
    rng = random.Random(7)
    root = Path(args.dir or tempfile.mkdtemp(prefix="nbchat-bench-"))
    try:
        run(root, args, rng)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def build_both(root: Path, threads: int, turns: int, rng: random.Random) -> tuple[Path, Naive]:
    """A ThreadStore folder and a naive file holding the same *threads*."""
    start = time.perf_counter()
    store_dir, naive_docs = root / f"store-{threads}", {}
    build(store_dir, naive_docs, 1, threads, turns, rng)
    naive = Naive(root / f"naive-{threads}.json")
    naive.path.write_text(json.dumps({"threads": naive_docs}))
    ThreadStore(store_dir, USER).thread_list()  # writes the index files
    took = time.perf_counter() - start
    print(f"built {threads} threads x {turns} turns twice in {took:.1f} s", file=sys.stderr)
    return store_dir, naive


def growth_of_appends(
    built: dict[int, tuple[Path, Naive]], rng: random.Random, repeat: int
) -> list[tuple[int, float, float]]:
    """Append p50 per store size, the sizes taking turns so that noise hits all alike."""
    stores = {n: ThreadStore(path, USER) for n, (path, _) in built.items()}
    samples: dict[int, list[float]] = {n: [] for n in stores}
    query, answer = text(rng, 200), text(rng, 800)
    for round_ in range(110):
        for n, store in stores.items():
            start = time.perf_counter()
            store.append_response(rng.randint(1, n), query, answer)
            if round_ >= 10:  # the first rounds warm up
                samples[n].append((time.perf_counter() - start) * 1000)
    rows = []
    for n, (_, naive) in built.items():
        naive_ms = timed(lambda naive=naive, n=n: naive.append(rng.randint(1, n), "q", "a"), repeat)
        rows.append((n, statistics.median(samples[n]), statistics.median(naive_ms)))
    return rows


def run(root: Path, args: argparse.Namespace, rng: random.Random) -> None:
    sizes = sorted({n for n in (10, 100, 1000) if n < args.threads} | {args.threads})
    built = {n: build_both(root, n, args.turns, rng) for n in sizes}
    growth = growth_of_appends(built, rng, args.naive_repeat)
    store_dir, naive = built[args.threads]
    store = ThreadStore(store_dir, USER)
    n = args.threads
    tid = rng.randint(1, n)
    nan = float("nan")
    results: dict[str, tuple[float, float, str]] = {}
    samples = appends(store, args.appends, n, rng)
    naive_appends = timed(lambda: naive.append(rng.randint(1, n), "q", "a"), args.naive_repeat)
    results["append p50"] = (pct(samples, 0.5), pct(naive_appends, 0.5), "<= 5 ms")
    results["append p99"] = (pct(samples, 0.99), pct(naive_appends, 0.99), "<= 25 ms")
    touched = f"thread_list after {args.appends} appends"
    results[touched] = (timed(store.thread_list, 1)[0], nan, "(re-reads the changed threads)")
    naive_list = statistics.median(timed(naive.thread_list, args.naive_repeat))
    results["thread_list"] = (
        statistics.median(timed(store.thread_list, 30)),
        naive_list,
        "<= 20 ms",
    )

    def list_after_append() -> float:
        store.append_response(rng.randint(1, n), "q", "a")  # e.g. another kernel's turn
        return timed(store.thread_list, 1)[0]

    after_one = statistics.median([list_after_append() for _ in range(30)])
    results["thread_list after one append"] = (after_one, nan, "<= 20 ms")
    results["thread_details"] = (
        statistics.median(timed(lambda: store.thread_details(tid), 30)),
        statistics.median(timed(lambda: naive.thread_details(tid), args.naive_repeat)),
        "",
    )
    cold = statistics.median(timed(lambda: ThreadStore(store_dir, USER).thread_list(), 10))
    results["cold open (new ThreadStore)"] = (cold, naive_list, "<= 100 ms")
    inner, whole = cold_open_process(store_dir)
    results["cold open (new process)"] = (inner, nan, "<= 100 ms")
    report(n, args.turns, results, growth, whole, store, tid)


def report(
    n: int,
    turns: int,
    results: dict[str, tuple[float, float, str]],
    growth: list[tuple[int, float, float]],
    whole: float,
    store: ThreadStore,
    tid: int,
) -> None:
    size = sum(f.stat().st_size for f in store.folder.glob("*.json")) / 1e6
    print(f"\nThreadStore vs naive TinyDB file: {n} threads x {turns} turns, {size:.0f} MB, "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"{'operation':34} {'nbchat ms':>10} {'naive ms':>10} {'naive/nbchat':>13}  target")
    for name, (ours, theirs, target) in results.items():
        ratio = "" if theirs != theirs else f"{theirs / ours:,.0f}x"
        naive_ms = "" if theirs != theirs else f"{theirs:,.1f}"
        print(f"{name:34} {ours:10.2f} {naive_ms:>10} {ratio:>13}  {target}")
    print(f"{'  (whole process incl. imports)':34} {whole:10.1f}")
    print("\nappend p50 as the number of threads grows")
    print(f"{'threads':>8} {'nbchat ms':>10} {'naive ms':>10}")
    for count, ours, theirs in growth:
        print(f"{count:8} {ours:10.2f} {theirs:10.1f}")
    thread_file = store.folder / f"thread-{tid}.json"
    durable, fast = fsync_cost(thread_file.parent, thread_file.stat().st_size)
    print(f"\natomic write of one thread file ({thread_file.stat().st_size / 1e3:.0f} KB): "
          f"{durable:.2f} ms with fsync of file and folder, {fast:.2f} ms without")  # fmt: skip
    start = time.perf_counter()
    hits = store.search("zebra-not-there")
    print(f"search (reads every thread): {(time.perf_counter() - start) * 1000:.0f} ms, "
          f"{len(hits)} hits")  # fmt: skip


if __name__ == "__main__":
    main()
