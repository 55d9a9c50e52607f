"""Outside agents through nbchat's MCP endpoint: read overhead, click to result, 8 agents, soak.

A real, isolated ``jupyter-lab`` with nbchat (``tests/agent_helpers.py``), one
notebook with a kernel holding a pandas DataFrame of 100,000 rows, agents
using the official MCP SDK's client over Streamable HTTP, and the person's
side played through a ``jupyter_client`` client on the same kernel.

1. Read overhead: ``list_variables`` and ``describe_variable('df')`` through
   the endpoint (one persistent MCP session, set up before timing) against
   the same calls of ``nbchat.jupyter.kernel_api`` run in the kernel
   directly (a silent ``user_expressions`` request, execute to reply, as the
   endpoint sends it); interleaved, p50/p90 of each and the p50 overhead
   (target: at most 20 ms). ``list_notebooks``, which never reaches the
   kernel, is timed alongside: the endpoint's own cost per call.
2. Click to result: an agent already blocked in ``call_status(handle,
   wait_seconds=20)`` on a one-line ``run_code`` (``x = 1``); from sending
   the person's ``%chat --answer HANDLE run`` to the kernel until
   ``call_status`` returns ``done`` (target: at most 250 ms p50), with where
   the time goes: the kernel starting the request, the claim written in the
   store, the result written, the agent learning of it.
3. Eight agents at once: eight processes, each with its own token and MCP
   session, for ``--seconds``: reads (list_variables, read_cells,
   describe_variable) and every ~2 s a ``run_code`` appending a unique marker
   to ``seen`` in the kernel, its ``call_status`` awaited alongside; the main
   process answers every waiting call ``run`` as it appears. Afterwards every
   call an agent got a handle for must be ``done`` and ``seen`` must hold each
   marker exactly once; exits 1 if a call was lost or code ran twice.
4. Soak: for ``--soak-minutes``, the main process starts and stops kernels
   through the REST API (a session for one of ``soak-0..2.ipynb`` every
   ``SOAK_STEP`` s, the oldest deleted once two run), while four agent
   processes, each with its own token and MCP session, poll: ``list_notebooks``,
   ``call_status`` (``wait_seconds`` 0, timed, then a few seconds) on a
   ``run_code`` to the steady notebook that nobody answers, ``read_cells``, and
   ``list_variables`` on a kernel that comes and goes (the endpoint opens a
   client on it and must drop it when it goes). The server process's open fds,
   sockets and RSS after a warm-up, every minute and at the end; exits 1 on an
   unexpected error (not "no running kernel", or "interrupted" by its stopping,
   on a stopped notebook) or if
   sockets grew by more than ``SOCKET_LEAK``.

Run: ``python benchmarks/agents.py`` (``--seconds 10 --soak-minutes 1`` while developing;
``--only soak`` and the like for one part).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import queue
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Run as a script, this file's folder comes first on sys.path: benchmarks/mcp.py would be `mcp`.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
TESTS = HERE.parent / "tests"
NOTEBOOK = "bench.ipynb"
ROWS = 100_000
SETUP = f"""
%load_ext nbchat
import numpy as np
import pandas as pd
rng = np.random.default_rng(0)
df = pd.DataFrame({{
    "id": np.arange({ROWS}),
    "value": rng.normal(size={ROWS}),
    "group": pd.Categorical(rng.choice(["a", "b", "c", "d"], size={ROWS})),
    "label": [f"row {{i}}" for i in range({ROWS})],
}})
seen = []
x = 0
print(len(df))
"""
CELLS = [
    "import numpy as np\nimport pandas as pd",
    "df = pd.read_csv('data.csv')  # 100,000 rows",
    "df.describe()",
    "seen = []",
    "# Notes\n" + "\n".join(f"# step {n}: look at the data" for n in range(20)),
    *[f"total_{n} = df['value'].sum() * {n}" for n in range(10)],
]
RUN_EVERY = 2.0  # seconds between one agent's run_code calls, on average
READ_MIX = (("list_variables", 4), ("read_cells", 3), ("describe_variable", 3))
TARGET_OVERHEAD_MS = 20.0
TARGET_CLICK_MS = 250.0
PARTS = ("reads", "click", "eight", "soak")
SOAK_NOTEBOOKS = [f"soak-{n}.ipynb" for n in range(3)]
SOAK_AGENTS = 4
SOAK_KERNELS = 2  # soak kernels alive at once at most, beside the steady notebook's
SOAK_STEP = 2.0  # seconds between the kernel loop's starts and stops
SOAK_WAIT = 3.0  # wait_seconds of the agents' waiting call_status
SOAK_WARMUP = 20.0
SOCKET_LEAK = 50  # sockets more at the end than at the start: a leak
NO_KERNEL = "has a running kernel"  # in "no notebook 'x' has a running kernel"
STOPPING = "was interrupted before it answered"  # stopping a kernel interrupts it first


# -- figures -----------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """The ``q``-th percentile (linear between closest ranks); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q / 100
    low = math.floor(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def spread(values: list[float]) -> str:
    return f"p50 {ms(pct(values, 50))} ms, p90 {ms(pct(values, 90))} ms (n={len(values)})"


# -- the agent's side: the MCP SDK's client --------------------------------------------------
@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str) -> AsyncIterator[Any]:
    """One MCP session over Streamable HTTP with ``token``, initialized, for many calls."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        client,
        streamable_http_client(url, http_client=client) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def data(result: Any) -> Any:
    """A tool result's value: the text a str-returning tool gave, or the dict."""
    structured = getattr(result, "structured_content", None)
    if structured:
        return structured["result"] if set(structured) == {"result"} else structured
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


async def call(session: Any, tool: str, **arguments: Any) -> Any:
    """The tool's value; RuntimeError with its text if the tool failed."""
    result = await session.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {data(result)}")
    return data(result)


# -- the person's side: a jupyter_client client on the notebook's kernel ---------------------
class Kernel:
    """The notebook's kernel as the person reaches it: cells, silent reads, answers."""

    def __init__(self, connection_file: Path) -> None:
        from jupyter_client.asynchronous import AsyncKernelClient

        self.client = AsyncKernelClient(connection_file=str(connection_file))
        self.client.load_connection_file()

    async def start(self) -> None:
        self.client.start_channels()
        await self.client.wait_for_ready(timeout=60)

    def stop(self) -> None:
        self.client.stop_channels()

    async def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        while True:
            reply = await self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply

    async def run(self, code: str, timeout: float = 120) -> str:
        """Run a cell; its text output (stdout, results, errors)."""
        while True:  # the reads' status messages pile up on iopub meanwhile: drop them
            try:
                await self.client.get_iopub_msg(timeout=0)
            except queue.Empty:
                break
        msg_id = self.client.execute(code)
        parts = []
        while True:
            msg = await self.client.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                parts.append(content["text"])
            elif kind in ("execute_result", "display_data"):
                parts.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                parts.append(f"{content['ename']}: {content['evalue']}\n")
            elif kind == "status" and content["execution_state"] == "idle":
                break
        await self.reply(msg_id, timeout)
        return "".join(parts)

    async def evaluate(self, expression: str) -> tuple[float, str]:
        """Seconds from sending a silent user_expressions request to its reply, and the value."""
        start = time.perf_counter()
        msg_id = self.client.execute("", silent=True, store_history=False,
                                     user_expressions={"r": expression})  # fmt: skip
        reply = await self.reply(msg_id)
        elapsed = time.perf_counter() - start
        value = reply["content"]["user_expressions"]["r"]
        if value.get("status") != "ok":
            raise RuntimeError(f"{expression} failed in the kernel: {value}")
        return elapsed, value["data"]["text/plain"]

    async def answer(self, handle: str, thread: bool = False) -> tuple[float, dict[str, Any]]:
        """``%chat --answer HANDLE run``: the time.time() it was sent, and the reply.

        With ``thread``, ``-t`` names the handle's thread too (see :func:`answer_all`).
        """
        where = f"-t {handle.partition('.')[0]} " if thread else ""
        sent = time.time()
        msg_id = self.client.execute(f"%chat {where}--answer {handle} run", store_history=False)
        return sent, await self.reply(msg_id)


def started(reply: dict[str, Any]) -> float:
    """When the kernel began the request (ipykernel's ``started`` metadata), as time.time()."""
    value = reply.get("metadata", {}).get("started")
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value.timestamp() if isinstance(value, datetime) else math.nan


def failure(reply: dict[str, Any]) -> str:
    content = reply["content"]
    if content.get("status") == "ok":
        return ""
    return f"{content.get('ename', content.get('status'))}: {content.get('evalue', '')}"


# -- 1. read overhead ----------------------------------------------------------------------------
async def read_overhead(session: Any, kernel: Kernel, rounds: int) -> dict[str, list[float]]:
    import ast

    from nbchat.base._across import kernel_call

    reads = {
        "list_variables": ({"path": NOTEBOOK}, kernel_call("variables_text")),
        "describe_variable": ({"path": NOTEBOOK, "name": "df"}, kernel_call("describe_text", "df")),
    }
    times: dict[str, list[float]] = {"list_notebooks": []}
    for tool in reads:
        times[f"{tool} mcp"] = []
        times[f"{tool} kernel"] = []

    async def through_mcp(tool: str, arguments: dict[str, Any]) -> tuple[float, str]:
        start = time.perf_counter()
        value = await call(session, tool, **arguments)
        return time.perf_counter() - start, value

    for tool, (arguments, expression) in reads.items():  # warm up; both give the same text
        for _ in range(5):
            _, ours = await through_mcp(tool, arguments)
            _, direct = await kernel.evaluate(expression)
        if ours != ast.literal_eval(direct):
            print(f"  note: {tool} through the endpoint differs from the kernel's text")
        if tool == "describe_variable" and "DataFrame" not in ours:
            raise RuntimeError(f"describe_variable('df') did not describe the DataFrame: {ours}")
    await call(session, "list_notebooks")
    for n in range(rounds):
        for tool, (arguments, expression) in reads.items():
            pair = [("mcp", through_mcp(tool, arguments)),
                    ("kernel", kernel.evaluate(expression))]  # fmt: skip
            for side, measure in pair if n % 2 else pair[::-1]:
                elapsed, _ = await measure
                times[f"{tool} {side}"].append(elapsed)
        start = time.perf_counter()
        await call(session, "list_notebooks")
        times["list_notebooks"].append(time.perf_counter() - start)
    return times


# -- 2. click to result ----------------------------------------------------------------------
async def click_to_result(session: Any, kernel: Kernel, store: Any,
                          rounds: int) -> dict[str, list[float]]:  # fmt: skip
    """Per click: total, and the stretches between the moments the kernel and store record."""
    names = ("total", "from claim", "reply", "to kernel", "to claim", "to result", "to agent")
    parts: dict[str, list[float]] = {name: [] for name in names}
    for n in range(rounds + 2):  # two to warm up
        called = await call(session, "run_code", path=NOTEBOOK, code="x = 1", why=f"click {n}")
        handle = called["handle"]
        returned: list[float] = []

        async def wait(handle: str = handle, returned: list[float] = returned) -> Any:
            status = await call(session, "call_status", handle=handle, wait_seconds=20)
            returned.append(time.time())
            return status

        waiting = asyncio.ensure_future(wait())
        await asyncio.sleep(0.3)  # the agent's call_status is on the server, polling
        if waiting.done():
            raise RuntimeError(f"call_status returned before the answer: {waiting.result()}")
        sent, reply = await kernel.answer(handle)
        replied = time.time()
        status = await waiting
        if failure(reply) or status["state"] != "done":
            raise RuntimeError(f"answer to {handle} failed: {failure(reply)} {status}")
        thread_id, index = (int(part) for part in handle.split("."))
        turn = store.get(thread_id).turns[index]
        if n < 2:
            continue
        claimed, finished = turn.answered[0].at, turn.finished or math.nan
        parts["total"].append(returned[0] - sent)
        parts["from claim"].append(returned[0] - claimed)
        parts["reply"].append(replied - sent)
        parts["to kernel"].append(started(reply) - sent)
        parts["to claim"].append(claimed - started(reply))
        parts["to result"].append(finished - claimed)
        parts["to agent"].append(returned[0] - finished)
    return parts


def store_writes(folder: Path, count: int) -> list[float]:
    """Seconds per ``update_turn`` in a new store in ``folder`` (the real one's file system)."""
    from nbchat.store import ThreadStore

    store = ThreadStore(folder, "bench")
    thread = store.new_thread("bench-model")
    turn = store.start_turn(thread, "q")
    times = []
    for n in range(count):
        start = time.perf_counter()
        store.update_turn(thread, turn, answer=f"answer {n}")
        times.append(time.perf_counter() - start)
    return times


# -- 3. eight agents at once --------------------------------------------------------------------
def agent_process(index: int, url: str, token: str, seconds: float, think: float,
                  ready: Any, go: Any, results: Any) -> None:  # fmt: skip
    """One agent: its own MCP session and token; puts a dict of what it saw in ``results``."""
    try:
        results.put(asyncio.run(agent(index, url, token, seconds, think, ready, go)))
    except BaseException as error:  # the main process must hear of it, not wait forever
        results.put({"index": index, "crash": f"{type(error).__name__}: {error}"})
        ready.put(index)  # if it crashed before it was ready: the main process goes on
        raise


def read_arguments(tool: str, rng: random.Random) -> dict[str, Any]:
    arguments: dict[str, Any] = {"path": NOTEBOOK}
    if tool == "describe_variable":
        arguments["name"] = rng.choice(["df", "seen", "x", "rng"])
    elif tool == "read_cells":
        arguments.update(start=rng.randrange(0, 10), count=10)
    return arguments


async def agent(index: int, url: str, token: str, seconds: float, think: float,
                ready: Any, go: Any) -> dict[str, Any]:  # fmt: skip
    rng = random.Random(index)
    reads: dict[str, list[float]] = {tool: [] for tool, _ in READ_MIX}
    errors: list[str] = []
    busy = 0
    handles: dict[str, str] = {}  # marker -> handle
    unsent: list[str] = []  # markers whose run_code gave no handle
    states: dict[str, str] = {}
    run_times: list[float] = []  # run_code until its handle
    done_times: list[float] = []  # handle until call_status says done (the answerer included)
    async with mcp_session(url, token) as session:

        async def outcome(marker: str, handle: str, since: float, until: float) -> None:
            state = "waiting"
            while state in ("waiting", "running") and time.monotonic() < until:
                try:
                    status = await call(session, "call_status", handle=handle, wait_seconds=20)
                except Exception as error:  # noqa: BLE001 - counted, and asked again
                    errors.append(f"call_status: {type(error).__name__}: {error}"[:300])
                    await asyncio.sleep(0.5)
                    continue
                state = status["state"]
            states[marker] = state
            if state == "done":
                done_times.append(time.monotonic() - since)

        # The first call of each tool costs a fresh process seconds (imports, schemas, on
        # 2 cores shared by 8 agents): made before the start, like the session's setup.
        await call(session, "list_notebooks")
        for tool, _ in READ_MIX:
            await call(session, tool, **read_arguments(tool, rng))
        ready.put(index)
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        begin = time.monotonic()
        end = begin + seconds
        settle = end + 60  # then every call an agent holds a handle for must have ended
        next_run = begin + rng.uniform(0, RUN_EVERY)
        waits: list[asyncio.Future[None]] = []
        while time.monotonic() < end:
            if time.monotonic() >= next_run:
                marker = f"agent{index}-{len(handles) + len(unsent)}"
                start = time.monotonic()
                try:
                    called = await call(session, "run_code", path=NOTEBOOK,
                                        code=f"seen.append({marker!r})", why=f"mark {marker}")
                except Exception as error:  # noqa: BLE001 - counted; the marker must not run
                    errors.append(f"run_code: {type(error).__name__}: {error}"[:300])
                    unsent.append(marker)
                else:
                    run_times.append(time.monotonic() - start)
                    handles[marker] = called["handle"]
                    waits.append(asyncio.ensure_future(
                        outcome(marker, called["handle"], start, settle)))
                next_run = time.monotonic() + RUN_EVERY * rng.uniform(0.5, 1.5)
                continue
            tool = rng.choices([t for t, _ in READ_MIX], [w for _, w in READ_MIX])[0]
            start = time.monotonic()
            try:
                value = await call(session, tool, **read_arguments(tool, rng))
            except Exception as error:  # noqa: BLE001 - counted
                errors.append(f"{tool}: {type(error).__name__}: {error}"[:300])
            else:
                if "kernel is busy" in str(value):
                    busy += 1
                else:
                    reads[tool].append(time.monotonic() - start)
            if think:
                await asyncio.sleep(rng.uniform(0, 2 * think))
        await asyncio.gather(*waits)
    return {"index": index, "reads": reads, "errors": errors, "busy": busy, "handles": handles,
            "unsent": unsent, "states": states, "run_times": run_times,
            "done_times": done_times}  # fmt: skip


async def answer_all(kernel: Kernel, gate: Any, tokens: list[Any], alive: Callable[[], bool],
                     answered: dict[str, str], times: list[float]) -> None:  # fmt: skip
    """Answer ``run`` to every call the agents' tokens wait on, until ``alive()`` is False.

    ``-t THREAD`` goes with each handle: ``%chat --answer HANDLE run`` alone looks for
    HANDLE only in the magics' current thread once one is set (an earlier answer sets
    it), and then fails for another agent's call.
    """
    tries: Counter[str] = Counter()
    while alive():
        found = [c for token in tokens for c in gate.waiting(token) if c.state == "waiting"]
        fresh = [c for c in found if c.handle not in answered and tries[c.handle] < 3]
        for waiting in fresh:
            tries[waiting.handle] += 1
            start = time.perf_counter()
            _, reply = await kernel.answer(waiting.handle, thread=True)
            times.append(time.perf_counter() - start)
            if failure(reply):
                print(f"  answering {waiting.handle} failed: {failure(reply)}")
            else:
                answered[waiting.handle] = waiting.tool
        if not fresh:
            await asyncio.sleep(0.05)


async def crowd(args: argparse.Namespace, url: str, secrets: list[str], kernel: Kernel,
                gate: Any, tokens: list[Any]) -> dict[str, Any]:  # fmt: skip
    context = multiprocessing.get_context("spawn")  # the parent has threads and a loop
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    processes = [context.Process(target=agent_process, daemon=True,
                                 args=(n, url, secret, args.seconds, args.think, ready, go,
                                       results))  # fmt: skip
                 for n, secret in enumerate(secrets)]
    for process in processes:
        process.start()
    for _ in processes:  # each agent has imported the SDK and opened its session
        ready.get(timeout=120)
    go.set()
    gathered: list[dict[str, Any]] = []

    def alive() -> bool:
        with contextlib.suppress(queue.Empty):
            while True:
                gathered.append(results.get_nowait())
        return len(gathered) < len(processes) and any(p.is_alive() for p in processes)

    answered: dict[str, str] = {}
    answer_times: list[float] = []
    began = time.monotonic()
    await answer_all(kernel, gate, tokens, alive, answered, answer_times)
    took = time.monotonic() - began
    for process in processes:
        process.join(timeout=10)
    seen = json.loads((await kernel.run("import json; print(json.dumps(seen))")).strip())
    return {"agents": gathered, "answered": answered, "answer_times": answer_times,
            "seen": seen, "took": took}  # fmt: skip


def crowd_report(found: dict[str, Any], agents: int, store: Any) -> tuple[bool, dict[str, Any]]:
    """Print what the agents saw; whether nothing was lost or ran twice, and the figures."""
    results = found["agents"]
    crashed = [r for r in results if "crash" in r]
    results = [r for r in results if "crash" not in r]
    reads: dict[str, list[float]] = {tool: [] for tool, _ in READ_MIX}
    for result in results:
        for tool, values in result["reads"].items():
            reads[tool] += values
    every = [v for values in reads.values() for v in values]
    handles = {m: h for r in results for m, h in r["handles"].items()}
    states = {m: s for r in results for m, s in r["states"].items()}
    unsent = [m for r in results for m in r["unsent"]]
    errors = [e for r in results for e in r["errors"]]
    counts = Counter(found["seen"])
    lost = sorted(m for m in handles if states.get(m) != "done")
    not_run = sorted(m for m in handles if counts[m] == 0)
    twice = sorted(m for m, n in counts.items() if n > 1)
    stray = sorted(m for m in counts if m not in handles)
    in_store = Counter()
    for handle in handles.values():
        thread_id, index = (int(part) for part in handle.split("."))
        in_store[store.get(thread_id).turns[index].status] += 1
    print(f"\n3. {agents} agents at once, {found['took']:.0f} s with the answerer "
          f"({len(results)} agents reported, {len(crashed)} crashed)")
    for crash in crashed:
        print(f"  agent {crash['index']} crashed: {crash['crash']}")
    seconds = found["took"]
    for tool, values in reads.items():
        print(f"  {tool:<18} {len(values):5d} calls, p50 {ms(pct(values, 50))} ms, "
              f"p99 {ms(pct(values, 99))} ms")
    print(f"  all reads          {len(every):5d} calls ({len(every) / seconds:.1f}/s), p50 "
          f"{ms(pct(every, 50))} ms, p99 {ms(pct(every, 99))} ms; 'kernel busy' answers: "
          f"{sum(r['busy'] for r in results)}")
    slow = [v for v in every if v > 1.0]
    stalled = [v for v in every if v >= 9.5]
    print(f"  reads over 1 s: {len(slow)}, of which {len(stalled)} took 9.5 s or more (the "
          "endpoint's EVALUATE_TIMEOUT is 10 s)")
    runs = [v for r in results for v in r["run_times"]]
    dones = [v for r in results for v in r["done_times"]]
    print(f"  run_code           {len(handles):5d} handles, {len(unsent)} requests without "
          f"one; to the handle p50 {ms(pct(runs, 50))} ms, p99 {ms(pct(runs, 99))} ms")
    print(f"  handle to done (waits for the answerer): p50 {ms(pct(dones, 50))} ms, "
          f"p99 {ms(pct(dones, 99))} ms")
    print(f"  answerer: {len(found['answered'])} calls answered run, %chat --answer p50 "
          f"{ms(pct(found['answer_times'], 50))} ms, p99 {ms(pct(found['answer_times'], 99))} ms")
    print(f"  ends as the agents saw them: {dict(Counter(states.values()))}; turns in the store: "
          f"{dict(in_store)}")
    print(f"  seen in the kernel: {len(found['seen'])} markers, {len(counts)} distinct")
    print(f"  lost (a handle, never done): {len(lost)} {lost[:10]}")
    print(f"  done but never ran: {len(not_run)} {not_run[:10]}")
    print(f"  ran twice: {len(twice)} {twice[:10]}")
    print(f"  ran without a handle: {len(stray)} {stray[:10]}")
    print(f"  tool errors: {len(errors)}")
    for text, n in Counter(errors).most_common(8):
        print(f"    {n} x {text}")
    ok = not (lost or not_run or twice or stray or crashed) and len(results) == agents
    figures = {"reads p50": pct(every, 50), "reads p99": pct(every, 99), "reads": len(every),
               "runs": len(handles), "lost": len(lost) + len(not_run), "twice": len(twice),
               "errors": len(errors), "slow": len(slow), "stalled": len(stalled)}  # fmt: skip
    return ok, figures


# -- 4. soak --------------------------------------------------------------------------------------
def soak_process(index: int, url: str, token: str, ready: Any, go: Any, stop: Any,
                 results: Any) -> None:  # fmt: skip
    """One polling agent of the soak; puts a dict of what it saw in ``results``."""
    try:
        results.put(asyncio.run(soak_agent(index, url, token, ready, go, stop)))
    except BaseException as error:  # the main process must hear of it, not wait forever
        results.put({"index": index, "crash": f"{type(error).__name__}: {error}"})
        ready.put(index)
        raise


async def soak_agent(index: int, url: str, token: str, ready: Any, go: Any,
                     stop: Any) -> dict[str, Any]:  # fmt: skip
    """Poll until ``stop``: the notebooks, a call nobody answers, cells, a coming kernel."""
    rng = random.Random(index)
    calls: Counter[str] = Counter()
    expected: Counter[str] = Counter()  # a soak notebook's kernel stopped or stopping
    errors: list[tuple[float, str]] = []  # (time.time(), what)
    busy = 0
    status_times: list[tuple[float, float]] = []  # (time.time(), seconds) of wait_seconds=0
    async with mcp_session(url, token) as session:

        async def attempt(tool: str, **arguments: Any) -> Any:
            calls[tool] += 1
            try:
                return await call(session, tool, **arguments)
            except Exception as error:  # noqa: BLE001 - counted
                text = f"{tool}: {type(error).__name__}: {error}"[:300]
                stopped = NO_KERNEL in text or STOPPING in text
                if stopped and arguments.get("path") in SOAK_NOTEBOOKS:
                    expected[tool] += 1
                else:
                    errors.append((time.time(), text))
                return None

        called = await call(session, "run_code", path=NOTEBOOK, code=f"soak_{index} = 1",
                            why=f"soak agent {index}: nobody answers")  # fmt: skip
        handle = called["handle"]
        for tool, arguments in [("list_notebooks", {}), ("read_cells", {"path": NOTEBOOK}),
                                ("list_variables", {"path": NOTEBOOK}),
                                ("call_status", {"handle": handle})]:  # fmt: skip
            await call(session, tool, **arguments)  # the first call of each costs seconds
        ready.put(index)
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
        await asyncio.sleep(rng.uniform(0, SOAK_WAIT))  # not all four in step
        while not stop.is_set():
            listed = await attempt("list_notebooks")
            start = time.perf_counter()
            status = await attempt("call_status", handle=handle, wait_seconds=0)
            if status is not None:
                status_times.append((time.time(), time.perf_counter() - start))
                if status.get("state") != "waiting":
                    errors.append((time.time(), "call_status: the unanswered call is "
                                   f"{status.get('state')}"))  # fmt: skip
            await attempt("call_status", handle=handle, wait_seconds=SOAK_WAIT)
            await attempt("read_cells", path=NOTEBOOK, start=0, count=10)
            running = [n["path"] for n in (listed or {}).get("notebooks", [])
                       if n["path"] in SOAK_NOTEBOOKS]  # fmt: skip
            value = await attempt("list_variables", path=rng.choice(running or SOAK_NOTEBOOKS))
            busy += "kernel is busy" in str(value)
    return {"index": index, "calls": calls, "expected": expected, "errors": errors,
            "busy": busy, "status_times": status_times}  # fmt: skip


def server_use(pid: int) -> dict[str, float]:
    """The process's open fds, the sockets among them, and its RSS in MB."""
    fds = os.listdir(f"/proc/{pid}/fd")
    sockets = 0
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return {"fds": len(fds), "sockets": sockets, "rss": rss / 1024}


class Churn:
    """Kernels that come and go: notebook sessions opened and deleted through the REST API."""

    def __init__(self, lab: Any) -> None:
        self.lab = lab
        self.alive: list[tuple[str, str]] = []  # (session id, notebook), oldest first
        self.started = self.stopped = 0
        self.failures: list[str] = []
        self.start_times: list[float] = []
        self.stop_times: list[float] = []
        self.stopping: list[tuple[float, float]] = []  # time.time() a DELETE was sent, answered
        self._next = 0

    async def step(self) -> None:
        """Start a kernel if fewer than SOAK_KERNELS run, else stop the oldest."""
        if len(self.alive) < SOAK_KERNELS:
            free = [n for n in SOAK_NOTEBOOKS if n not in {path for _, path in self.alive}]
            await self.start(free[self._next % len(free)])
            self._next += 1
        else:
            await self.stop(*self.alive[0])

    async def start(self, name: str) -> None:
        from agent_helpers import start_session

        began = time.perf_counter()
        try:
            session = await asyncio.to_thread(start_session, self.lab, name)
        except Exception as error:  # noqa: BLE001 - counted
            self.failures.append(f"POST api/sessions {name}: {type(error).__name__}: {error}")
            return
        self.start_times.append(time.perf_counter() - began)
        self.alive.append((session["id"], name))
        self.started += 1

    async def stop(self, session_id: str, name: str) -> None:
        from agent_helpers import rest

        began, sent = time.perf_counter(), time.time()
        self.alive.remove((session_id, name))
        try:
            await asyncio.to_thread(rest, self.lab, f"api/sessions/{session_id}", "DELETE")
        except Exception as error:  # noqa: BLE001 - counted
            self.failures.append(f"DELETE api/sessions {name}: {type(error).__name__}: {error}")
            return
        self.stop_times.append(time.perf_counter() - began)
        self.stopping.append((sent, time.time()))
        self.stopped += 1

    async def until(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            began = time.monotonic()
            await self.step()
            await asyncio.sleep(max(0.0, SOAK_STEP - (time.monotonic() - began)))

    async def drain(self) -> None:
        """Stop every soak kernel, and give the server a moment to close what it held."""
        while self.alive:
            await self.stop(*self.alive[0])
        await asyncio.sleep(2)


async def soak(args: argparse.Namespace, lab: Any, url: str,
               secrets: list[str]) -> dict[str, Any]:  # fmt: skip
    from agent_helpers import write_notebook

    for name in SOAK_NOTEBOOKS:
        write_notebook(lab, name, ["x = 1"])
    pid = lab.process.pid
    context = multiprocessing.get_context("spawn")
    ready, results = context.Queue(), context.Queue()
    go, stop = context.Event(), context.Event()
    processes = [context.Process(target=soak_process, daemon=True,
                                 args=(n, url, secret, ready, go, stop, results))
                 for n, secret in enumerate(secrets)]  # fmt: skip
    for process in processes:
        process.start()
    for _ in processes:
        ready.get(timeout=120)
    go.set()
    churn = Churn(lab)
    samples: list[tuple[str, dict[str, float], int]] = []  # (moment, use, soak kernels alive)
    try:
        await churn.until(time.monotonic() + SOAK_WARMUP)
        await churn.drain()
        samples.append(("start", server_use(pid), 0))
        began, measured = time.monotonic(), time.time()
        for minute in range(1, math.ceil(args.soak_minutes) + 1):
            await churn.until(began + 60 * min(minute, args.soak_minutes))
            if minute < args.soak_minutes:
                samples.append((f"{minute} min", server_use(pid), len(churn.alive)))
        took = time.monotonic() - began
        await churn.drain()
        samples.append(("end", server_use(pid), 0))
    finally:
        stop.set()
        gathered = []
        for _ in processes:
            with contextlib.suppress(queue.Empty):
                gathered.append(results.get(timeout=60))
        for process in processes:
            process.join(timeout=10)
        await churn.drain()
    return {"agents": gathered, "churn": churn, "samples": samples, "took": took,
            "measured": measured, "pid": pid}  # fmt: skip


def soak_report(found: dict[str, Any], agents: int) -> tuple[bool, dict[str, Any]]:
    """Print the table; whether there was no unexpected error and no socket leak, the figures."""
    results = [r for r in found["agents"] if "crash" not in r]
    crashed = [r for r in found["agents"] if "crash" in r]
    churn: Churn = found["churn"]
    calls: Counter[str] = sum((Counter(r["calls"]) for r in results), Counter())
    expected: Counter[str] = sum((Counter(r["expected"]) for r in results), Counter())
    timed = [e for r in results for e in r["errors"]]
    near = sum(any(sent <= at <= answered + 2 for sent, answered in churn.stopping)
               for at, _ in timed)  # fmt: skip
    errors = [text for _, text in timed] + churn.failures
    errors += [f"agent {r['index']} crashed: {r['crash']}" for r in crashed]
    if len(found["agents"]) < agents:
        errors.append(f"{agents - len(found['agents'])} agents never reported")
    statuses = [t for r in results for at, t in r["status_times"] if at >= found["measured"]]
    print(f"\n4. Soak: {found['took'] / 60:.1f} min after a {SOAK_WARMUP:.0f} s warm-up, a kernel "
          f"started or stopped every {SOAK_STEP:.0f} s (at most {SOAK_KERNELS} besides "
          f"{NOTEBOOK}'s), {agents} agents polling")
    print(f"  the Jupyter server process (pid {found['pid']}):")
    print(f"    {'moment':<8} {'fds':>6} {'sockets':>8} {'RSS MB':>8}  soak kernels alive")
    for moment, use, alive in found["samples"]:
        print(f"    {moment:<8} {use['fds']:>6} {use['sockets']:>8} {use['rss']:>8.1f}  {alive}")
    first, last = found["samples"][0][1], found["samples"][-1][1]
    growth = {key: last[key] - first[key] for key in first}
    print(f"    {'growth':<8} {growth['fds']:>+6} {growth['sockets']:>+8} "
          f"{growth['rss']:>+8.1f}  (end - start, both with the soak kernels stopped)")
    print(f"  kernels: {churn.started} started, {churn.stopped} stopped; POST api/sessions "
          f"p50 {ms(pct(churn.start_times, 50))} ms, p99 {ms(pct(churn.start_times, 99))} ms; "
          f"DELETE p50 {ms(pct(churn.stop_times, 50))} ms, p99 {ms(pct(churn.stop_times, 99))} ms")
    print(f"  agent calls (warm-up included): {sum(calls.values())} "
          + ", ".join(f"{tool} {n}" for tool, n in calls.most_common()))
    print(f"  errors: {sum(expected.values())} expected (no running kernel: "
          f"{dict(expected)}), {len(errors)} unexpected; 'kernel busy' answers: "
          f"{sum(r['busy'] for r in results)}")
    for text, n in Counter(errors).most_common(8):
        print(f"    {n} x {text}")
    if timed:
        print(f"    {near} of the agents' {len(timed)} came while a kernel was being stopped "
              "(its DELETE api/sessions sent, until 2 s after the answer)")
    print(f"  call_status (wait_seconds=0) during the soak: p50 {ms(pct(statuses, 50))} ms, "
          f"p99 {ms(pct(statuses, 99))} ms (n={len(statuses)})")
    leak = growth["sockets"] > SOCKET_LEAK
    if leak:
        print(f"  sockets grew by {growth['sockets']} (more than {SOCKET_LEAK}): a leak")
    figures = {"growth": growth, "errors": len(errors), "expected": sum(expected.values()),
               "calls": sum(calls.values()), "status p50": pct(statuses, 50),
               "status p99": pct(statuses, 99)}  # fmt: skip
    return not errors and not leak, figures


# -- the whole run ---------------------------------------------------------------------------
Figures = dict[str, list[float]]


async def single_agent(args: argparse.Namespace, chosen: tuple[str, ...], url: str, secret: str,
                       kernel: Kernel, store: Any, scratch: Path
                       ) -> tuple[Figures | None, Figures | None]:  # fmt: skip
    """Parts 1 and 2, those of them ``chosen``; None for a part not run."""
    times = parts = None
    async with mcp_session(url, secret) as session:
        if "reads" in chosen:
            print(f"\n1. Read overhead: {args.reads} rounds, interleaved, one MCP session")
            times = await read_overhead(session, kernel, args.reads)
            for name, values in times.items():
                print(f"  {name:<26} {spread(values)}")
            for tool in ("list_variables", "describe_variable"):
                ours, direct = times[f"{tool} mcp"], times[f"{tool} kernel"]
                paired = [a - b for a, b in zip(ours, direct, strict=True)]
                print(f"  {tool} overhead: p50 {ms(pct(ours, 50) - pct(direct, 50))} ms "
                      f"(median of paired differences {ms(pct(paired, 50))} ms; "
                      f"target <= {TARGET_OVERHEAD_MS:.0f})")
        if "click" not in chosen:
            return times, parts
        print(f"\n2. Click to result: {args.clicks} clicks, the agent waiting in call_status")
        parts = await click_to_result(session, kernel, store, args.clicks)
        print(f"  answer sent -> call_status returns done: {spread(parts['total'])} "
              f"(target p50 <= {TARGET_CLICK_MS:.0f} ms)")
        print(f"  claim recorded in the kernel -> call_status returns done: "
              f"{spread(parts['from claim'])}")
        print(f"  answer sent -> the kernel's execute_reply: {spread(parts['reply'])}")
        print("  where the time goes (p50 of each stretch):")
        notes = {
            "to kernel": "sent -> the kernel starts the request (ZeroMQ, the kernel's queue)",
            "to claim": "kernel starts -> claim written (parse, find the call, check, claim)",
            "to result": "claim -> result written and the turn complete (run x = 1, 2 writes)",
            "to agent": "turn complete -> call_status returns (its store poll, every "
                        "POLL = 50 ms, then HTTP)",
        }  # fmt: skip
        for name, note in notes.items():
            print(f"    {ms(pct(parts[name], 50)):>7} ms  {note}")
        writes = store_writes(scratch, 30)
        print(f"  one store write (the user's lock, temp file, fsync, rename, fsync of the "
              f"folder) in a scratch store beside it: {spread(writes)}; the poll adds "
              f"POLL / 2 = 25 ms on average")
    return times, parts


async def bench(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(TESTS))
    from agent_helpers import USER, agent_server, endpoint, start_session, tokens, write_notebook
    from nbchat.agents import AgentGate
    from nbchat.store._open import open_store

    chosen = PARTS if args.only is None else (args.only,)
    if args.soak_minutes <= 0:
        chosen = tuple(part for part in chosen if part != "soak")
    base = Path(tempfile.mkdtemp(prefix="nbchat-agents-bench-"))
    print(f"Jupyter server, store and tokens under {base}; parts: {', '.join(chosen) or 'none'}")
    times = parts = figures = soaked = None
    ok = soak_ok = True
    with agent_server(base) as lab:
        write_notebook(lab, NOTEBOOK, CELLS)
        kernel_id = start_session(lab, NOTEBOOK)["kernel"]["id"]
        kernel = Kernel(base / "lab" / "runtime" / f"kernel-{kernel_id}.json")
        await kernel.start()
        try:
            if set(chosen) - {"soak"}:
                rows = (await kernel.run(SETUP)).strip()
                if rows != str(ROWS):
                    raise RuntimeError(f"the setup cell failed: {rows}")
            store = open_store(base / "store", USER)
            url = endpoint(lab)
            if {"reads", "click"} & set(chosen):
                secret = tokens(base).mint("bench-agent").secret
                times, parts = await single_agent(args, chosen, url, secret, kernel, store,
                                                  base / "scratch-store")  # fmt: skip
            if "eight" in chosen:
                minted = [tokens(base).mint(f"crowd-{n}") for n in range(args.agents)]
                found = await crowd(args, url, [m.secret for m in minted], kernel,
                                    AgentGate(store), [m.token for m in minted])  # fmt: skip
                ok, figures = crowd_report(found, args.agents, store)
            if "soak" in chosen:
                secrets = [tokens(base).mint(f"soak-{n}").secret for n in range(SOAK_AGENTS)]
                soak_ok, soaked = soak_report(await soak(args, lab, url, secrets), SOAK_AGENTS)
        finally:
            kernel.stop()
        errors = [line for line in lab.log().splitlines()
                  if "Traceback" in line or "[E " in line]  # fmt: skip
        print(f"  server log: {len(errors)} error lines" + "".join(
            f"\n    {line[:200]}" for line in errors[:10]))  # fmt: skip
    rows_: list[tuple[str, str, str, bool | None]] = []
    if times is not None:
        overheads = [pct(times[f"{t} mcp"], 50) - pct(times[f"{t} kernel"], 50)
                     for t in ("list_variables", "describe_variable")]  # fmt: skip
        rows_ += [
            ("read overhead p50, list_variables", f"{ms(overheads[0])} ms",
             f"<= {TARGET_OVERHEAD_MS:.0f} ms", overheads[0] * 1000 <= TARGET_OVERHEAD_MS),
            ("read overhead p50, describe_variable df", f"{ms(overheads[1])} ms",
             f"<= {TARGET_OVERHEAD_MS:.0f} ms", overheads[1] * 1000 <= TARGET_OVERHEAD_MS),
        ]  # fmt: skip
    if parts is not None:
        click = pct(parts["total"], 50)
        rows_.append(("click to result p50 (p90)",
                      f"{ms(click)} ms ({ms(pct(parts['total'], 90))})",
                      f"<= {TARGET_CLICK_MS:.0f} ms", click * 1000 <= TARGET_CLICK_MS))
    if figures is not None:
        rows_ += crowd_rows(args, figures, ok)
    if soaked is not None:
        growth = soaked["growth"]
        rows_ += [
            ("soak: growth of sockets / fds / RSS",
             f"{growth['sockets']:+} / {growth['fds']:+} / {growth['rss']:+.1f} MB",
             f"<= {SOCKET_LEAK} sockets", growth["sockets"] <= SOCKET_LEAK),
            ("soak: unexpected / expected errors",
             f"{soaked['errors']} / {soaked['expected']} of {soaked['calls']}", "0 unexpected",
             soaked["errors"] == 0),
            ("soak: call_status p50 / p99",
             f"{ms(soaked['status p50'])} / {ms(soaked['status p99'])} ms", "(figure)", None),
        ]  # fmt: skip
    print(f"\nSummary ({', '.join(chosen) or 'no parts'}, {os.cpu_count()} cores):")
    print(f"  {'measure':<42} {'measured':<24} {'target':<10} met")
    for name, measured, target, met in rows_:
        mark = "" if met is None else ("yes" if met else "NO")
        print(f"  {name:<42} {measured:<24} {target:<10} {mark}")
    return 0 if ok and soak_ok else 1


def crowd_rows(args: argparse.Namespace, figures: dict[str, Any],
               ok: bool) -> list[tuple[str, str, str, bool | None]]:  # fmt: skip
    """Part 3's lines of the summary."""
    return [
        (f"{args.agents} agents: run_code lost / ran twice",
         f"{figures['lost']} / {figures['twice']} of {figures['runs']}", "0 / 0", ok),
        (f"{args.agents} agents: reads p50 / p99",
         f"{ms(figures['reads p50'])} / {ms(figures['reads p99'])} ms", "(figure)", None),
        (f"{args.agents} agents: reads / over 1 s / over 9.5 s",
         f"{figures['reads']} / {figures['slow']} / {figures['stalled']}", "(figure)", None),
        (f"{args.agents} agents: tool errors", str(figures["errors"]), "(figure)", None),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=200, help="rounds of part 1")
    parser.add_argument("--clicks", type=int, default=30, help="answers timed in part 2")
    parser.add_argument("--agents", type=int, default=8, help="agent processes in part 3")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long part 3 runs")
    parser.add_argument("--think", type=float, default=0.05,
                        help="mean pause in seconds between one agent's reads (0: none)")
    parser.add_argument("--soak-minutes", type=float, default=10.0,
                        help="how long part 4 runs (0: skip it)")
    parser.add_argument("--only", choices=PARTS, help="run only this part (default: all)")
    args = parser.parse_args()
    sys.exit(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
