"""What streaming a math-heavy answer into a cell costs the page, against showing it once.

Starts an isolated JupyterLab (the browser tests' helpers) and headless
Chromium, and streams an answer with ``--formulas`` formulas over
``--seconds`` from the scripted server into a ``%%chat`` cell (live), then
shows the same thread once with ``%chat --show``. For each it sums the page's
long tasks (a PerformanceObserver of ``longtask`` entries: the time the page
could not answer a click), from the cell's run until the page has been quiet
for two seconds, and prints both and the ratio streaming / once (target <=
1.5), with the typeset formulas counted on the page.

Run: ``.venv/bin/python benchmarks/math_stream_browser.py [--formulas 300] [--seconds 4.5]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Page, sync_playwright  # noqa: E402
from tests.e2e.jupyterlab import (  # noqa: E402
    NotebookPage,
    launch_chromium,
    open_notebook,
    start_jupyterlab,
)
from tests.e2e.test_math_stream import math_answer, setup_cell  # noqa: E402

from nbchat.testing import Reply, ScriptedServer  # noqa: E402

OBSERVE = """() => {
    window.__longtasks = [];
    new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longtasks.push([e.startTime, e.duration]);
    }).observe({type: "longtask"});
}"""
SINCE = """(since) => {
    const tasks = window.__longtasks.filter(([start]) => start >= since);
    const last = tasks.length ? Math.max(...tasks.map(([s, d]) => s + d)) : since;
    return {now: performance.now(), blocked: tasks.reduce((sum, [, d]) => sum + d, 0),
            longest: Math.max(0, ...tasks.map(([, d]) => d)), last, count: tasks.length,
            tasks: tasks.map(([s, d]) => [Math.round(s - since), Math.round(d)])};
}"""
QUIET_MS = 2000


def measure(nb: NotebookPage, index: int, timeout: float = 300) -> dict[str, float]:
    """Run cell ``index``; the long tasks from then until the page was quiet for a while."""
    page: Page = nb.page
    since = page.evaluate("() => performance.now()")
    nb.run_cell(index, timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        state = page.evaluate(SINCE, since)
        if state["now"] - state["last"] > QUIET_MS and nb.is_kernel_idle():
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page was not quiet within {timeout} s")
        time.sleep(0.5)
    state["formulas"] = nb.output(index).locator("mjx-container").count()
    return state


def main() -> None:
    options = _arguments()
    answer = math_answer(options.formulas)
    chunks = len(answer.split(" "))
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply(answer, delay=options.seconds / chunks, when="math please"),
        Reply("Math", when=lambda body: "conversation title" in str(body["messages"][0])),
    ) as server, start_jupyterlab(Path(root) / "lab") as lab, sync_playwright() as pw:
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        nb = open_notebook(page, lab, [
            setup_cell(server.url, str(Path(root) / "store")),
            "%%chat -n\nmath please",
            "%chat --show",
        ], name="math-stream")
        nb.run_cell(0)
        nb.output(0).locator("mjx-container").first.wait_for(timeout=60_000)  # MathJax loaded
        page.evaluate(OBSERVE)
        streamed = measure(nb, 1)
        once = measure(nb, 2)
        browser.close()
    print(f"{options.formulas} formulas streamed over {options.seconds:g} s "
          f"({chunks} chunks), page long tasks:")
    for label, state in (("streamed live", streamed), ("shown once", once)):
        print(f"  {label:<14} {state['blocked'] / 1000:7.2f} s blocked in {state['count']:4.0f} "
              f"long tasks (longest {state['longest'] / 1000:.2f} s), "
              f"{state['formulas']:.0f} formulas typeset")
    if options.verbose:
        for label, state in (("streamed", streamed), ("once", once)):
            print(f"  {label} long tasks [ms after the run, ms long]: {state['tasks']}")
    ratio = streamed["blocked"] / max(once["blocked"], 1.0)
    print(f"  ratio streamed / once {ratio:7.2f} x   (target <= 1.5)")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formulas", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=4.5)
    parser.add_argument("--verbose", action="store_true", help="print every long task")
    return parser.parse_args()


if __name__ == "__main__":
    main()
