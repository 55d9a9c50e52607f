"""A coding agent's answer (ACP) in real JupyterLab + Chromium: the first chunk drawn, a flood.

Starts an isolated JupyterLab whose kernels host the scripted ACP agent (a
wrapper of ``python -m nbchat.testing.acp_agent`` that also writes, to a file,
the time it sent a marked chunk and the end of each turn, and knows a
``drip`` step: N chunks, one every ``seconds / N``), and headless Chromium.
The same measurements run in the panel (``%chat --panel``, the agent picked in
``select.nbchat-agent``, a new thread for each flood turn) and in a cell
(``%chat --with scripted QUESTION``, ``-n`` for each flood turn).

1. The first chunk drawn after it arrives (target <= 30 ms). The agent sleeps,
   sends one chunk carrying a marker of the run's own, and stamps
   ``time.time()``. In the page, a listener added to the kernel's WebSocket
   before JupyterLab's own (``WebSocket`` wrapped by an init script) stamps the
   frame carrying the marker as it arrives (``performance.now()``, and the
   kernel's header ``date``); a MutationObserver on the panel (on the cell's
   output area) stamps the marker's text in the DOM, then the next
   requestAnimationFrame callback (the frame that draws it: its style,
   layout and paint follow), then a setTimeout from that callback (the task
   after that frame's rendering). Target: arrival -> the task after the frame.
   The agent's send -> kernel -> page are printed too (one clock: loopback).
2. 1,000 streamed updates against the same 5,000 characters shown once
   (target: the page's cost at most 1.5 x). The agent sends the answer as
   1,000 chunks paced over ``--seconds`` (``drip``), or waits as long and
   sends it in one; and unpaced: 1,000 chunks as fast as it can against one.
   Each measured turn is the second of a new thread: a short first turn starts
   the thread's agent process before the window (its start-up, about 1.5 s of
   CPU on a 2-core machine, is neither turn's and would slow the page's clock
   unevenly). For each turn, the renderer main thread's ScriptDuration, LayoutDuration,
   RecalcStyleDuration and TaskDuration (CDP ``Performance.getMetrics``
   deltas), from just before Enter (Shift+Enter) to ``--settle`` seconds after
   the agent's turn ended (the benchmark does not touch the page meanwhile);
   the renderer main thread's own CPU time (``cpu``: the kernel's schedstat for
   that thread; CDP's durations are wall clock and also count the time the
   renderer waited for a core while the kernel and the agent worked);
   the page's kernel messages and bytes in that window; the same window with
   nothing asked (the idle page) to read the rest against. Ratios of the medians,
   raw and with the idle page's share taken out. ``--trace`` adds a Chromium
   trace of a paced turn of each kind in each place (the renderer main
   thread's self time by event), ``--profile`` a V8 CPU profile of a paced
   turn in the panel (its top functions by self time): what the cost is.
   The cell's turns also run, round by round, with its updates in text/html
   only (``cell-h``: what JupyterLab does without nbchat's live renderer,
   replacing the whole answer each time), and the two are compared.

Loopback only (the agent is a local process; no model is asked); it stops by
itself (``--deadline``). Noisy machine: medians over ``--repeat`` rounds, the
kinds' order rotated each round; nothing is asserted about times.

Run: ``.venv/bin/python benchmarks/acp_browser.py [--runs 8] [--repeat 3] [--only panel|cell]
[--trace] [--profile]`` (about 5 minutes for the cell, 3 for the panel).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [e for e in sys.path if Path(e or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT / "tests"))

from playwright.sync_api import CDPSession, Locator, Page, sync_playwright  # noqa: E402

from agent_helpers import agent_server  # noqa: E402
from e2e.jupyterlab import NotebookPage, launch_chromium, open_notebook  # noqa: E402

TARGET_FIRST_MS = 30.0
TARGET_FLOOD = 1.5
WORDS = "".join(f"w{n:03d} " for n in range(1000))  # 5,000 characters: 1,000 five-char chunks
METRICS = ("ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration",
           "MainThreadCpu")  # fmt: skip
SHORT = {"ScriptDuration": "script", "LayoutDuration": "layout",
         "RecalcStyleDuration": "style", "TaskDuration": "task", "MainThreadCpu": "cpu"}
# (label, question, streamed kind or None for its one-chunk pair)
KINDS = [
    ("paced 1,000 chunks", "drip thousand"),
    ("paced, in one chunk", "drip once"),
    ("unpaced 1,000 chunks", "flood thousand"),
    ("in one chunk", "all at once"),
]
PAIRS = [("paced 1,000 chunks", "paced, in one chunk"), ("unpaced 1,000 chunks", "in one chunk")]
WITHOUT_LIVE = "cell-h"  # the cell, its updates in text/html only (no live renderer)


WARM_UP, WARM_REPLY = "warm up", "ready."


def marker(n: int) -> str:
    return f"QMARK{n}Z"


def script(runs: int, seconds: float) -> dict[str, Any]:
    firsts = [
        {
            "when": f"first chunk #{n}#",
            "steps": [
                {"sleep": 0.3},
                {"say": f"{marker(n)} ", "stamp": f"mark{n}"},
                {"sleep": 0.3},
                {"say": "and the rest of the answer.", "chunks": 5},
            ],
        }
        for n in range(runs)
    ]
    return {"turns": [*firsts, {"when": WARM_UP, "steps": [{"say": WARM_REPLY}]},
        {"when": "drip thousand", "steps": [{"drip": WORDS, "chunks": 1000, "seconds": seconds}]},
        {"when": "drip once", "steps": [{"drip": WORDS, "chunks": 1, "seconds": seconds}]},
        {"when": "flood thousand", "steps": [{"say": WORDS, "chunks": 1000}]},
        {"when": "all at once", "steps": [{"say": WORDS}]},
    ]}  # fmt: skip


# The scripted agent, with stamps (a marked chunk sent, a turn's end) and the drip step.
WRAPPER = """\
import asyncio, os, time
import acp
from nbchat.testing import acp_agent

_step, _prompt = acp_agent.ScriptedAgent._step, acp_agent.ScriptedAgent.prompt

def _stamp(kind):
    with open(os.environ["BENCH_ACP_STAMPS"], "a") as out:
        out.write(f"{kind} {time.time()!r}\\n")

async def _stepped(self, session_id, step):
    if "drip" in step:  # chunk n of N sent at (n + 1) * seconds / N from the step's start
        text, count = str(step["drip"]), max(1, int(step["chunks"]))
        size = -(-len(text) // count)
        loop = asyncio.get_running_loop()
        start, gap = loop.time(), float(step["seconds"]) / count
        for n, at in enumerate(range(0, len(text), size)):
            delay = start + (n + 1) * gap - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await self.conn.session_update(
                session_id, acp.update_agent_message_text(text[at:at + size]))
        return None
    result = await _step(self, session_id, step)
    if "stamp" in step:
        _stamp(step["stamp"])
    return result

async def _prompted(self, *args, **kwargs):
    try:
        return await _prompt(self, *args, **kwargs)
    finally:
        _stamp("end")

acp_agent.ScriptedAgent._step = _stepped
acp_agent.ScriptedAgent.prompt = _prompted
acp_agent.main()
"""

# Before JupyterLab's code: the kernel WebSocket's frames stamped as they arrive (a listener
# added in the constructor runs before the onmessage JupyterLab sets), counted while
# `count` is on, searched for `marker` while one is set (decoding only then).
INIT = """(() => {
    const Native = window.WebSocket, decoder = new TextDecoder();
    const bench = window.__bench = {marker: null, arrivals: [], count: false, messages: 0,
                                    bytes: 0, watch: null};
    window.WebSocket = class extends Native {
        constructor(...args) {
            super(...args);
            if (!String(args[0]).includes("/channels")) return;
            this.addEventListener("message", (event) => {
                const t = performance.now(), data = event.data;
                if (bench.count) {
                    bench.messages += 1;
                    bench.bytes += typeof data === "string" ? data.length : data.byteLength;
                }
                if (bench.marker === null) return;
                const text = typeof data === "string" ? data : decoder.decode(data);
                if (!text.includes(bench.marker)) return;
                const date = /"date":\\s*"([^"]+)"/.exec(text);
                bench.arrivals.push({marker: bench.marker, t, epoch: performance.timeOrigin + t,
                                     date: date && date[1]});
                bench.marker = null;
            });
        }
    };
})();"""
# Armed on `root` (the panel, a cell's output area) for one marker: the DOM, the frame after.
WATCH = """(root, marker) => {
    const bench = window.__bench;
    const watch = bench.watch = {marker, dom: null, frame: null, after: null};
    const observer = new MutationObserver(() => {
        if (watch.dom !== null || !root.textContent.includes(marker)) return;
        watch.dom = performance.now();
        observer.disconnect();
        requestAnimationFrame(() => {
            watch.frame = performance.now();
            setTimeout(() => { watch.after = performance.now(); });
        });
    });
    observer.observe(root, {childList: true, subtree: true, characterData: true});
    bench.marker = marker;
}"""
_JS_PANEL = """(path) => [...window.jupyterapp.shell.widgets('main')]
    .find(w => w.context && w.context.path === path && w.content)"""
_JS_SOURCE = f"""([path, index, source]) =>
    ({_JS_PANEL})(path).content.model.sharedModel.cells[index].setSource(source)"""
_JS_CLEAR = f"""([path, index]) =>
    ({_JS_PANEL})(path).content.widgets[index].model.outputs.clear()"""
_JS_HAS = "(el, text) => el.textContent.includes(text)"
SETUP = """\
%load_ext nbchat
from nbchat.jupyter.cell import _sinks as _bench_sinks
_bench_streaming = _bench_sinks._streaming
def _bench_live(on):  # off: a cell's updates in text/html only, as a page without live.ts
    _bench_sinks._streaming = _bench_streaming if on else lambda turn: {
        k: v for k, v in _bench_streaming(turn).items() if k != _bench_sinks.LIVE_MIME_TYPE}
"""
PANEL_CELL = "%chat --panel"
PANEL = ".nbchat-panel"
CELL = 2  # the cell the cell measurements run in


# -- the agent's stamps ---------------------------------------------------------------------
class Stamps:
    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[tuple[str, float]]:
        if not self.path.exists():
            return []
        return [
            (kind, float(at))
            for kind, at in (
                line.split() for line in self.path.read_text().splitlines() if line.strip()
            )
        ]

    def ends(self) -> int:
        return sum(kind == "end" for kind, _ in self.lines())

    def wait_end(self, before: int, timeout: float = 120) -> float:
        """Wait (reading the file, not the page) for the turn after ``before`` ends; its time."""
        deadline = time.monotonic() + timeout
        while True:
            ends = [at for kind, at in self.lines() if kind == "end"]
            if len(ends) > before:
                return ends[before]
            if time.monotonic() > deadline:
                raise TimeoutError("the agent's turn did not end")
            time.sleep(0.05)

    def at(self, kind: str) -> float:
        """When ``kind`` was stamped last (each place's runs reuse the markers)."""
        return [at for k, at in self.lines() if k == kind][-1]


# -- where the question is asked ------------------------------------------------------------
class Panel:
    name = "panel"

    def __init__(self, nb: NotebookPage) -> None:
        self.nb, self.page = nb, nb.page
        self.el = nb.output(1).locator(PANEL).first

    def open(self) -> Panel:
        self.nb.run_cell(1)
        self.el.wait_for(timeout=30_000)
        return self

    @property
    def root(self) -> Locator:
        return self.el

    def fresh(self) -> None:
        """A new thread: the next question to the agent starts a session of its own."""
        self.el.locator(".nbchat-header button.nbchat-new").click()
        _until(lambda: self.el.locator(".nbchat-from-model").count() == 0, "a new thread")

    def prepare(self, question: str, new: bool) -> None:
        """Everything before Enter: the thread, the agent picked, the question typed."""
        if new:
            self.fresh()
        picker = self.el.locator("select.nbchat-agent")
        if picker.input_value() != "scripted":
            picker.select_option("scripted")
        box = self.el.locator("textarea.nbchat-input-box")
        if new:  # the thread's agent started before the measured turn
            box.click()
            box.fill(WARM_UP)
            self.go()
            _until(lambda: self.done(WARM_REPLY), "the warm-up turn")
        box.click()
        box.fill(question)

    def go(self) -> None:
        self.page.keyboard.press("Enter")

    def done(self, text: str) -> bool:
        return self.el.locator(".nbchat-stop").is_hidden() and self.has(text)

    def has(self, text: str) -> bool:
        return bool(self.el.evaluate(_JS_HAS, text))


class Cell:
    name = "cell"

    def __init__(self, nb: NotebookPage) -> None:
        self.nb, self.page = nb, nb.page

    @property
    def root(self) -> Locator:
        return self.nb.output(CELL)

    def prepare(self, question: str, new: bool) -> None:
        if new:  # the thread's agent started before the measured turn
            self._type(f"%chat -n --with scripted {WARM_UP}")
            self.go()
            _until(lambda: self.done(WARM_REPLY), "the warm-up turn")
        self._type(f"%chat --with scripted {question}")

    def _type(self, source: str) -> None:
        self.page.evaluate(_JS_SOURCE, [self.nb.path, CELL, source])
        self.before = self.nb.execution_count(CELL)
        self.nb.cell(CELL).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")

    def go(self) -> None:
        self.page.keyboard.press("Shift+Enter")

    def live(self, on: bool) -> None:
        """Whether the cell's updates carry the markup nbchat's live renderer draws."""
        self._type(f"_bench_live({on})")
        self.go()
        _until(lambda: self.nb.execution_count(CELL) not in (None, self.before)
               and self.nb.is_kernel_idle(), "the switch")  # fmt: skip

    def done(self, text: str) -> bool:
        return (self.nb.execution_count(CELL) not in (None, self.before)
                and self.nb.is_kernel_idle() and self.has(text))  # fmt: skip

    def has(self, text: str) -> bool:
        return bool(self.root.evaluate(_JS_HAS, text))


def _until(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout} s")
        time.sleep(0.1)


# -- 1. the first chunk ---------------------------------------------------------------------
def first_chunk(where: Panel | Cell, stamps: Stamps, n: int) -> dict[str, float]:
    page = where.page
    where.prepare(f"first chunk #{n}#", new=False)
    page.wait_for_timeout(300)
    ends = stamps.ends()
    where.root.evaluate(WATCH, marker(n))
    where.go()
    stamps.wait_end(ends)
    _until(lambda: where.done("rest of the answer"), "the first-chunk turn on the page")
    page.wait_for_timeout(200)
    bench = page.evaluate("() => window.__bench")
    watch = bench["watch"]
    arrival = [a for a in bench["arrivals"] if a["marker"] == marker(n)][-1]  # this run's
    sent = stamps.at(f"mark{n}")
    row = {"received -> DOM": watch["dom"] - arrival["t"],
           "received -> frame (rAF)": watch["frame"] - arrival["t"],
           "received -> task after the frame": watch["after"] - arrival["t"],
           "agent sent -> page received": arrival["epoch"] - sent * 1000,
           "agent sent -> task after the frame": arrival["epoch"] - sent * 1000
           + watch["after"] - arrival["t"]}  # fmt: skip
    if arrival["date"]:
        stamped = datetime.fromisoformat(arrival["date"].replace("Z", "+00:00")).timestamp()
        row["agent sent -> kernel stamped"] = (stamped - sent) * 1000
        row["kernel stamped -> page received"] = arrival["epoch"] - stamped * 1000
    return row


FIRST_ROWS = ["agent sent -> kernel stamped", "kernel stamped -> page received",
              "agent sent -> page received", "received -> DOM", "received -> frame (rAF)",
              "received -> task after the frame", "agent sent -> task after the frame"]  # fmt: skip


# -- 2. the page's cost of a turn -----------------------------------------------------------
def metrics(cdp: CDPSession) -> dict[str, float]:
    got = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    got["MainThreadCpu"] = main_thread_cpu(RENDERER[0])
    return {name: got[name] for name in (*METRICS, "Timestamp")}


# The page's renderer process (found by `find_renderer`); its main thread's CPU time, unlike
# CDP's durations (wall clock), leaves out the time it waited for a core while the kernel,
# the agent and the server worked on the machine's other processes.
RENDERER = [0]


def main_thread_cpu(pid: int) -> float:
    """Seconds the process's main thread has run on a CPU (the kernel's schedstat)."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9


def find_renderer(page: Page) -> int:
    """The renderer process whose main thread runs this page's script."""

    def renderers() -> dict[int, float]:
        found = {}
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if proc.name.isdigit() and b"--type=renderer" in (proc / "cmdline").read_bytes():
                    found[int(proc.name)] = main_thread_cpu(int(proc.name))
        return found

    before = renderers()
    page.evaluate("() => { const end = performance.now() + 400; while (performance.now() < end); }")
    after = renderers()
    return max(after, key=lambda pid: after[pid] - before.get(pid, after[pid]))


def turn_cost(where: Panel | Cell, cdp: CDPSession, stamps: Stamps, question: str,
              settle: float) -> dict[str, float]:  # fmt: skip
    """The page's work from just before Enter to ``settle`` s after the agent's turn ended."""
    page = where.page
    where.prepare(question, new=True)
    page.evaluate("() => { const b = window.__bench; b.messages = b.bytes = 0; b.count = true; }")
    page.wait_for_timeout(1500)  # the warm-up's and the typing's work done
    ends = stamps.ends()
    before = metrics(cdp)
    where.go()
    stamps.wait_end(ends)
    time.sleep(settle)
    after = metrics(cdp)
    late = 0
    while not where.done("w999"):  # the page is still at it: the window grows until it is not
        late += 1
        if late > 600:
            raise TimeoutError(f"{where.name}: {question!r} never finished on the page")
        time.sleep(0.1)
    if late:
        time.sleep(settle)
        after = metrics(cdp)
    counted = page.evaluate("() => { const b = window.__bench; b.count = false; "
                            "return [b.messages, b.bytes]; }")  # fmt: skip
    assert where.has("w000 w001") and where.has("w998 w999"), f"{question}: an incomplete answer"
    row = {SHORT[m]: (after[m] - before[m]) * 1000 for m in METRICS}
    row.update(seconds=after["Timestamp"] - before["Timestamp"], messages=counted[0],
               kb=counted[1] / 1024, late=late)  # fmt: skip
    return row


def idle_cost(page: Page, cdp: CDPSession, seconds: float) -> dict[str, float]:
    before = metrics(cdp)
    time.sleep(seconds)
    after = metrics(cdp)
    row = {SHORT[m]: (after[m] - before[m]) * 1000 for m in METRICS}
    row["seconds"] = after["Timestamp"] - before["Timestamp"]
    return row


def profile(where: Panel, cdp: CDPSession, stamps: Stamps, settle: float, top: int = 12) -> None:
    """A V8 CPU profile of one paced turn: its top functions by self time."""
    where.prepare("drip thousand", new=True)
    where.page.wait_for_timeout(500)
    ends = stamps.ends()
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 200})
    cdp.send("Profiler.start")
    where.go()
    stamps.wait_end(ends)
    time.sleep(settle)
    taken = cdp.send("Profiler.stop")["profile"]
    cdp.send("Profiler.disable")
    nodes = {node["id"]: node for node in taken["nodes"]}
    self_ms: dict[str, float] = {}
    for sample, delta in zip(taken["samples"], taken["timeDeltas"], strict=True):
        frame = nodes[sample]["callFrame"]
        url = frame["url"].rsplit("/", 1)[-1][:40]
        name = (
            f"{frame['functionName'] or '(anonymous)'} {url}:{frame['lineNumber'] + 1}:"
            f"{frame['columnNumber'] + 1}"
            if frame["url"]
            else frame["functionName"]
        )
        self_ms[name] = self_ms.get(name, 0.0) + delta / 1000
    busy = sum(ms for name, ms in self_ms.items() if name not in ("(idle)", "(program)"))
    print(
        f"   V8 profile of one paced turn in the panel: {busy:.0f} ms in scripts and GC "
        f"(besides '(program)': the renderer's own work, {self_ms.get('(program)', 0):.0f} ms)"
    )
    for name, spent in sorted(self_ms.items(), key=lambda kv: -kv[1])[:top]:
        if name != "(idle)":
            print(f"     {spent:7.1f} ms  {name}")


TRACE_CATEGORIES = ["toplevel", "devtools.timeline", "disabled-by-default-devtools.timeline",
                    "blink", "v8", "cc"]  # fmt: skip


def trace(where: Panel | Cell, stamps: Stamps, settle: float, question: str,
          top: int = 12) -> None:  # fmt: skip
    """A Chromium trace of one turn: the renderer main thread's time by event, self time."""
    page = where.page
    browser = page.context.browser
    assert browser is not None
    where.prepare(question, new=True)
    page.wait_for_timeout(500)
    ends = stamps.ends()
    browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
    where.go()
    stamps.wait_end(ends)
    time.sleep(settle)
    data = json.loads(browser.stop_tracing())
    events = data["traceEvents"] if isinstance(data, dict) else data
    mains = {(e["pid"], e["tid"]) for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"
             and e.get("args", {}).get("name") == "CrRendererMain"}  # fmt: skip
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    main = max(mains, key=lambda k: sum(1 for e in spans if (e["pid"], e["tid"]) == k))
    spans = sorted((e for e in spans if (e["pid"], e["tid"]) == main),
                   key=lambda e: (e["ts"], -e["dur"]))  # fmt: skip
    own: dict[str, float] = {}
    stack: list[tuple[str, float]] = []
    busy = 0.0
    for event in spans:
        start, end = event["ts"], event["ts"] + event["dur"]
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end <= stack[-1][1]:
            own[stack[-1][0]] = own.get(stack[-1][0], 0.0) - event["dur"] / 1000
        elif not stack:
            busy += event["dur"] / 1000
        else:
            continue  # overlaps its parent's end: not nested, left out
        own[event["name"]] = own.get(event["name"], 0.0) + event["dur"] / 1000
        stack.append((event["name"], end))
    print(
        f"   trace of one '{question}' turn in the {where.name}: the renderer main thread busy "
        f"{busy:.0f} ms; its self time by event:"
    )
    for name, spent in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"     {spent:7.1f} ms  {name}")


# -- the report -----------------------------------------------------------------------------
def report_first(firsts: dict[str, list[dict[str, float]]]) -> None:
    names = list(firsts)
    print(
        f"1. The first chunk: from its arrival in the page to the frame that draws it "
        f"(ms, median / max; target <= {TARGET_FIRST_MS:.0f} ms to the task after the frame)"
    )
    print("   " + f"{'':36}" + "".join(f"{f'{n} ({len(firsts[n])} runs)':>22}" for n in names))
    for key in FIRST_ROWS:
        cells = []
        for n in names:
            values = [r[key] for r in firsts[n] if key in r]
            cells.append(f"{statistics.median(values):9.1f} / {max(values):7.1f}  " if values
                         else f"{'-':>22}")  # fmt: skip
        mark = "  <- target" if key == "received -> task after the frame" else ""
        print(f"   {key:36}" + "".join(f"{c:>22}" for c in cells) + mark)
    for n in names:
        value = statistics.median(r["received -> task after the frame"] for r in firsts[n])
        print(
            f"   {n}: {value / TARGET_FIRST_MS:.2f} of the target "
            f"({'met' if value <= TARGET_FIRST_MS else 'MISSED'})"
        )


def med(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report_flood(
    costs: dict[str, dict[str, list[dict[str, float]]]],
    idle: dict[str, dict[str, float]],
    seconds: float,
    repeat: int,
) -> None:
    rates = {where: {k: row[k] / row["seconds"] for k in SHORT.values()}
             for where, row in idle.items()}  # fmt: skip
    print(
        f"2. The page's cost of a 5,000-character answer: renderer main thread, ms "
        f"(CDP Performance.getMetrics deltas, medians of {repeat}); 'work' = script + layout "
        f"+ style; paced = over {seconds:g} s"
    )
    for where, rate in rates.items():
        if where == WITHOUT_LIVE:
            continue
        print(
            f"   idle page ({where}): {rate['script']:.1f} script, {rate['layout']:.2f} layout, "
            f"{rate['style']:.2f} style, {rate['task']:.1f} task ms a second "
            f"(over {idle[where]['seconds']:.1f} s; 'net' takes that share of a window out)"
        )
    if WITHOUT_LIVE in costs:
        print(f"   {WITHOUT_LIVE}: the same cell, its updates without the markup of nbchat's live "
              "renderer (text/html only: JupyterLab replaces the whole answer each time)")
    print(
        f"   {'where':7}{'turn':24}{'window s':>9}{'msgs':>6}{'KB in':>8}{'script':>8}"
        f"{'layout':>8}{'style':>7}{'task':>8}{'work':>8}{'net work':>9}{'cpu':>7}"
    )

    def work(row: dict[str, float]) -> float:
        return row["script"] + row["layout"] + row["style"]

    def net(row: dict[str, float], where: str) -> float:
        rate = rates[where]
        return work(row) - row["seconds"] * (rate["script"] + rate["layout"] + rate["style"])

    for where, kinds in costs.items():
        for label, _ in KINDS:
            rows = kinds[label]
            late = sum(r["late"] > 0 for r in rows)
            print(
                f"   {where:7}{label:24}{med(rows, 'seconds'):9.2f}{med(rows, 'messages'):6.0f}"
                f"{med(rows, 'kb'):8.1f}{med(rows, 'script'):8.1f}{med(rows, 'layout'):8.1f}"
                f"{med(rows, 'style'):7.1f}{med(rows, 'task'):8.1f}"
                f"{statistics.median(work(r) for r in rows):8.1f}"
                f"{statistics.median(net(r, where) for r in rows):9.1f}{med(rows, 'cpu'):7.1f}"
                + (f"   ({late} window(s) grown: the page was late)" if late else "")
            )
    print(f"   ratios, streamed / one chunk, of the medians (target <= {TARGET_FLOOD} on work)")
    for where, kinds in costs.items():
        for streamed, once in PAIRS:
            a, b = kinds[streamed], kinds[once]
            parts = [f"{key} {med(a, key) / max(med(b, key), 1e-3):5.2f}x"
                     for key in ("script", "layout", "style", "task", "cpu")]  # fmt: skip
            works = [statistics.median(work(r) for r in rows) for rows in (a, b)]
            nets = [max(statistics.median(net(r, where) for r in rows), 1e-3) for rows in (a, b)]
            ratio = works[0] / works[1]
            print(
                f"   {where:7}{streamed + ' / ' + once:44} work {ratio:5.2f}x "
                f"(net {nets[0] / nets[1]:5.2f}x)  {', '.join(parts)}  "
                f"{'met' if ratio <= TARGET_FLOOD else 'MISSED'}"
            )
            more = med(a, "messages") - med(b, "messages")
            print(
                f"   {'':50}the streamed turn: {works[0] - works[1]:+.0f} ms of work, "
                f"{more:+.0f} kernel messages ({(works[0] - works[1]) / max(more, 1):.2f} ms "
                f"each)"
            )
    if WITHOUT_LIVE in costs:
        print(f"   side by side: cell / {WITHOUT_LIVE}, the same turns, of the medians")
        for streamed, _ in PAIRS:
            a, b = costs["cell"][streamed], costs[WITHOUT_LIVE][streamed]
            ratio = statistics.median(work(r) for r in a) / statistics.median(work(r) for r in b)
            task, cpu = (med(a, key) / med(b, key) for key in ("task", "cpu"))
            print(f"   {streamed:24} work {ratio:5.2f}x, task {task:5.2f}x, cpu {cpu:5.2f}x")


# -- the run --------------------------------------------------------------------------------
def main() -> None:
    options = _arguments()
    wheres = ["panel", "cell"] if options.only is None else [options.only]
    with tempfile.TemporaryDirectory(prefix="nbchat-acp-browser-") as folder, \
            _alarm(options.deadline):  # fmt: skip
        base = Path(folder)
        stamps = Stamps(base / "stamps")
        (base / "script.json").write_text(json.dumps(script(options.runs + 1, options.seconds)))
        (base / "agent.py").write_text(WRAPPER)
        config = base / "lab" / "config" / "nbchat"  # the server's JUPYTER_CONFIG_DIR
        config.mkdir(parents=True)
        entry = {"command": sys.executable, "args": [str(base / "agent.py"),
                                                     str(base / "script.json")],
                 "env": {"BENCH_ACP_STAMPS": str(stamps.path)}}  # fmt: skip
        (config / "agents.json").write_text(json.dumps({"agentServers": {"scripted": entry}}))
        env = {"NBCHAT_ACP_ADMIN_CONFIG": str(base / "no-admin-agents.json")}
        with agent_server(base, env=env) as lab, sync_playwright() as pw:
            browser = launch_chromium(pw)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.add_init_script(INIT)
            nb = open_notebook(page, lab, [SETUP, PANEL_CELL, "# asked here", "# end"],
                               name="acp-browser")  # fmt: skip
            nb.run_cell(0)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Performance.enable", {"timeDomain": "timeTicks"})
            RENDERER[0] = find_renderer(page)
            firsts: dict[str, list[dict[str, float]]] = {}
            costs: dict[str, dict[str, list[dict[str, float]]]] = {}
            idle: dict[str, dict[str, float]] = {}
            for name in wheres:
                if name == "panel":
                    where: Panel | Cell = Panel(nb).open()
                else:
                    page.evaluate(_JS_CLEAR, [nb.path, 1])  # the panel leaves the page
                    where = Cell(nb)
                page.wait_for_timeout(1000)
                rows = [first_chunk(where, stamps, n) for n in range(options.runs + 1)]
                firsts[name] = rows[1:]  # the first one starts the agent's process
                print(
                    f"   ({name}: first chunk runs done; the first, left out: "
                    f"{rows[0]['received -> task after the frame']:.1f} ms)",
                    flush=True,
                )
                idle[name] = idle_cost(page, cdp, options.seconds + 2)
                # The cell also without nbchat's live renderer, round by round: side by side.
                variants = [name, WITHOUT_LIVE] if isinstance(where, Cell) else [name]
                for variant in variants:
                    costs[variant] = {label: [] for label, _ in KINDS}
                idle[WITHOUT_LIVE] = idle[name]
                for round_ in range(options.repeat):
                    order = KINDS[round_ % len(KINDS) :] + KINDS[: round_ % len(KINDS)]
                    if round_ % 2:
                        order.reverse()
                    for variant in variants[:: -1 if round_ % 2 else 1]:
                        if isinstance(where, Cell):
                            where.live(variant != WITHOUT_LIVE)
                        for label, question in order:
                            costs[variant][label].append(turn_cost(where, cdp, stamps, question,
                                                                   options.settle))  # fmt: skip
                    print(f"   ({name}: round {round_ + 1} of {options.repeat} done)", flush=True)
                if isinstance(where, Cell):
                    where.live(True)
                if options.trace:
                    trace(where, stamps, options.settle, "drip thousand")
                    trace(where, stamps, options.settle, "drip once")
                if options.profile and isinstance(where, Panel):
                    profile(where, cdp, stamps, options.settle)
            browser.close()
    report_first(firsts)
    report_flood(costs, idle, options.seconds, options.repeat)


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """The run stops by itself: SIGALRM after ``seconds`` ends it (the server, its kernels,
    their agents with it)."""

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
    parser.add_argument("--runs", type=int, default=8, help="first-chunk runs in each place")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the four turns")
    parser.add_argument("--seconds", type=float, default=5.0, help="the paced turns' length")
    parser.add_argument(
        "--settle",
        type=float,
        default=1.5,
        help="seconds after the agent's turn ended that its window goes on",
    )
    parser.add_argument("--only", choices=("panel", "cell"))
    parser.add_argument(
        "--profile", action="store_true", help="a V8 CPU profile of one paced turn in the panel"
    )
    parser.add_argument(
        "--trace",
        action="store_true",
        help="a Chromium trace of a paced turn of each kind, in each place",
    )
    parser.add_argument("--deadline", type=float, default=900, help="seconds before giving up")
    return parser.parse_args()


if __name__ == "__main__":
    main()
