"""How long reading a notebook for a model takes: 300 cells with real outputs, as text.

Builds a 300-cell notebook whose outputs are what pandas, matplotlib and a failing cell
write (an HTML table with its text, a PNG figure, a coloured traceback, a progress bar,
stdout), then prints, as medians of ``--repeat`` runs:

- reading the notebook into the model's text (:func:`nbchat.context.notebook.cells_text`,
  bounded at 60,000 characters as every read is; it stops at the bound and says where to
  read on) — target <= 50 ms;
- every cell converted, with no bound (what the bound saves);
- one outside agent's ``read_cells`` page of 50 cells;
- ``json.loads`` of the saved file, for scale (what opening the notebook costs at all).

Run: ``.venv/bin/python benchmarks/notebook_read.py [--cells 300] [--repeat 9]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import time

import nbformat

from nbchat.context.notebook import cells_text

TRACEBACK = [
    "\x1b[0;31m-------------------------------------------------------------------\x1b[0m",
    "\x1b[0;31mKeyError\x1b[0m                                  Traceback (most recent call last)",
    "Cell \x1b[0;32mIn[7], line 1\x1b[0m\n\x1b[0;32m----> 1\x1b[0m "
    "df[\x1b[38;5;124m'revenue'\x1b[39m]",
    *[f"File \x1b[0;32m/site-packages/pandas/core/frame.py:{n}\x1b[0m, in \x1b[0;36mDataFrame."
      f"__getitem__\x1b[0;34m(self, key)\x1b[0m" for n in range(3800, 3830)],
    "\x1b[0;31mKeyError\x1b[0m: 'revenue'",
]


def notebook(cells: int) -> dict:
    """A notebook of ``cells`` cells, their outputs of the kinds real notebooks hold."""
    import pandas as pd

    frame = pd.DataFrame({"city": [f"city{n}" for n in range(30)], "price": range(30)})
    png = base64.b64encode(os.urandom(40_000)).decode()  # a figure's size, as saved
    kinds = [
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/html": frame.to_html(), "text/plain": frame.to_string()}},
        {"output_type": "display_data", "metadata": {},
         "data": {"image/png": png, "text/plain": "<Figure size 640x480 with 1 Axes>"}},
        {"output_type": "error", "ename": "KeyError", "evalue": "'revenue'",
         "traceback": TRACEBACK},
        {"output_type": "stream", "name": "stderr",
         "text": "".join(f"\r{n}%|{'#' * (n // 10)}| {n}/100" for n in range(101)) + "\n"},
        {"output_type": "stream", "name": "stdout", "text": "rows: 30\n" * 40},
    ]
    book = nbformat.v4.new_notebook()
    for n in range(cells):
        if n % 6 == 5:
            book.cells.append(nbformat.v4.new_markdown_cell(f"## Step {n}\nWhat this does."))
            continue
        cell = nbformat.v4.new_code_cell("df = load()\n" * 12, execution_count=n + 1)
        cell.outputs = [nbformat.from_dict(kinds[n % len(kinds)])]
        book.cells.append(cell)
    return json.loads(nbformat.writes(book))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    book = notebook(options.cells)
    saved = json.dumps(book)

    def timed(work) -> float:  # type: ignore[no-untyped-def]
        runs = []
        for _ in range(options.repeat):
            started = time.perf_counter()
            work()
            runs.append(time.perf_counter() - started)
        return statistics.median(runs) * 1000

    whole = timed(lambda: cells_text(book, "sales.ipynb", 0, options.cells))
    unbounded = timed(lambda: cells_text(book, "sales.ipynb", 0, options.cells, read_chars=10**9))
    page = timed(lambda: cells_text(book, "sales.ipynb", 0, 50))
    opened = timed(lambda: json.loads(saved))
    text = cells_text(book, "sales.ipynb", 0, options.cells)
    print(f"a {options.cells}-cell notebook with outputs ({len(saved) / 1e6:.1f} MB saved), "
          f"medians of {options.repeat} runs:")
    last = text.rsplit('<cell index="', 1)[-1].split('"', 1)[0]
    print(f"  the notebook as the model reads it {whole:5.1f} ms   (target <= 50; cells 0-{last}, "
          f"{len(text):,} characters: the bound)")
    print(f"  every cell, no bound            {unbounded:7.1f} ms")
    print(f"  one read_cells page of 50       {page:7.1f} ms")
    print(f"  json.loads of the saved file    {opened:7.1f} ms   (for scale)")


if __name__ == "__main__":
    main()
