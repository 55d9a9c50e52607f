"""How fast the notebook agent's kernel side is: reading, diffing a cell, undoing a turn.

Prints, as medians of ``--repeat`` runs:

- ``read_cells`` of a 300-cell notebook with outputs (benchmarks/notebook_read.py's), from
  the copy of the live notebook the page keeps in the kernel — target <= 50 ms; and from
  the saved file, for scale;
- the diff of a 2,000-line cell with 40 changed places: its chunks and its unified diff;
- undoing a turn that changed 100 cells: through the page (one comm message a cell) and in
  the saved file — target <= 300 ms.

The page is stood for by a comm that only records what it is sent (the page's own drawing
is benchmarks/proposal_view.py's). The store is a real TinyDB ThreadStore in a temp folder.

Run: ``.venv/bin/python benchmarks/notebook_agent.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from notebook_read import notebook  # noqa: E402  (the same 300 cells)

from nbchat.context.notebook import cells_text  # noqa: E402
from nbchat.context.proposals import chunks, unified  # noqa: E402
from nbchat.jupyter.notebook._cells import LiveNotebook  # noqa: E402
from nbchat.jupyter.notebook._lab_bridge import NotebookBridge  # noqa: E402
from nbchat.jupyter.notebook._undo import recorder, undo_turn  # noqa: E402
from nbchat.store.tinydb import ThreadStore  # noqa: E402


class Recording:
    """A comm that keeps what it is sent: the page, less its drawing."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)


def attached(book: dict[str, Any]) -> NotebookBridge:
    """A bridge a page has answered, holding ``book`` as the page's live copy."""
    bridge = NotebookBridge("bench.ipynb")
    bridge._comm, bridge._attached, bridge._client = Recording(), True, "page"
    bridge._on_cells({"op": "cells", "client": "page", "order": [c["id"] for c in book["cells"]],
                      "cells": {c["id"]: c for c in book["cells"]}})  # fmt: skip
    return bridge


def timed(work: Any, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


def changed_turn(store: ThreadStore, live: LiveNotebook, cells: list[dict[str, Any]]) -> int:
    """A thread whose turn 0 edited the first 100 code cells (applied, and kept for undo)."""
    thread = store.new_thread("bench")
    store.append_response(thread, "edit them", "done")
    keep = recorder(store)
    for cell in [c for c in cells if c["cell_type"] == "code"][:100]:
        before = "".join(cell["source"])
        change = {"op": "edit", "cell_id": cell["id"], "source": before + "# edited\n",
                  "expected": before, "metadata": {"nbchat": {"thread": thread, "turn": 0}}}
        live.change(change)
        keep({**change, "before": {"id": cell["id"], "source": before}, "at": 0.0})
    return thread


def undo_times(book: dict[str, Any], repeat: int, *, in_file: bool) -> float:
    runs = []
    for _ in range(repeat):
        folder = tempfile.mkdtemp(prefix="nbchat-bench-")
        store = ThreadStore(os.path.join(folder, "store"), user="bench")
        if in_file:
            path = os.path.join(folder, "bench.ipynb")
            Path(path).write_text(json.dumps(book))
            live = LiveNotebook(file=path)
        else:
            bridge = attached(json.loads(json.dumps(book)))
            live = LiveNotebook(bridge=lambda bridge=bridge: bridge)
        thread = changed_turn(store, live, live.notebook()["cells"])
        started = time.perf_counter()
        summary = undo_turn(store, live, thread, 0)
        runs.append(time.perf_counter() - started)
        assert summary.startswith("Turn 0's changes") and "Kept" not in summary, summary
    return statistics.median(runs) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    book = notebook(300)
    for index, cell in enumerate(book["cells"]):
        cell["id"] = f"cell{index:03d}"
    bridge = attached(book)
    live = LiveNotebook(bridge=lambda: bridge)
    folder = tempfile.mkdtemp(prefix="nbchat-bench-")
    saved = os.path.join(folder, "bench.ipynb")
    Path(saved).write_text(json.dumps(book))
    from_file = LiveNotebook(file=saved)

    def read(source: LiveNotebook) -> str:
        return cells_text(source.notebook(), source.where(), 0, 300)

    live_read = timed(lambda: read(live), options.repeat)
    file_read = timed(lambda: read(from_file), options.repeat)
    base = "".join(f"value_{n} = compute({n})\n" for n in range(2000))
    proposed = "".join(line.replace("compute", "compute_fast") if n % 50 == 0 else line
                       for n, line in enumerate(base.splitlines(keepends=True)))  # 40 apart
    count = len(chunks(base, proposed))
    diffed = timed(lambda: unified(base, proposed, "cell big"), options.repeat)
    page_undo = undo_times(book, options.repeat, in_file=False)
    file_undo = undo_times(book, max(3, options.repeat // 2), in_file=True)
    print(f"medians of {options.repeat} runs:")
    print(f"  read_cells of 300 cells, live copy   {live_read:6.1f} ms   (target <= 50)")
    print(f"  read_cells of 300 cells, saved file  {file_read:6.1f} ms   (for scale)")
    print(f"  diff of a 2,000-line cell ({count} chunks) {diffed:6.1f} ms")
    print(f"  undo of a turn that changed 100 cells, page   {page_undo:6.1f} ms   (target <= 300)")
    print(f"  undo of a turn that changed 100 cells, file   {file_undo:6.1f} ms")


if __name__ == "__main__":
    main()
