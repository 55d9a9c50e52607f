"""Coding agents hosted through ACP: nbchat's cost per turn, the first chunk in a cell, a flood.

1. What nbchat adds to an agent's turn: the same agent driven (a) by a bare
   client on the ``acp`` SDK (``acp.connect_to_agent``, a Client that only
   collects ``session/update``; timed on its own event loop, prompt sent to
   response) and (b) by :class:`nbchat.agents.acp.AcpHost` (``iter_ask``
   consumed fully in the caller's thread: the inbox, the events, the turn
   written to a TinyDB store), turns interleaved (ABBA) on one live session
   each, process start and two warm-up turns left out; the median per-turn
   difference (target: at most 20 ms). The scripted agent plays a typical
   turn (50 message chunks around a tool call); where the real adapters are
   installed (``.venv/acp-agents``), Claude's and Codex's against the
   scripted model server (``tests/acp_adapters.py``, offline).
2. First chunk in a cell: a real kernel runs ``%chat --with scripted``
   interactively (``allow_stdin``, as JupyterLab). The agent (a wrapper of
   the scripted agent in a temp dir) sleeps, sends one marked chunk and
   writes ``time.time()`` to a file once it is sent; the latency is from there to the
   IOPub message carrying the marker, as the kernel stamped it (its header's
   date) and as the client received it (target: at most 30 ms).
3. A flood: a turn whose 5,000-character answer arrives as 1,000 chunks
   against the same text in one chunk, in the same kernel: the IOPub bytes
   and display messages of each (target: the flood at most 1.5 x the one
   chunk). As fast as the agent sends them, and once more paced (100 bursts
   of 10 chunks, a sleep between: several seconds, as a model streams).

Everything runs on loopback (the agents are local processes; the real
adapters talk to the scripted server only, their vendors' hosts sent to a
dead loopback proxy) and ends by itself.

Run: ``.venv/bin/python benchmarks/acp.py [--turns 20] [--repeat 5] [--adapters claude,codex]``
(``--adapters none`` for the scripted agent only; ``--only turn|kernel``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Run as a script, this file's folder comes first on sys.path: benchmarks/mcp.py would be `mcp`.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))

TARGET_TURN_MS = 20.0
TARGET_FIRST_MS = 30.0
TARGET_FLOOD = 1.5
MARKER = "FIRSTCHUNKMARK"
WORDS = "".join(f"w{n:03d} " for n in range(1000))  # 5,000 characters: 1,000 five-char chunks
TYPICAL = [
    {"say": "Let me look at the data first. " * 8, "chunks": 30},
    {"tool": {"kind": "read", "title": "Read data.csv", "path": "data.csv"}},
    {"say": "The file has 3 columns and 100 rows; the mean of x is 4.5. " * 3, "chunks": 20},
]
SCRIPT = {"turns": [
    {"when": "typical", "steps": TYPICAL},
    {"when": "first chunk", "steps": [
        {"sleep": 0.3}, {"say": f"{MARKER} ", "stamp": True}, {"sleep": 0.3},
        {"say": "and the rest of the answer.", "chunks": 5}]},
    {"when": "flood", "steps": [{"say": WORDS, "chunks": 1000}]},
    {"when": "all at once", "steps": [{"say": WORDS}]},
    {"when": "paced bursts", "steps": [
        step for n in range(100)
        for step in ({"say": WORDS[n * 50:(n + 1) * 50], "chunks": 10}, {"sleep": 0.05})]},
    {"when": "paced once", "steps": [{"sleep": 0.05 * 100}, {"say": WORDS}]},
]}  # fmt: skip
# The scripted agent, with the moment each step marked "stamp" was sent written to a file.
WRAPPER = """\
import os, sys, time
from nbchat.testing import acp_agent

_step = acp_agent.ScriptedAgent._step

async def _stamped(self, session_id, step):
    before = time.time()
    result = await _step(self, session_id, step)
    if step.get("stamp"):
        with open(os.environ["BENCH_ACP_STAMPS"], "a") as out:
            out.write(f"{before!r} {time.time()!r}\\n")
    return result

acp_agent.ScriptedAgent._step = _stamped
acp_agent.main()
"""
ADAPTER_ANSWER = " ".join(f"Word{n} of the scripted model's answer." for n in range(12))


# -- figures -----------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


def verdict(value: float, target: float) -> str:
    return f"{value / target:5.2f} of the target ({'met' if value <= target else 'MISSED'})"


# -- 1. a turn: bare SDK client against AcpHost ------------------------------------------------
class Collector:
    """The bare client: collects every session/update, asks nothing of its own."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> Any:  # fmt: skip
        from acp.schema import DeniedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    def on_connect(self, conn: Any) -> None:
        pass

    def text(self) -> str:
        return "".join(getattr(u.content, "text", "") for u in self.updates
                       if u.session_update == "agent_message_chunk")  # fmt: skip


class BareAgent:
    """One agent process and one ACP session driven by the SDK alone, on its own loop."""

    def __init__(self, command: str, args: list[str], env: dict[str, str], cwd: str) -> None:
        self.command, self.args, self.env, self.cwd = command, args, env, cwd
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="bare-acp", daemon=True).start()
        self.client = Collector()
        self.process: Any = None
        self.conn: Any = None
        self.session = ""

    def call(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def start(self) -> None:
        import acp
        from acp.schema import ClientCapabilities, Implementation

        self.process = await asyncio.create_subprocess_exec(
            self.command, *self.args, env=self.env, cwd=self.cwd, start_new_session=True,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=64 * 1024 * 1024)  # fmt: skip
        self.conn = acp.connect_to_agent(self.client, self.process.stdin, self.process.stdout)
        await self.conn.initialize(protocol_version=acp.PROTOCOL_VERSION,
                                   client_capabilities=ClientCapabilities(),
                                   client_info=Implementation(name="bench", version="0"))
        made = await self.conn.new_session(cwd=self.cwd, mcp_servers=[])
        self.session = made.session_id

    async def turn(self, question: str) -> tuple[float, str]:
        import acp

        self.client.updates.clear()
        started = time.perf_counter()
        await self.conn.prompt(session_id=self.session, prompt=[acp.text_block(question)])
        return time.perf_counter() - started, self.client.text()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()

    def end(self) -> None:
        self.call(self.close(), timeout=10)
        if self.process is not None:
            _end_tree(self.process.pid)
            self.call(self.process.wait(), timeout=10)  # its pipes closed on the loop
        self.loop.call_soon_threadsafe(self.loop.stop)


def _end_tree(pid: int) -> None:
    from acp_adapters import end_process_tree

    end_process_tree(pid)


class StoreClock:
    """The time the host spends in its store's methods (wrapped on the instance)."""

    def __init__(self, store: Any) -> None:
        self.spent = 0.0
        for name in ("get", "start_turn", "update_turn", "update_thread_title", "update_thread"):
            setattr(store, name, self._timed(getattr(store, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - started

        return timed


def hosted_turn(host: Any, thread: int, question: str) -> tuple[float, str]:
    from nbchat.base.events import TurnFinished

    started = time.perf_counter()
    events = list(host.iter_ask(thread, question))
    elapsed = time.perf_counter() - started
    last = events[-1]
    assert isinstance(last, TurnFinished) and last.status == "complete", last
    return elapsed, last.text


def compare_turns(name: str, entry: dict[str, Any], question: str, turns: int, root: Path,
                  bare_entry: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """``turns`` interleaved turns of the bare client and of AcpHost, each on a live session
    (``bare_entry``: the bare client's own copy of the agent, when two may not share a home)."""
    from nbchat.agents.acp import AcpHost
    from nbchat.store.tinydb import ThreadStore

    configure_agents(root / "config", {name: entry})
    mine = bare_entry or entry
    bare = BareAgent(mine["command"], mine["args"], {**os.environ, **mine.get("env", {})},
                     mine.get("cwd") or str(root))  # fmt: skip
    host = AcpHost(ThreadStore(root / f"store-{name}", "bench"), cwd=entry.get("cwd") or str(root))
    clock = StoreClock(host.store)
    try:
        bare.call(bare.start())
        thread = host.new_thread(name)
        for _ in range(2):  # the process start (hosted), then warm paths on both sides
            bare.call(bare.turn(question))
            hosted_turn(host, thread, question)
        bares, hosteds, stored, texts = [], [], [], set()
        for n in range(turns):
            order = (0, 1) if n % 4 in (0, 3) else (1, 0)
            for side in order:
                if side == 0:
                    took, text = bare.call(bare.turn(question))
                    bares.append(took)
                else:
                    before = clock.spent
                    took, text = hosted_turn(host, thread, question)
                    hosteds.append(took)
                    stored.append(clock.spent - before)
                texts.add(text)
        if len(texts) != 1:
            raise AssertionError(f"{name}: the two clients saw different answers")
    finally:
        host.close()
        bare.end()
    diffs = [h - b for h, b in zip(hosteds, bares, strict=True)]
    return {"name": name, "bare": bares, "hosted": hosteds, "diffs": diffs, "store": stored,
            "chars": len(texts.pop())}  # fmt: skip


def configure_agents(folder: Path, entries: dict[str, dict[str, Any]]) -> None:
    """This process's agents.json (AcpHost finds agents by name there)."""
    os.environ["JUPYTER_CONFIG_DIR"] = str(folder)
    os.environ["NBCHAT_ACP_ADMIN_CONFIG"] = str(folder / "no-admin.json")
    (folder / "nbchat").mkdir(parents=True, exist_ok=True)
    (folder / "nbchat" / "agents.json").write_text(json.dumps({"agentServers": entries}))


def scripted_entry(script: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "nbchat.testing.acp_agent", str(script)]}


def adapter_turns(names: list[str], turns: int, root: Path) -> list[dict[str, Any]]:
    """The real adapters, each against the scripted model server (skipped when not installed)."""
    from acp_adapters import SERVED_MODELS, adapter_binary, launch
    from nbchat.testing import Reply, ScriptedServer

    results = []
    with ScriptedServer(Reply(ADAPTER_ANSWER), models=SERVED_MODELS) as server:
        for name in names:
            if adapter_binary(name) is None:
                print(f"  ({name}: adapter not installed under .venv/acp-agents, skipped)")
                continue
            # Two copies, each in a home of its own: two Claude Codes on one config folder fail.
            hosted, bare = (_entry(launch(name, server.ollama_url, root / name / side))
                            for side in ("hosted", "bare"))  # fmt: skip
            try:
                results.append(compare_turns(name, hosted, "Say hello.", turns, root / name,
                                             bare_entry=bare))  # fmt: skip
            except Exception as error:  # one adapter failing leaves the others' figures
                print(f"  ({name} failed: {error!r})")
    return results


def _entry(spec: Any) -> dict[str, Any]:
    return {"command": spec.command, "args": list(spec.args), "env": dict(spec.env),
            "cwd": str(spec.cwd)}  # fmt: skip


def report_turns(results: list[dict[str, Any]]) -> None:
    print("1. A turn on a live session: bare ACP SDK client vs AcpHost.iter_ask (medians)")
    print(f"   {'agent':10} {'turns':>5} {'chars':>5} {'bare ms':>8} {'nbchat ms':>9} "
          f"{'diff ms':>8} {'p90 diff':>8}   target <= {TARGET_TURN_MS:.0f} ms")
    for r in results:
        diffs = sorted(r["diffs"])
        p90 = diffs[int(0.9 * (len(diffs) - 1))]
        diff = statistics.median(diffs)
        print(f"   {r['name']:10} {len(diffs):5d} {r['chars']:5d} "
              f"{ms(statistics.median(r['bare'])):>8} {ms(statistics.median(r['hosted'])):>9} "
              f"{ms(diff):>8} {ms(p90):>8}   {verdict(diff * 1000, TARGET_TURN_MS)}")
    stored = ", ".join(f"{r['name']} {statistics.median(r['store']) * 1000:.1f} ms"
                       for r in results)  # fmt: skip
    print(f"   of nbchat's time, in the thread store (reads, durable writes): {stored}")


# -- 2 and 3. in a kernel ----------------------------------------------------------------------
def kernel_parts(root: Path, repeat: int, paced: bool) -> tuple[list[dict[str, float]],
                                                                 dict[str, list[dict[str, Any]]]]:
    from kernel_helpers import Kernel, kernel_env

    root.mkdir(parents=True, exist_ok=True)
    script = root / "script.json"
    script.write_text(json.dumps(SCRIPT))
    wrapper = root / "stamped_agent.py"
    wrapper.write_text(WRAPPER)
    stamps = root / "stamps"
    env = kernel_env(root / "kernel", NBCHAT_STORE=str(root / "kstore"), NBCHAT_USER="bench",
                     NBCHAT_ACP_ADMIN_CONFIG=str(root / "no-admin.json"))  # fmt: skip
    entry = {"command": sys.executable, "args": [str(wrapper), str(script)],
             "env": {"BENCH_ACP_STAMPS": str(stamps)}}  # fmt: skip
    folder = Path(env["JUPYTER_CONFIG_DIR"]) / "nbchat"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "agents.json").write_text(json.dumps({"agentServers": {"scripted": entry}}))
    firsts: list[dict[str, float]] = []
    floods: dict[str, list[dict[str, Any]]] = {}
    kinds = [("flood", "all at once")] + ([("paced bursts", "paced once")] if paced else [])
    with Kernel(env, cwd=root) as kernel:
        kernel.ok("%load_ext nbchat")
        ask(kernel, "warm up")  # the agent's start, the imports, the thread
        ask(kernel, "first chunk, warming")
        for _ in range(repeat):
            firsts.append(first_chunk(kernel, stamps))
        for _ in range(repeat):
            for streamed, once in kinds:
                for question in (streamed, once):
                    floods.setdefault(question, []).append(flood(kernel, question))
    return firsts, floods


def ask(kernel: Any, question: str,
        on_message: Callable[[dict[str, Any], Any], None] | None = None) -> Any:  # fmt: skip
    run = kernel.run(f"%chat --with scripted {question}", interactive=True, timeout=120,
                     on_message=on_message)  # fmt: skip
    assert run.status == "ok", run.text()
    return run


def first_chunk(kernel: Any, stamps: Path) -> dict[str, float]:
    before = len(stamps.read_text().splitlines()) if stamps.exists() else 0
    arrivals: list[tuple[float, dict[str, Any]]] = []
    ask(kernel, "first chunk please", lambda m, k: arrivals.append((time.time(), m)))
    sent_from, sent = map(float, stamps.read_text().splitlines()[before].split())
    received, message = next(
        (t, m) for t, m in arrivals
        if m["header"]["msg_type"] in ("display_data", "update_display_data")
        and MARKER in json.dumps(m["content"].get("data", {})))  # fmt: skip
    stamped = _timestamp(message["header"]["date"])
    return {"kernel": stamped - sent, "client": received - sent, "send": sent - sent_from}


def _timestamp(date: Any) -> float:
    if isinstance(date, str):
        from datetime import datetime

        date = datetime.fromisoformat(date.replace("Z", "+00:00"))
    return float(date.timestamp())


def flood(kernel: Any, question: str) -> dict[str, Any]:
    started = time.perf_counter()
    run = ask(kernel, question)
    took = time.perf_counter() - started
    displays = run.display_messages
    shown = json.dumps(run.outputs[-1]["data"])
    assert "w999" in shown and "w000" in shown, "the answer is incomplete"
    return {"seconds": took, "displays": len(displays),
            "bytes": sum(len(json.dumps(m["content"])) for m in run.messages),
            "html": sum(len(m["content"]["data"].get("text/html", "")) for m in displays)}


def report_kernel(firsts: list[dict[str, float]], floods: dict[str, list[dict[str, Any]]]) -> None:
    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    print("2. First chunk: the agent sent it -> the IOPub message carrying it "
          f"({len(firsts)} runs, medians)")
    kernel_ms, client_ms = med(firsts, "kernel") * 1000, med(firsts, "client") * 1000
    print(f"   kernel sent it (header date)  {kernel_ms:7.1f} ms   "
          f"{verdict(kernel_ms, TARGET_FIRST_MS)}")
    print(f"   client received it            {client_ms:7.1f} ms   "
          f"{verdict(client_ms, TARGET_FIRST_MS)}; worst "
          f"{max(r['client'] for r in firsts) * 1000:.1f} ms")
    print(f"   (the agent's own send took    {med(firsts, 'send') * 1000:7.1f} ms, not counted)")
    print("3. 1,000 chunks against the same 5,000 characters in one (medians)")
    print(f"   {'turn':28} {'seconds':>7} {'displays':>8} {'IOPub KB':>8} {'HTML KB':>8}")
    pairs = [("flood", "all at once")]
    if "paced bursts" in floods:
        pairs.append(("paced bursts", "paced once"))
    for streamed, once in pairs:
        for question in (streamed, once):
            rows = floods[question]
            print(f"   {question:28} {med(rows, 'seconds'):7.2f} {med(rows, 'displays'):8.0f} "
                  f"{med(rows, 'bytes') / 1024:8.1f} {med(rows, 'html') / 1024:8.1f}")
        ratio = med(floods[streamed], "bytes") / med(floods[once], "bytes")
        print(f"   {streamed} / {once}: IOPub bytes {ratio:.2f} x   "
              f"{verdict(ratio, TARGET_FLOOD)}")


# -- the run -----------------------------------------------------------------------------------
def main() -> None:
    options = _arguments()
    with tempfile.TemporaryDirectory(prefix="nbchat-acp-bench-") as folder, _alarm(
            options.deadline):  # fmt: skip
        root = Path(folder)
        if options.only in (None, "turn"):
            (root / "scripted").mkdir()
            script = root / "script.json"
            script.write_text(json.dumps(SCRIPT))
            results = [compare_turns("scripted", scripted_entry(script), "a typical turn",
                                     options.turns, root / "scripted")]  # fmt: skip
            names = [n for n in options.adapters.split(",") if n and n != "none"]
            results += adapter_turns(names, options.turns, root / "adapters")
            report_turns(results)
        if options.only in (None, "kernel"):
            firsts, floods = kernel_parts(root / "kernel", options.repeat, not options.no_paced)
            report_kernel(firsts, floods)


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """The run stops by itself: SIGALRM after ``seconds`` ends it (the agents with it)."""
    def stop(*_: object) -> None:
        raise TimeoutError(f"the benchmark did not finish within {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="timed turns per side and agent")
    parser.add_argument("--repeat", type=int, default=5, help="kernel runs of each measurement")
    parser.add_argument("--adapters", default="claude,codex",
                        help="real adapters to drive too (comma-separated; 'none')")
    parser.add_argument("--only", choices=("turn", "kernel"))
    parser.add_argument("--no-paced", action="store_true", help="leave out the paced flood")
    parser.add_argument("--deadline", type=float, default=1200, help="seconds before giving up")
    return parser.parse_args()


if __name__ == "__main__":
    main()
