"""The panel in real JupyterLab + Chromium: streaming backlog, idle cost, first paint.

Starts an isolated JupyterLab (the browser tests' helpers) and headless
Chromium, opens the panel in a cell, and measures:

- streaming 5,000 tokens at 1,000 a second: when the scripted server sent
  its last token, and when the page showed it (the backlog; target: none);
- the kernel's CPU a second while the panel is visible and idle, with the
  poll and without it (``poll_seconds = 0``), over ``--idle-seconds`` each
  (target <= 2 ms a second);
- first paint of a ``--turns``-turn thread: from the cell run to its last
  answer on the page.

Run: ``.venv/bin/python benchmarks/panel_browser.py [--turns 1000] [--idle-seconds 20]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright  # noqa: E402
from tests.e2e.jupyterlab import launch_chromium, open_notebook, start_jupyterlab  # noqa: E402

from nbchat import Chat  # noqa: E402
from nbchat.testing import Reply, ScriptedServer  # noqa: E402

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
from nbchat.jupyter.panel.widget import ChatPanel
"""
CPU = """\
import os
def cpu_ms():
    with open(f"/proc/{os.getpid()}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
"""
ANSWER = "A paragraph of a typical answer, with `code` and *emphasis*, " * 12


def main() -> None:
    options = _arguments()
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply("", tokens=5000, delay=0.001, when="stream"),
        Reply("Short.", when=lambda body: "conversation title" in str(body["messages"][0])),
    ) as server, start_jupyterlab(Path(root) / "lab") as lab, sync_playwright() as pw:
        store = Path(root) / "store"
        long = _long_thread(Chat(base_url=server.url, model="scripted-small", store=store),
                            options.turns)
        browser = launch_chromium(pw)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        nb = open_notebook(page, lab, [
            SETUP.format(url=server.url, store=str(store)) + CPU,
            "panel = ChatPanel(page_size=20)\npanel",
            f"shown = ChatPanel(thread_id={long})\nshown",
        ], name="panel-browser")
        nb.run_cell(0)
        _first_paint(nb, options.turns)
        nb.run_cell(1)
        panel = nb.output(1).locator(".nbchat-panel")
        panel.wait_for(timeout=30_000)
        _streaming(nb, panel, server)
        _idle(nb, options.idle_seconds)
        browser.close()


def _long_thread(chat: Chat, turns: int) -> int:
    thread = chat.new_thread()
    for n in range(turns):
        chat.append_response(thread, f"Question {n}: how does this work?", ANSWER, title="Long")
    return thread


def _first_paint(nb, turns: int) -> None:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    nb.run_cell(2, wait=False)
    last = nb.output(2).locator(".nbchat-from-person").last
    last.filter(has_text=f"Question {turns - 1}:").wait_for(state="attached", timeout=60_000)
    print(f"first paint of a {turns}-turn thread in the browser: "
          f"{(time.perf_counter() - started) * 1000:.0f} ms from the cell run to its last "
          f"question on the page (the cell's own round trip included)")


def _streaming(nb, panel, server: ScriptedServer) -> None:  # type: ignore[no-untyped-def]
    box = panel.locator("textarea")
    box.fill("stream 5,000 tokens please")
    ended: list[float] = []

    def watch() -> None:
        server.wait_for(lambda: any(r.completed for r in server.chat_requests), timeout=120)
        ended.append(time.perf_counter())

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.perf_counter()
    box.press("Enter")
    panel.locator(".nbchat-from-model", has_text="word4999").wait_for(
        state="attached", timeout=120_000)
    shown = time.perf_counter()
    watcher.join()
    print(f"streaming 5,000 tokens at 1,000/s: the server sent the last one "
          f"{ended[0] - started:.1f} s after Enter, the page showed it "
          f"{shown - started:.1f} s after Enter: a backlog of {(shown - ended[0]) * 1000:.0f} ms")


def _idle(nb, seconds: float) -> None:  # type: ignore[no-untyped-def]
    _run(nb, "shown.close()")  # one panel on the page
    nb.page.wait_for_timeout(2000)
    results = {}
    for label, poll in (("with the poll", 1.0), ("without it", 0.0)):
        _run(nb, f"panel.poll_seconds = {poll}\nbefore = cpu_ms()")
        nb.page.wait_for_timeout(seconds * 1000)
        _run(nb, "print(f'{cpu_ms() - before:.1f}')")
        text = nb.output(0).inner_text().strip().splitlines()[-1]
        results[label] = float(text) / seconds
    print("kernel CPU while the panel is visible and idle: "
          + ", ".join(f"{ms:.2f} ms a second {label}" for label, ms in results.items())
          + " (/proc counts 10 ms ticks; the cell runs that measure it included)")


def _run(nb, source: str) -> None:  # type: ignore[no-untyped-def]
    """Run ``source`` in cell 0 (its output is read back from there)."""
    nb.page.evaluate(
        """([path, source]) => {
            const app = window.jupyterapp;
            const panel = [...app.shell.widgets('main')].find(w => w.context
                && w.context.path === path);
            panel.content.model.sharedModel.cells[0].setSource(source);
        }""", [nb.path, source])
    nb.run_cell(0)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=20)
    return parser.parse_args()


if __name__ == "__main__":
    main()
