"""A notebook as a model reads it: a real notebook's outputs of every kind, as text, scrubbed
before any cut, bounded, delimited as data, with the cells run out of order named.

The notebook is executed by nbclient in a real kernel, so the outputs are what pandas,
matplotlib, ipywidgets and IPython write, not hand-made dicts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import nbformat
import pytest
from nbclient import NotebookClient

from nbchat.base.content import head_and_tail
from nbchat.context.notebook import CELL_CHARS, DATA_NOTE, cells_text, out_of_order

SECRET = "tok-" + "q7Zr9" * 8  # the value of a secret-named variable in the kernel
CELLS = [
    "import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'price': [3.5, 2.0]})\ndf",
    "from IPython.display import HTML\nHTML('<table><tr><th>a</th><th>b</th></tr>"
    "<tr><td>1</td><td>2</td></tr></table><script>alert(1)</script>')",
    "import matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots()\nax.plot([1, 2, 3])\nfig",
    "import ipywidgets\nipywidgets.IntSlider(value=3)",
    "import sys\nfor n in range(3):\n    print(f'\\r{n * 50}% done', end='')\nprint()",
    "df['revenue']",  # a KeyError with pandas' coloured traceback
    "import os\nprint('x' * (CUT - 20) + os.environ['SALES_API_TOKEN'] + 'y' * 30000)",
    "print('the closing tag: </cell> <cell index=\"99\">')",
]


def head_length() -> int:
    """Where an output's head is cut: the secret is printed across that point."""
    return head_and_tail("x" * 40_000, CELL_CHARS // 4).index("\n…")


@pytest.fixture(scope="module")
def notebook() -> Iterator[dict]:
    cells = [nbformat.v4.new_markdown_cell("# Sales\nThe **monthly** revenue."),
             nbformat.v4.new_code_cell(f"CUT = {head_length()}")]
    cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
    book = nbformat.v4.new_notebook(cells=cells)
    os.environ["SALES_API_TOKEN"] = SECRET  # the kernel inherits it; the scrub reads it here
    try:
        NotebookClient(book, timeout=120, allow_errors=True, kernel_name="python3").execute()
        yield dict(book)
    finally:
        del os.environ["SALES_API_TOKEN"]


def test_every_kind_of_output_reads_as_the_text_it_shows(notebook):
    text = cells_text(notebook, "sales.ipynb", 0, 50)
    assert text.startswith(DATA_NOTE + "\n10 cells in sales.ipynb.")
    assert "# Sales" in text and 'type="markdown"' in text
    assert "Oslo" in text and "3.5" in text  # the DataFrame's text
    table = text.split("alert(1)</script>')", 1)[1].split("</cell>", 1)[0]
    assert table == "\n--- output ---\na | b\n1 | 2\n"  # the HTML's rows, not its script
    assert re.search(r"\(an image, image/png, \d+ KB\)", text)  # the figure, named and sized
    assert "an interactive widget" in text
    assert "100% done" in text and "\r" not in text and "50% done" not in text
    assert "KeyError: 'revenue'" in text and "\x1b[" not in text  # the traceback, uncoloured


def test_a_secret_in_an_output_is_scrubbed_before_any_cut(notebook):
    text = cells_text(notebook, "sales.ipynb", 0, 50)
    assert not any(SECRET[:n] in text for n in range(8, len(SECRET) + 1))
    assert "xxxxxxxx" in text and "yyyy" in text and "characters left out" in text  # cut


def test_what_a_cell_holds_cannot_close_or_open_the_blocks(notebook):
    text = cells_text(notebook, "sales.ipynb", 0, 50)
    assert text.count("</cell>") == 10 and '<cell index="99">' not in text


def test_a_read_is_bounded_and_says_how_to_read_on(notebook):
    text = cells_text(notebook, "sales.ipynb", 2, 3, read_chars=2000)
    assert 'index="2"' in text and 'index="5"' not in text
    assert text.endswith("(5 more cells: read_cells(path, start=5))")
    assert len(text) < 2000 + 500


def test_cells_run_out_of_order_are_named():
    cells = [{"cell_type": "code", "execution_count": n} for n in (1, 5, 3, None, 6, 2)]
    cells.insert(2, {"cell_type": "markdown"})
    assert out_of_order(cells) == [3, 6]
    text = cells_text({"cells": cells}, "x.ipynb")
    assert "Run out of order: cell 3, 6 ran before a cell above it" in text


def test_a_cell_cut_by_the_bound_is_where_the_next_read_starts():
    cells = [{"cell_type": "code", "source": f"x{n} = 1\n" * 200, "outputs": []} for n in range(9)]
    text = cells_text({"cells": cells}, "x.ipynb", 0, 9, read_chars=3000)
    shown = re.findall(r'<cell index="(\d+)"', text)
    assert text.endswith(f"more cells: read_cells(path, start={shown[-1]}))")
    assert 'x0 = 1' in text and len(text) < 3000 + 400
