"""The model's waiting cell changes drawn in real JupyterLab, and answered there.

A cell ``%chat --agent ...`` makes the scripted model call ``edit_cell``,
``insert_cell`` or ``delete_cell``; the call waits for the person; the kernel
sends the page the waiting proposals and the lab extension draws each where it
lands: an edit as CodeMirror's unified merge view on the cell, with a toggle
per chunk; an insert as a ghost block between the cells; a delete struck
through. The answers go back on the comm and the kernel makes the change.
What lands is read from the page's notebook model.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import Locator, Page, expect

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import JupyterLab, NotebookPage

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
BASE = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\nf = 6\ng = 7\n"
PROPOSED = "a = 10\nb = 2\nc = 3\nd = 40\ne = 5\nf = 6\ng = 70\n"
ONLY_CHUNK_2 = "a = 1\nb = 2\nc = 3\nd = 40\ne = 5\nf = 6\ng = 7\n"

_JS_MODEL = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells.map(c => ({
        id: c.id, type: c.cell_type, metadata: c.metadata,
        source: Array.isArray(c.source) ? c.source.join('') : c.source}));
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


def cell_ids(nb: NotebookPage) -> list[str]:
    """The cells' ids as the page (and so the kernel) knows them."""
    return [cell["id"] for cell in model(nb)]


def proposal(nb: NotebookPage, tool: str) -> Locator:
    return nb.page.locator(f".nbchat-proposal[data-nbchat-tool='{tool}']")


def start(notebook, lab: JupyterLab, server: ScriptedServer, tmp_path: Path, cells: list[str],
          script: Callable[[list[str]], list[Reply]],
          ) -> tuple[NotebookPage, list[str]]:  # fmt: skip
    """Open [setup, chat, *cells, end], script the model with the cells' ids, run the turn."""
    setup = SETUP.format(url=server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --agent tidy the cells below", *cells, "# end"])
    ids = cell_ids(nb)
    server.script(*script(ids))
    nb.run_cell(0)
    nb.run_cell(1)  # returns: the proposals wait for an answer
    return nb, ids


def test_an_edit_is_a_merge_view_on_its_cell_and_one_chunk_lands(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = start(notebook, jupyterlab, scripted_server, tmp_path, [BASE], lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": PROPOSED,
                                         "why": "Bigger numbers."})], times=1),
        Reply("Changed one line."),
    ])  # fmt: skip
    view = nb.cell(2).locator(".nbchat-merge")
    view.wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()  # a view is made once it is near the window
    expect(view.locator(".nbchat-chunk-control")).to_have_count(3)
    expect(view.locator(".cm-deletedChunk")).to_have_count(3)  # the base's lines, above the new
    expect(view.locator(".cm-changedText").first).to_be_visible()  # word level, inside the lines
    assert "Bigger numbers." in view.locator(".nbchat-proposal-why").inner_text()
    nb.screenshot("1-merge-view")

    view.get_by_label("chunk 2").check()
    accept = view.get_by_role("button", name=re.compile(r"^Accept"))
    expect(accept).to_have_text("Accept chunk 2")
    accept.click()
    wait_until(lambda: source_of(nb, ids[2]) == ONLY_CHUNK_2, "chunk 2 landed", nb)
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    nb.wait_for_text(1, "Changed one line.")
    nb.screenshot("2-landed")
    time.sleep(1)  # a second answer or a late list would change it again
    assert source_of(nb, ids[2]) == ONLY_CHUNK_2


def test_reject_keeps_the_cell_an_insert_is_a_ghost_and_a_delete_is_struck(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = start(notebook, jupyterlab, scripted_server, tmp_path, [BASE, "x = 'gone'"],
                    lambda ids: [
        Reply(tool_calls=[
            ("edit_cell", {"cell_id": ids[2], "source": PROPOSED, "why": "Bigger."}),
            ("insert_cell", {"source": "print('new')\n", "why": "A check.", "index": 3}),
            ("delete_cell", {"cell_id": ids[3], "why": "Unused."}),
        ], times=1),
        Reply("Done."),
    ])  # fmt: skip
    ghost = proposal(nb, "insert_cell")
    ghost.wait_for(timeout=30_000)
    edit, delete = proposal(nb, "edit_cell"), proposal(nb, "delete_cell")
    expect(edit).to_be_visible()
    expect(delete).to_be_visible()
    bar = nb.page.locator(".nbchat-proposals-bar")
    expect(bar).to_contain_text("3 proposed changes")
    expect(bar.get_by_role("button", name="Accept all")).to_be_visible()

    # The ghost sits between cells 2 and 3, and is no cell of the notebook.
    cells = model(nb)
    assert len(cells) == 5 and not any("print('new')" in c["source"] for c in cells)
    ghost.scroll_into_view_if_needed()
    expect(ghost.locator(".cm-content")).to_contain_text("print('new')")
    top = ghost.bounding_box()["y"]
    assert nb.cell(2).locator(".jp-InputArea").bounding_box()["y"] < top
    assert top < nb.cell(3).locator(".jp-InputArea").bounding_box()["y"]
    # The cell to delete is struck through.
    line = nb.cell(3).locator(".jp-InputArea-editor .cm-line").first
    assert "line-through" in line.evaluate("e => getComputedStyle(e).textDecorationLine")
    nb.screenshot("1-three-proposals")

    # Drawn, nothing of it is saved.
    nb.cell(4).locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("Control+s")
    saved_path = jupyterlab.root_dir / nb.path
    wait_until(lambda: not nb.page.evaluate(
        "(p) => Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(w => w.context && w.context.path === p).context.model.dirty", nb.path), "saved", nb)
    saved = nbformat.read(str(saved_path), as_version=4).cells
    assert [c.source for c in saved][2:] == [BASE, "x = 'gone'", "# end"]
    assert all("nbchat" not in c.metadata for c in saved)

    edit.get_by_role("button", name="Reject").click()
    expect(edit).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[2]) == BASE  # byte for byte
    ghost.get_by_role("button", name="Accept").click()
    wait_until(lambda: len(model(nb)) == 6, "the inserted cell", nb)
    cells = model(nb)
    assert cells[3]["source"] == "print('new')\n" and cells[4]["id"] == ids[3]
    expect(ghost).to_have_count(0, timeout=30_000)
    delete.get_by_role("button", name="Reject").click()
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[3]) == "x = 'gone'"
    expect(bar).to_have_count(0)
    nb.wait_for_text(1, "Done.")


HOSTILE = ("# <img src=x onerror=window.__pwned=1>\n"
           "name = 'abc\u202edcba'  # a bidi override\n"
           "key = 'ab\u200bcd'  # a zero-width space\n"
           "words = '" + "lorem ipsum " * 60 + "'\n"
           "solid = '" + "x" * 700 + "'\n")  # fmt: skip


def test_hostile_text_is_inert_and_hidden_characters_show(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    base = "key = 'ab\u200bcd'\nname = 'plain'\n"
    nb, ids = start(notebook, jupyterlab, scripted_server, tmp_path, [base], lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": HOSTILE,
                                         "why": "<b>x</b><img src=x onerror=window.__pwned=2>"})],
              times=1),
        Reply("Done."),
    ])  # fmt: skip
    view = nb.cell(2).locator(".nbchat-merge")
    view.wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()
    page: Page = nb.page
    assert page.evaluate("() => window.__pwned") is None
    made = page.locator(".nbchat-proposal img[src], .nbchat-proposal b, [onerror]")
    assert made.count() == 0, made.evaluate_all("els => els.map(e => e.outerHTML)")
    assert view.locator(".nbchat-proposal-why").inner_text().startswith("<b>x</b><img")
    content = view.locator(".cm-content")
    expect(content).to_be_visible()
    assert "<img src=x onerror=window.__pwned=1>" in content.inner_text()
    # U+202E and U+200B in the proposed lines, and U+200B in the base's deleted line.
    marks = view.locator(".cm-line .cm-specialChar")
    assert marks.count() >= 2, content.inner_html()
    titles = marks.evaluate_all("els => els.map(e => e.title)")
    assert "Control character right-to-left override" in titles, titles
    assert "Control character zero width space" in titles, titles
    expect(view.locator(".cm-deletedChunk .cm-specialChar").first).to_be_visible()
    scroller = view.locator(".cm-scroller")
    width = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width[0] <= width[1] + 1, width  # long lines wrap: nothing to scroll sideways
    nb.screenshot("1-hostile")
    view.get_by_role("button", name="Reject").click()
    expect(view).to_have_count(0, timeout=30_000)
    assert page.evaluate("() => window.__pwned") is None
    assert source_of(nb, ids[2]) == base


def test_after_a_reload_the_proposal_is_drawn_again_and_accepted_once(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = start(notebook, jupyterlab, scripted_server, tmp_path, [BASE], lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": PROPOSED,
                                         "why": "Bigger."})], times=1),
        Reply("Accepted, thanks."),
    ])  # fmt: skip
    nb.cell(2).locator(".nbchat-merge").wait_for(timeout=30_000)
    nb.page.reload()
    nb.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    nb.cells.nth(3).wait_for(timeout=60_000)
    nb.wait_for_idle()  # the new page opens its own comm; the kernel sends it the proposals
    view = nb.cell(2).locator(".nbchat-merge")
    view.wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()
    expect(view.locator(".nbchat-chunk-control")).to_have_count(3)
    nb.screenshot("1-after-reload")
    accept = view.get_by_role("button", name=re.compile(r"^Accept"))
    accept.click()
    wait_until(lambda: source_of(nb, ids[2]) == PROPOSED, "the edit landed", nb)
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)

    def told() -> list[Any]:
        return [r for r in scripted_server.chat_requests if r.messages[-1]["role"] == "tool"]

    wait_until(told, "the model told of the answer", nb)  # in the old page's output, gone
    time.sleep(1)
    assert source_of(nb, ids[2]) == PROPOSED
    assert len(told()) == 1  # the answer counted once


def test_a_move_marks_where_the_cell_lands_and_a_run_asks_first(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = start(notebook, jupyterlab, scripted_server, tmp_path, ["moved = 1", "ran = 2\nran"],
                    lambda ids: [
        Reply(tool_calls=[
            ("move_cell", {"cell_id": ids[2], "index": 3, "why": "Later."}),
            ("execute_cell", {"cell_id": ids[3], "why": "See it."}),
        ], times=1),
        Reply("Done."),
    ])  # fmt: skip
    move, run = proposal(nb, "move_cell"), proposal(nb, "execute_cell")
    move.first.wait_for(timeout=30_000)
    gap = nb.page.locator(".nbchat-move-gap")
    expect(gap).to_have_count(1)
    assert gap.evaluate("e => e.closest('.jp-Cell') !== null")  # inside cell 3, below it
    assert gap.bounding_box()["y"] > nb.cell(3).locator(".jp-InputArea").bounding_box()["y"]
    expect(run).to_contain_text("Run this cell?")
    nb.cell(2).scroll_into_view_if_needed()
    nb.screenshot("1-move-and-run")

    run.get_by_role("button", name="Run").click()
    nb.wait_for_text(3, "2")  # run by the kernel, its outputs put in the cell
    expect(run).to_have_count(0, timeout=30_000)
    move.first.get_by_role("button", name="Accept").click()
    wait_until(lambda: [c["id"] for c in model(nb)][2:4] == [ids[3], ids[2]], "the cell moved", nb)
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)


def test_the_side_panels_mode_picker_asks_as_the_agent_and_its_change_is_drawn_on_the_cell(
    notebook, jupyterlab: JupyterLab, scripted_server: ScriptedServer, tmp_path: Path
):
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --panel --side", "x = 1\n", "# end"])
    ids = cell_ids(nb)
    scripted_server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": "x = 2\n",
                                         "why": "Two."})], when="make x two", times=1),
        Reply("It is two now.", after_tool="edit_cell"),
        Reply("Title", when=lambda body: "title" in body["messages"][0]["content"]),
    )
    nb.run_cell(0)
    nb.run_cell(1)
    panel = nb.page.locator(".jupyterlab-sidecar .nbchat-panel")
    picker = panel.get_by_label("Mode", exact=True)
    picker.wait_for(timeout=30_000)
    expect(picker).to_have_value("chat")
    picker.select_option("ask")
    panel.get_by_label("Question", exact=True).fill("make x two")
    panel.get_by_label("Question", exact=True).press("Enter")
    view = nb.cell(2).locator(".nbchat-merge")  # the proposal, drawn on its cell
    view.wait_for(timeout=30_000)
    assert source_of(nb, ids[2]) == "x = 1\n"
    nb.screenshot("1-panel-agent-proposal")
    view.get_by_role("button", name=re.compile(r"^Accept")).click()
    wait_until(lambda: source_of(nb, ids[2]) == "x = 2\n", "the edit landed", nb)
    expect(panel.get_by_text("It is two now.")).to_be_visible(timeout=30_000)
    expect(picker).to_have_value("ask")  # the thread keeps the mode it was asked in
