"""Code suggestions: the latency nbchat's route adds, and the requests typing sends.

A real, isolated ``jupyter-lab`` with nbchat (``tests/e2e/jupyterlab.py``), its
server and kernels pointed at a scripted model server (``nbchat.testing``)
answering every suggestion request at once with a short suggestion.

1. Added latency: ``POST nbchat/complete`` through Jupyter Server (the route's
   auth, JSON checks, the thread that asks the endpoint, the NDJSON stream
   back) against the same fill-in-the-middle request sent directly with httpx
   to the scripted server (the path and body the route sent, read from the
   scripted server's log), both read to the end over kept-alive connections,
   interleaved; p50/p90 of each and the p50 difference (target: at most
   15 ms). Twice: with no notebook path (the route alone), and with a
   notebook whose kernel is running (the route also asks the kernel for the
   names and types of its variables).
2. Requests while typing: nbchat's provider enabled (default settings, so
   the default debounce) in a notebook cell in headless Chromium; code typed
   for ``--seconds`` at ~8 characters a second, steadily (a key every 125
   ms) and then in bursts (about the same average, with pauses of up to 0.8 s
   between words, as people type). Counts the suggestion requests the
   scripted server received while typing (target: at most 2 a second).

Run: ``python benchmarks/completion.py`` (``--pairs 40 --seconds 10``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent / "tests"))

from playwright.sync_api import sync_playwright  # noqa: E402

from e2e.jupyterlab import (  # noqa: E402
    JupyterLab,
    launch_chromium,
    open_notebook,
    start_jupyterlab,
)
from nbchat.testing import Reply, ScriptedServer  # noqa: E402

SUGGESTION = "a + b"
NOTEBOOK = "bench.ipynb"
SETTINGS = "lab/user-settings/@jupyterlab/completer-extension/inline-completer.jupyterlab-settings"
CODE = (
    "import numpy as np\n"
    "def moving_average(values, window=3):\n"
    "result = []\n"
    "for index in range(len(values) - window + 1):\n"
    "chunk = values[index:index + window]\n"
    "result.append(sum(chunk) / window)\n"
    "return result\n"
) * 4


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def read_all(client: httpx.Client, url: str, body: dict, headers: dict) -> tuple[float, bytes]:
    """Seconds from sending to the end of the streamed body, and the body."""
    start = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        data = response.read()
    return time.perf_counter() - start, data


def added_latency(lab: JupyterLab, server: ScriptedServer, pairs: int, path: str) -> dict:
    body = {"prefix": "def add(a, b):\n    return ", "suffix": "\n\nprint(add(1, 2))\n",
            "path": path, "cells": ["import math", "x = 1"], "language": "python",
            "model": "", "max_tokens": 64}  # fmt: skip
    route = f"{lab.url}/nbchat/complete"
    auth = {"Authorization": f"token {lab.token}"}
    root = server.url.removesuffix("/v1")
    with httpx.Client(timeout=30) as via_lab, httpx.Client(timeout=30) as direct:
        for _ in range(3):  # warm: the endpoint's form found and remembered, connections open
            _, answer = read_all(via_lab, route, body, auth)
        pieces = [json.loads(line) for line in answer.splitlines()]
        if "".join(p.get("text", "") for p in pieces) != SUGGESTION:
            raise SystemExit(f"the route did not answer the suggestion: {answer!r}")
        sent = [r for r in server.requests if r.method == "POST"][-1]
        fim_path, fim_body = sent.path, json.loads(sent.raw)
        lab_times, direct_times = [], []
        for index in range(pairs):
            order = [("lab", route, body, auth), ("direct", root + fim_path, fim_body, {})]
            if index % 2:
                order.reverse()
            for name, url, payload, headers in order:
                seconds, _ = read_all(via_lab if name == "lab" else direct, url, payload, headers)
                (lab_times if name == "lab" else direct_times).append(seconds * 1000)
    return {"form": fim_path, "context": [line for line in fim_body.get("prompt", "").splitlines()
                                          if line.startswith("# ") and line.endswith(":")],
            "lab": lab_times, "direct": direct_times}  # fmt: skip


def type_like_a_person(page, seconds: float, bursty: bool, rng: random.Random) -> int:
    """Type CODE into the focused cell for `seconds` at ~8 characters a second; keys typed.

    Keys go out on a schedule (not a sleep after each key, which the key's own
    round trip would lengthen); waiting through Playwright lets it see requests.
    """
    start = time.monotonic()
    due = 0.0
    typed = 0
    for char in CODE:
        if due >= seconds:
            break
        wait = start + due - time.monotonic()
        if wait > 0:
            page.wait_for_timeout(wait * 1000)
        if char == "\n":
            page.keyboard.press("Enter")
        else:
            page.keyboard.type(char)
        typed += 1
        if not bursty:
            due += 0.125
        elif char in " \n(":
            due += rng.uniform(0.2, 0.8)  # a pause between words
        else:
            due += rng.uniform(0.02, 0.07)  # a word typed quickly
    return typed


def watch_requests(page) -> list[float]:
    """When the page sent each request to nbchat/complete (seen while Playwright waits)."""
    sent: list[float] = []

    def seen(request) -> None:
        if request.url.split("?")[0].endswith("/nbchat/complete"):
            sent.append(time.monotonic())

    page.on("request", seen)
    return sent


def requests_while_typing(lab: JupyterLab, server: ScriptedServer, seconds: float) -> list[dict]:
    settings = lab.root_dir.parent / "config" / SETTINGS
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"providers": {"nbchat": {"enabled": True}}}))
    results = []
    rng = random.Random(7)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for bursty in (False, True):
                page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
                nb = open_notebook(page, lab, ["x = 1", ""], name=f"typing-{int(bursty)}")
                nb.cell(1).locator(".cm-content").click()
                sent = watch_requests(page)
                before = len([r for r in server.requests if r.method == "POST"])
                start = time.monotonic()
                typed = type_like_a_person(page, seconds, bursty, rng)
                elapsed = time.monotonic() - start
                during = len([r for r in server.requests if r.method == "POST"]) - before
                page.wait_for_timeout(2000)  # the pause after typing: one more request
                after = len([r for r in server.requests if r.method == "POST"]) - before
                gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
                results.append({"bursty": bursty, "typed": typed, "seconds": elapsed,
                                "during": during, "after": after,
                                "browser": len(sent),
                                "min_gap": min(gaps) if gaps else None})  # fmt: skip
                page.context.close()
        finally:
            browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.script(Reply(SUGGESTION))
        env = {"NBCHAT_BASE_URL": server.url, "NBCHAT_MODEL": "scripted-small",
               "NBCHAT_STORE": str(Path(tmp) / "store")}  # fmt: skip
        with start_jupyterlab(Path(tmp), env=env) as lab:
            rows = [("no notebook", added_latency(lab, server, args.pairs, ""))]
            with sync_playwright() as playwright:  # a notebook with a running kernel
                browser = launch_chromium(playwright)
                page = browser.new_page()
                open_notebook(page, lab, ["import math\nx = 1"], name="bench")
                rows.append(("with a kernel", added_latency(lab, server, args.pairs, NOTEBOOK)))
                browser.close()
            typing = requests_while_typing(lab, server, args.seconds)

    print(f"1. Added latency, nbchat/complete vs the same request direct ({args.pairs} pairs, "
          f"interleaved, ms to the end of the stream)")  # fmt: skip
    for name, row in rows:
        lab_p50, direct_p50 = statistics.median(row["lab"]), statistics.median(row["direct"])
        print(f"   {name:14} endpoint form {row['form']}; context sent: {row['context'] or 'none'}")
        print(f"   {'':14} via Jupyter p50 {lab_p50:6.1f} p90 {percentile(row['lab'], 0.9):6.1f} | "
              f"direct p50 {direct_p50:6.1f} p90 {percentile(row['direct'], 0.9):6.1f} | "
              f"added p50 {lab_p50 - direct_p50:5.1f} ms (target <= 15)")  # fmt: skip
    print(f"2. Requests while typing ~8 characters a second for {args.seconds:g} s "
          f"(default debounce)")  # fmt: skip
    for row in typing:
        rate = row["during"] / row["seconds"]
        kind = "bursty" if row["bursty"] else "steady"
        gap = f"{row['min_gap'] * 1000:.0f} ms" if row["min_gap"] is not None else "n/a"
        print(f"   {kind:7} {row['typed']} keys in {row['seconds']:.1f} s "
              f"({row['typed'] / row['seconds']:.1f}/s): {row['during']} requests while typing "
              f"= {rate:.2f}/s (target <= 2), {row['after']} with the pause after; "
              f"browser sent {row['browser']}, closest two {gap} apart")  # fmt: skip


if __name__ == "__main__":
    main()
