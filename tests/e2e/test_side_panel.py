"""The panel in JupyterLab's right side area: it stays, follows %chat, streams, stops, counts."""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from playwright.sync_api import Page, expect

from nbchat.testing import Reply

from .jupyterlab import NotebookPage, screenshot

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
%config ChatMagics.prices = {{"scripted-small": [1.5, 6.0]}}
"""
ANSWER = "Tea is brewed by steeping leaves in hot water, then poured and enjoyed slowly."
# Tall cells, so that the notebook scrolls.
FILLER = "\n".join(f"# filler line {n}" for n in range(12))
SAME = "import nbchat\nprint('same panel:', nbchat.panel(side=True) is nbchat.panel(side=True))"
# the model is named above the answer; a few tokens cost under a cent
USAGE = re.compile(r"^\d\d:\d\d · \d+ in · \d+ out( · \d+\.\d s)? · < \$0\.01$")


def is_title_request(body):
    return "conversation title" in body["messages"][0]["content"]


def side(page: Page):
    return page.locator(".jupyterlab-sidecar .nbchat-panel")


def wait_for(condition, what: str, page: Page, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            screenshot(page, "side-panel/timeout")
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)


def has_font_for(char: str) -> bool:
    """Whether fontconfig (which Chromium uses) has a font that draws ``char``."""
    found = subprocess.run(
        ["fc-list", f":charset={ord(char):x}", "family"], capture_output=True, text=True
    )
    return bool(found.stdout.strip())


def test_the_side_panel_follows_the_notebook_streams_and_stops(
    notebook, page, scripted_server, tmp_path
):
    scripted_server.script(
        Reply("Brewing Tea Basics", when=is_title_request),
        Reply(ANSWER, when="how is tea made", chunk_size=8, delay=0.02),
        Reply("", when="long answer", tokens=400, delay=0.05),
        Reply("Green tea is steeped for two minutes.", when="green tea", delay=0.02),
    )
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb: NotebookPage = notebook(
        [setup, "%chat --panel --side", "%chat How is tea made?", *[FILLER] * 12, SAME]
    )
    nb.run_cell(0)
    nb.run_cell(1)
    panel = side(page)
    panel.wait_for(timeout=30_000)
    nb.wait_for_text(1, "the chat panel is open in JupyterLab's right side area")
    box = panel.locator("textarea")
    expect(box).to_be_focused()
    expect(panel).to_contain_text("No thread selected")
    nb.screenshot("1-side-panel-open")

    # A %chat in a cell: the panel shows its thread without a refresh.
    nb.run_cell(2)
    wait_for(lambda: "enjoyed slowly." in panel.inner_text(), "the cell's thread in the panel",
             page)
    expect(panel.locator(".nbchat-threads .nbchat-thread")).to_have_text(
        [re.compile(r"^Brewing\sTea\sBasics\s\(#1\)$")]
    )
    expect(panel.locator(".nbchat-message-usage")).to_have_text([USAGE])
    expect(panel.locator(".nbchat-usage")).to_contain_text("Σ 1 answer · ")

    # The notebook scrolls; the side panel stays where it is.
    before = panel.bounding_box()
    nb.cell(4).hover()
    for _ in range(4):
        page.mouse.wheel(0, 400)
        time.sleep(0.2)
    wait_for(lambda: (nb.cell(2).bounding_box() or {"y": -1})["y"] < 0,
             "the notebook scrolled", page)
    assert panel.bounding_box() == before
    nb.screenshot("2-notebook-scrolled")

    # Enter sends; the answer streams; Escape stops it and keeps what came.
    box.click()
    box.fill("Give me a long answer")
    box.press("Enter")
    wait_for(lambda: "word3 " in panel.inner_text(), "the answer streaming", page)
    assert "word399" not in panel.inner_text()
    expect(box).to_be_focused()
    expect(box).to_have_value("")
    nb.screenshot("3-streaming")
    box.press("Escape")
    wait_for(lambda: "Stopped; the partial answer is kept." in panel.inner_text(),
             "the stop", page)
    assert "(interrupted)" in panel.inner_text() and "word399" not in panel.inner_text()
    nb.screenshot("4-stopped")

    # Up in the empty box recalls the last question; Shift+Enter is a new line.
    box.press("ArrowUp")
    expect(box).to_have_value("Give me a long answer")
    box.fill("")
    box.type("Which green tea")
    box.press("Shift+Enter")
    box.type("is best?")
    expect(box).to_have_value("Which green tea\nis best?")
    # The Send button works too, and the focus comes back to the box.
    panel.get_by_role("button", name="Send").click()
    wait_for(lambda: "two minutes." in panel.inner_text(), "the second answer", page)
    expect(box).to_be_focused()
    expect(box).to_have_value("")
    # Both lines were sent (Markdown shows them as one paragraph).
    expect(panel.locator(".nbchat-conversation")).to_contain_text("Which green tea is best?")
    # The stopped answer never got its usage from the endpoint: no line for it.
    expect(panel.locator(".nbchat-message-usage", has_text=USAGE)).to_have_count(2)
    expect(panel.locator(".nbchat-message-usage")).to_have_count(3)  # the time only
    expect(panel.locator(".nbchat-usage")).to_contain_text(
        re.compile(r"Σ 2 answers · .* < \$0\.01"))
    nb.screenshot("5-answered-1280x800")
    page.set_viewport_size({"width": 1920, "height": 1080})
    time.sleep(1)
    nb.screenshot("6-answered-1920x1080")

    # Status emoji: swapped for plain glyphs where no font draws them.
    shown = panel.evaluate(
        """root => new Promise(resolve => {
            const p = document.createElement('p');
            p.textContent = '\\u{1F527} tool \\u23F8 paused \\u23F9 stopped';
            root.querySelector('.nbchat-conversation').appendChild(p);
            setTimeout(() => resolve(p.textContent), 300);
        })"""
    )
    expected = "🔧 tool ⏸ paused ⏹ stopped"
    for emoji, glyph in (("🔧", "⚙"), ("⏸", "❚❚"), ("⏹", "■")):
        if not has_font_for(emoji):
            expected = expected.replace(emoji, glyph)
    assert shown == expected

    # Asking again brings the same panel back: one side panel per kernel.
    page.set_viewport_size({"width": 1280, "height": 800})
    nb.run_cell(1)
    wait_for(lambda: page.locator(".jupyterlab-sidecar").count() == 1, "one side panel", page)
    panel.wait_for(timeout=30_000)
    expect(panel).to_contain_text("two minutes.")
    nb.run_cell(15)
    nb.wait_for_text(15, "same panel: True")
    wait_for(lambda: page.locator(".jupyterlab-sidecar").count() == 1, "one side panel", page)
