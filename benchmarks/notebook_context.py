"""How long ``@notebook`` takes to build: a 300-cell notebook with real outputs, as context.

Builds the notebook of ``benchmarks/notebook_read.py`` (HTML tables, figures, coloured
tracebacks, progress bars, stdout), its figures real PNGs drawn by matplotlib, and
prints, as medians of ``--repeat`` runs side by side:

- ``@notebook`` built (:func:`nbchat.context.notebook.notebook_items`: the cells' text
  bounded at 8,000 tokens, scrubbed, the out-of-order run named, the newest four images
  decoded as pictures) — target <= 50 ms;
- the same read from the saved file, as without a page (``json.load`` included);
- ``@cells 100-120``;
- ``json.loads`` of the saved file, for scale (what opening the notebook costs at all).

Run: ``.venv/bin/python benchmarks/notebook_context.py [--cells 300] [--repeat 9]``.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebook_read import notebook  # noqa: E402

from nbchat.context.notebook import notebook_items  # noqa: E402
from nbchat.jupyter.magic._notebook_context import CHARS_PER_TOKEN, NOTEBOOK_BUDGET  # noqa: E402

matplotlib.use("Agg")


def figure_png() -> str:
    """A figure as Jupyter saves it: a 640×480 PNG, base64."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(range(50), [n * n for n in range(50)])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    book, png = notebook(options.cells), figure_png()
    for cell in book["cells"]:
        for output in cell.get("outputs", []):
            if "image/png" in output.get("data", {}):
                output["data"]["image/png"] = png
    saved = json.dumps(book)
    chars = NOTEBOOK_BUDGET * CHARS_PER_TOKEN

    def timed(work) -> float:  # type: ignore[no-untyped-def]
        runs = []
        for _ in range(options.repeat):
            started = time.perf_counter()
            work()
            runs.append(time.perf_counter() - started)
        return statistics.median(runs) * 1000

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "sales.ipynb"
        path.write_text(saved)
        where = "the notebook open in JupyterLab"
        built = timed(lambda: notebook_items(book, where, chars=chars))
        from_file = timed(lambda: notebook_items(json.loads(path.read_text()),
                                                 "the saved notebook sales.ipynb", chars=chars))
        part = timed(lambda: notebook_items(book, where, 100, 120, chars=chars))
        opened = timed(lambda: json.loads(saved))
    items = notebook_items(book, where, chars=chars)
    print(f"a {options.cells}-cell notebook with outputs ({len(saved) / 1e6:.1f} MB saved), "
          f"medians of {options.repeat} runs:")
    print(f"  @notebook built                 {built:7.1f} ms   (target <= 50; "
          f"{len(items[0].text):,} characters, {len(items) - 1} images)")
    print(f"  @notebook from the saved file   {from_file:7.1f} ms")
    print(f"  @cells 100-120                  {part:7.1f} ms")
    print(f"  json.loads of the saved file    {opened:7.1f} ms   (for scale; "
          f"@notebook is {built / opened:.1f}x it)")


if __name__ == "__main__":
    main()
