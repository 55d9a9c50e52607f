"""Reviewing the notebook agent's work in real JupyterLab + Chromium, by clicks in the page.

Three flows (and one defect they show), each checked by what lands in the live
notebook (the page's own notebook model, which the kernel's changes reach through
the lab bridge):

- an ``edit_cell`` proposal of three chunks: two chunks untoggled in the cell's
  prompt widget, Accept lands exactly the one left on; *Undo this turn* below the
  answer puts the cell back byte for byte; a proposal answered in that widget is no
  longer drawn on its cell by the lab extension;
- the plan mode's ``propose_plan``: the numbered plan shown inert (markup as text,
  a bidi override marked), Edit, Approve edited; the model's next request carries
  the edited plan and is offered the change tools;
- the chat panel: a proposal accepted in the panel's prompt, then the message
  footer's *Undo this turn* puts the cell back and goes away.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import NotebookPage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
# As in tests/test_notebook_agent_review.py: CHANGED differs from THREE in three chunks.
THREE = "import pandas as pd\nA = 1\ndf = pd.read_csv('sales.csv')\nB = 2\nprint(df)\n"
CHANGED = ("import pandas as pd\nimport numpy as np\nA = 1\n"
           "df = pd.read_csv('sales.csv', parse_dates=['date'])\nB = 2\ndf.head()\n")  # fmt: skip
ONLY_CHUNK_2 = THREE.replace("'sales.csv'", "'sales.csv', parse_dates=['date']")
CHANGES = {"insert_cell", "edit_cell", "delete_cell", "move_cell", "execute_cell"}
BIDI = "\u202e"
HOSTILE_STEP = "Load <img src=x onerror=window.__pwned=1> sales.csv"
PLAN = {"steps": [HOSTILE_STEP, f"Name the column abc{BIDI}dcba", "Plot monthly revenue"],
        "why": "A small analysis."}  # fmt: skip
EDITED = "1. Load sales.csv\n2. Plot weekly revenue\n"

_JS_MODEL = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells.map(c => ({
        id: c.id, source: Array.isArray(c.source) ? c.source.join('') : c.source}));
}
"""


def wait_until(condition: Callable[[], Any], what: str, nb: NotebookPage,
               timeout: float = 30) -> Any:  # fmt: skip
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            nb.screenshot(re.sub(r"[^A-Za-z0-9]+", "-", what))
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.5)
    return value


def model(nb: NotebookPage) -> list[dict[str, Any]]:
    return nb.page.evaluate(_JS_MODEL, nb.path)


def source_of(nb: NotebookPage, cell_id: str) -> str | None:
    return next((c["source"] for c in model(nb) if c["id"] == cell_id), None)


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


def is_title_request(body: dict[str, Any]) -> bool:
    return "Write the conversation title" in str(body.get("messages"))


TITLE = Reply("Review Work", when=is_title_request)  # first: its request holds the question


def answered(server: ScriptedServer) -> Any:
    """The newest request that carries a tool's result (a title request may come later)."""
    return [r for r in server.chat_requests if r.messages[-1]["role"] == "tool"][-1]


def open_with(notebook, server: ScriptedServer, tmp_path: Path,
              cells: list[str]) -> tuple[NotebookPage, list[str]]:  # fmt: skip
    """Open [setup, *cells] and run the setup; the cells' ids as the page knows them."""
    setup = SETUP.format(url=server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, *cells])
    ids = [cell["id"] for cell in model(nb)]
    nb.run_cell(0)
    return nb, ids


def button(scope: Locator, name: str) -> Locator:
    return scope.get_by_role("button", name=re.compile(rf"^\W*{re.escape(name)}\s*$"))


# -- 1. chunks chosen in the cell's prompt widget, then Undo this turn below the answer ----


def test_two_chunks_untoggled_in_the_prompt_land_only_chunk_2_and_undo_puts_it_back(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_with(notebook, scripted_server, tmp_path,
                        ["%chat --agent tidy the first cell", THREE, "# end"])  # fmt: skip
    scripted_server.script(
        TITLE,
        Reply("Tidied.", after_tool="edit_cell"),
        Reply(
            tool_calls=[("edit_cell", {"cell_id": ids[2], "source": CHANGED, "why": "Tidy."})],
            when="tidy the first cell",
        ),
    )
    nb.run_cell(1)  # returns: the proposal waits for an answer
    prompt = nb.output(1).locator(".nbchat-prompt")
    prompt.wait_for(timeout=30_000)
    toggles = prompt.locator(".widget-toggle-button")
    expect(toggles).to_have_text([re.compile(rf"chunk {n}") for n in (1, 2, 3)])
    expect(prompt.locator(".widget-toggle-button.mod-active")).to_have_count(3)  # all on
    nb.screenshot("1-three-chunks")

    button(prompt, "chunk 1").click()
    button(prompt, "chunk 3").click()
    expect(prompt.locator(".widget-toggle-button.mod-active")).to_have_text([re.compile("chunk 2")])
    assert source_of(nb, ids[2]) == THREE  # nothing lands before Accept
    button(prompt, "Accept").click()
    wait_until(lambda: source_of(nb, ids[2]) == ONLY_CHUNK_2, "only chunk 2 landed", nb)
    nb.wait_for_text(1, "Tidied.")
    told = answered(scripted_server).messages[-1]["content"]
    assert "accepted chunk 2 of 3 and rejected 1, 3" in told
    nb.screenshot("2-chunk-2-landed")

    undo = nb.output(1).locator(".nbchat-undo")
    undo.wait_for(timeout=30_000)
    text = nb.output(1).inner_text()
    assert text.index("Tidied.") < text.index("Undo this turn")  # below the answer
    button(undo, "Undo this turn").click()
    wait_until(lambda: source_of(nb, ids[2]) == THREE, "the cell put back", nb)
    # At once, not after _cells.PAGE_WAIT (10 s): the click's handler, on whichever thread the
    # kernel runs it, cannot get the page's reply before it ends, so it does not wait for one.
    expect(undo).to_contain_text("Turn 0's changes to the notebook were undone", timeout=8_000)
    expect(button(undo, "Undo this turn")).to_be_disabled()
    nb.screenshot("3-undone")
    time.sleep(1)  # a late redraw or a second undo would change it again
    assert source_of(nb, ids[2]) == THREE  # byte for byte


def test_a_proposal_accepted_in_the_cell_prompt_is_no_longer_drawn_on_its_cell(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_with(notebook, scripted_server, tmp_path,
                        ["%chat --agent make x two", "x = 1\n", "# end"])  # fmt: skip
    scripted_server.script(
        TITLE,
        Reply("Two.", after_tool="edit_cell"),
        Reply(
            tool_calls=[("edit_cell", {"cell_id": ids[2], "source": "x = 2\n", "why": "Two."})],
            when="make x two",
        ),
    )
    nb.run_cell(1)
    prompt = nb.output(1).locator(".nbchat-prompt")
    prompt.wait_for(timeout=30_000)
    drawn = nb.page.locator(".nbchat-proposal")
    expect(drawn).to_have_count(1, timeout=30_000)  # the same call, drawn on its cell too
    button(prompt, "Accept").click()
    wait_until(lambda: source_of(nb, ids[2]) == "x = 2\n", "the edit landed", nb)
    nb.wait_for_text(1, "Two.")
    # Answered, it waits no more: the page must stop offering it on the cell.
    expect(drawn).to_have_count(0, timeout=30_000)


# -- 2. the plan prompt: inert text, Edit, Approve edited ----------------------------------


def test_the_plan_is_inert_text_and_the_edited_plan_is_the_one_approved(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    scripted_server.script(
        TITLE,
        Reply("Following your plan.", after_tool="propose_plan"),
        Reply(tool_calls=[("propose_plan", PLAN)], when="plan my analysis"),
    )
    nb, _ = open_with(notebook, scripted_server, tmp_path,
                      ["%chat --mode plan plan my analysis", "x = 1\n"])  # fmt: skip
    nb.run_cell(1)
    prompt = nb.output(1).locator(".nbchat-prompt")
    prompt.wait_for(timeout=30_000)
    assert not CHANGES & offered(scripted_server.chat_requests[0])
    steps = prompt.locator("ol > li")
    expect(steps).to_have_count(3)
    assert steps.nth(0).inner_text() == HOSTILE_STEP  # the markup shown as text
    assert steps.nth(2).inner_text() == "Plot monthly revenue"
    page = nb.page
    assert page.evaluate("() => window.__pwned") is None
    made = nb.output(1).locator("img, [onerror]")
    assert made.count() == 0, made.evaluate_all("els => els.map(e => e.outerHTML)")
    expect(button(prompt, "Approve edited")).to_be_hidden()
    nb.screenshot("1-plan")

    button(prompt, "Edit").click()
    editor = prompt.locator("textarea")
    expect(editor).to_be_visible()
    assert editor.input_value().startswith("1. " + HOSTILE_STEP)
    assert "\\u202e" in editor.input_value() and BIDI not in editor.input_value()
    editor.fill(EDITED)
    button(prompt, "Approve edited").click()
    nb.wait_for_text(1, "Following your plan.")
    request = answered(scripted_server)
    told = request.messages[-1]["content"]
    assert "approved the plan as they edited it:\n1. Load sales.csv\n2. Plot weekly revenue" in told
    assert "Plot monthly revenue" not in told
    tools = offered(request)
    assert "edit_cell" in tools and "propose_plan" not in tools
    nb.screenshot("2-approved-edited")
    # The bidi override is no live character in the plan shown: marked, as its escape
    # (the editor holds it so); checked last, the rest of the flow stands on its own.
    second = steps.nth(1)
    assert BIDI not in second.text_content(), repr(second.text_content())
    expect(second).to_contain_text("\\u202e")


# -- 3. the panel: accept in its prompt, then the footer's Undo this turn ------------------


def test_the_panel_footer_undo_puts_the_accepted_edit_back_and_goes_away(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_with(notebook, scripted_server, tmp_path,
                        ["%chat --panel", "x = 1\n", "# end"])  # fmt: skip
    scripted_server.script(
        TITLE,
        Reply("Four.", after_tool="edit_cell"),
        Reply(
            tool_calls=[("edit_cell", {"cell_id": ids[2], "source": "x = 4\n", "why": "Four."})],
            when="make x four",
        ),
    )
    nb.run_cell(1)
    panel = nb.output(1).locator(".nbchat-panel")
    picker = panel.get_by_label("Mode", exact=True)
    picker.wait_for(timeout=30_000)
    picker.select_option("ask")
    box = panel.get_by_label("Question", exact=True)
    box.fill("make x four")
    box.press("Enter")
    prompt = panel.locator(".nbchat-prompt")
    prompt.wait_for(timeout=30_000)
    expect(panel.locator(".nbchat-undo-turn")).to_have_count(0)  # nothing landed yet
    nb.screenshot("1-panel-prompt")
    button(prompt, "Accept").click()
    wait_until(lambda: source_of(nb, ids[2]) == "x = 4\n", "the edit landed", nb)
    # The answer, below the answered proposal's line ("Four. → accepted").
    expect(panel.get_by_text("Four.", exact=True).last).to_be_visible(timeout=30_000)
    expect(panel.get_by_text("accepted", exact=True)).to_be_visible()

    undo = panel.locator(".nbchat-undo-turn")
    expect(undo).to_have_count(1, timeout=30_000)
    expect(undo).to_contain_text("Undo this turn")
    nb.screenshot("2-footer-undo")
    undo.click()
    wait_until(lambda: source_of(nb, ids[2]) == "x = 1\n", "the cell put back", nb)
    # At once, as below a cell's answer (not after _cells.PAGE_WAIT).
    expect(panel.locator(".nbchat-status[role=status]")).to_contain_text(
        "Turn 0's changes to the notebook were undone", timeout=8_000
    )
    expect(panel.locator(".nbchat-undo-turn")).to_have_count(0, timeout=30_000)
    nb.screenshot("3-undone")
    time.sleep(1)
    assert source_of(nb, ids[2]) == "x = 1\n"
