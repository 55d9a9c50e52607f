"""How much streaming an answer into a cell costs, in a real kernel.

Streams the same N-chunk answer from the scripted server (1) through
``%%chat`` in live mode and (2) through a bare httpx loop in a kernel cell that
only decodes the stream, as fast as the server sends it, and prints:

- the time ratio %%chat / bare loop (target <= 1.05), the same of the
  fastest run of each (what a machine that others load too disturbs least),
  and the ratio of the kernel's CPU time,
- the time from the server sending the first chunk to the first rendered
  update arriving on IOPub (target <= 50 ms),
- the size of the saved .ipynb (the final answer only) against the answer's.

Then streams it once more at a model's pace (``--paced-seconds``) and prints
the display messages per streamed second (target <= 12).

Run: ``.venv/bin/python benchmarks/stream_cell.py [--chunks 20000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kernel_helpers import CellRun, Kernel, kernel_env  # noqa: E402
from nbchat.testing import Reply, ScriptedServer  # noqa: E402

BARE_LOOP = """\
_started, _cpu = time.perf_counter(), time.process_time()
_parts = []
_body = {{"model": "scripted-small", "stream": True,
          "messages": [{{"role": "user", "content": "bench {pace}"}}]}}
with httpx.Client(timeout=60) as _client:
    with _client.stream("POST", {url!r} + "/chat/completions", json=_body) as _response:
        for _line in _response.iter_lines():
            if _line.startswith("data: ") and _line != "data: [DONE]":
                _choices = json.loads(_line[6:]).get("choices") or [{{}}]
                _parts.append(_choices[0].get("delta", {{}}).get("content") or "")
_answer = "".join(_parts)
print(time.perf_counter() - _started, time.process_time() - _cpu)
"""
CHAT = """\
_started, _cpu = time.perf_counter(), time.process_time()
get_ipython().run_cell_magic("chat", "-n", "bench {pace}")  # what %%chat -n runs
print(time.perf_counter() - _started, time.process_time() - _cpu)
"""


def main() -> None:
    options = _arguments()
    delay = options.paced_seconds / options.chunks
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply(tokens=options.chunks, when=_asked("bench fast")),
        Reply(tokens=options.chunks, delay=delay, when=_asked("bench paced")),
    ) as server:
        env = kernel_env(
            Path(root) / "kernel", NBCHAT_BASE_URL=server.url, NBCHAT_MODEL="scripted-small",
            NBCHAT_STORE=str(Path(root) / "store"), NBCHAT_USER="bench",
        )
        with Kernel(env) as kernel:
            kernel.ok("%load_ext nbchat\n%config ChatMagics.live = True\nimport httpx, json, time")
            kernel.ok("%chat warm up")  # imports, the pooled client, the first thread
            fast = [_measure(kernel, server, options.chunks, "fast")
                    for _ in range(options.repeat)]
            paced = _measure(kernel, server, options.chunks, "paced", bare=False)
    _report(fast, paced, options)


def _measure(kernel: Kernel, server: ScriptedServer, chunks: int, pace: str,
             *, bare: bool = True) -> dict[str, Any]:
    bare_time, bare_cpu = (
        map(float, kernel.ok(BARE_LOOP.format(url=server.url, pace=pace)).stdout.split())
        if bare else (0.0, 0.0)
    )

    first_chunk = _watch_first_chunk(server)
    arrivals: list[tuple[float, dict[str, Any]]] = []
    run = kernel.ok(CHAT.format(pace=pace), timeout=600,
                    on_message=lambda m, k: arrivals.append((time.perf_counter(), m)))
    chat, chat_cpu = map(float, run.stdout.split())
    first_chunk.join()
    displays = [(t, m) for t, m in arrivals if m["header"]["msg_type"] in
                ("display_data", "update_display_data")]
    first_text = next(t for t, m in displays if "word0" in m["content"]["data"].get(
        "text/html", ""))
    streamed = displays[-1][0] - displays[0][0]
    return {
        "bare": bare_time, "chat": chat, "bare_cpu": bare_cpu, "chat_cpu": chat_cpu,
        "displays": len(displays), "streamed": streamed,
        "first_update_ms": (first_text - first_chunk.at) * 1000,
        **_saved_size(run, chunks),
    }


def _asked(question: str) -> Any:
    """A rule for the question itself, not for the title request that follows it."""
    return lambda body: body["messages"][-1].get("content") == question


class _FirstChunk(threading.Thread):
    """Timestamps the moment the server has sent the first text chunk of the next chat."""

    def __init__(self, server: ScriptedServer) -> None:
        super().__init__(daemon=True)
        self.server, self.before, self.at = server, len(server.chat_requests), 0.0

    def run(self) -> None:
        def sent() -> bool:
            requests = self.server.chat_requests[self.before:]
            return bool(requests) and requests[0].chunks_sent >= 1

        self.server.wait_for(sent, timeout=60)
        self.at = time.perf_counter()


def _watch_first_chunk(server: ScriptedServer) -> _FirstChunk:
    watcher = _FirstChunk(server)
    watcher.start()
    return watcher


def _saved_size(run: CellRun, chunks: int) -> dict[str, int]:
    import nbformat

    cell = nbformat.v4.new_code_cell("%%chat -n\nbench")
    cell.outputs = [nbformat.v4.new_output("display_data", data=o["data"], metadata=o["metadata"])
                    for o in run.outputs if o["output_type"] == "display_data"]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    answer = cell.outputs[-1]["data"]["text/plain"]
    assert answer.split() == [f"word{i}" for i in range(chunks)], "the answer is incomplete"
    return {"ipynb_bytes": len(nbformat.writes(notebook).encode()),
            "answer_bytes": len(answer.encode()), "outputs": len(cell.outputs)}


def _report(fast: list[dict[str, Any]], paced: dict[str, Any],
            options: argparse.Namespace) -> None:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in fast)

    ratios = [r["chat"] / r["bare"] for r in fast]
    ratio = statistics.median(ratios)
    cpu_ratios = [r["chat_cpu"] / r["bare_cpu"] for r in fast]
    last = fast[-1]
    print(f"{options.chunks} chunks as fast as the server sends them ({options.repeat} runs, "
          f"medians):")
    print(f"  bare httpx loop in a cell     {median('bare'):7.3f} s   (timed in the kernel)")
    print(f"  %%chat, live                  {median('chat'):7.3f} s")
    print(f"  ratio                         {ratio:7.2f} x      (target <= 1.05; runs: "
          f"{', '.join(f'{r:.2f}' for r in ratios)})")
    best = min(r["chat"] for r in fast) / min(r["bare"] for r in fast)
    print(f"  ratio of the fastest runs     {best:7.2f} x")
    print(f"  kernel CPU ratio              {statistics.median(cpu_ratios):7.2f} x      (runs: "
          f"{', '.join(f'{r:.2f}' for r in cpu_ratios)})")
    print(f"  first chunk -> first update   {median('first_update_ms'):7.1f} ms     "
          f"(target <= 50)")
    print(f"  display messages              {median('displays'):7.0f}")
    print(f"  saved .ipynb                  {last['ipynb_bytes'] / 1024:7.1f} KB     "
          f"{last['outputs']} output; the answer is {last['answer_bytes'] / 1024:.1f} KB "
          f"(kept as text/html and text/plain)")
    print(f"{options.chunks} chunks at a model's pace:")
    print(f"  streamed for                  {paced['streamed']:7.2f} s")
    print(f"  display messages              {paced['displays']:7d}        "
          f"{paced['displays'] / paced['streamed']:.1f} per streamed second (target <= 12)")
    print(f"  first chunk -> first update   {paced['first_update_ms']:7.1f} ms")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--paced-seconds", type=float, default=5.0,
                        help="how long the paced stream should last (sleep overhead adds some)")
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args()


if __name__ == "__main__":
    main()
