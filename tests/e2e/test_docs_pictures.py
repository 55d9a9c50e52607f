"""The picture of the README and the site's front page: a %%chat cell and the side panel.

A question asked in a cell and a follow-up typed in the side panel land in one
thread, which both show. `python docs/refresh_screenshots.py` runs this test and
copies its screenshot into docs/screenshots/.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from nbchat.testing import Reply
from shell_helpers import is_title_body

from .jupyterlab import open_notebook, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

ANSWER = (
    "Use `pandas.read_csv`:\n\n```python\nimport pandas as pd\n\n"
    "sales = pd.read_csv('sales.csv', parse_dates=['date'])\nsales.head()\n```\n\n"
    "It guesses each column's type; `dtype=` and `usecols=` choose them yourself."
)
FOLLOW_UP = "Pass the columns you want: `pd.read_csv('sales.csv', usecols=['date', 'total'])`."


def test_a_cell_and_the_side_panel_show_one_thread(page, scripted_server, tmp_path):
    scripted_server.script(
        Reply("Reading a CSV with pandas", when=is_title_body),
        Reply(ANSWER, when="read a CSV", chunk_size=12, delay=0.01),
        Reply(FOLLOW_UP, when="two columns", chunk_size=12, delay=0.01),
    )
    env = {"NBCHAT_BASE_URL": scripted_server.url, "NBCHAT_MODEL": "scripted-small",
           "NBCHAT_STORE": str(tmp_path / "store")}
    cells = ["%%chat\nHow do I read a CSV file with pandas?", "%chat --panel --side"]
    with start_jupyterlab(tmp_path / "lab", env=env) as lab:
        nb = open_notebook(page, lab, cells, name="nbchat")
        nb.run_cell(0)
        nb.wait_for_text(0, "It guesses each column's type")
        nb.run_cell(1)
        side = page.locator(".jupyterlab-sidecar .nbchat-panel")
        side.wait_for(timeout=30_000)
        expect(side.locator(".nbchat-title")).to_have_text("Reading a CSV with pandas")
        expect(side.locator(".nbchat-from-person .nbchat-bubble")).to_have_text(
            "How do I read a CSV file with pandas?")

        box = side.locator("textarea")
        box.fill("And only two columns?")
        box.press("Enter")
        expect(side.locator(".nbchat-from-person .nbchat-bubble")).to_have_text(
            ["How do I read a CSV file with pandas?", "And only two columns?"])
        expect(side.get_by_text(re.compile(r"Pass the columns you want"))).to_be_visible()
        expect(side.locator(".nbchat-message-usage")).to_have_count(2)
        assert "It guesses each column's type" in nb.output(0).inner_text()
        nb.cell(0).click()  # the cell, not the panel's input, has the focus in the picture
        page.evaluate("window.jupyterapp.commands.execute('application:toggle-left-area')")
        page.mouse.move(0, 0)
        page.wait_for_timeout(500)  # the notebook takes the file browser's room
        screenshot(page, "docs/cell-and-panel")
