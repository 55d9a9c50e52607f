"""Help in the cell, in real JupyterLab: Fix and Explain under an error, and Ctrl+I in a cell.

The lab extension draws a bar with *Fix* and *Explain* under a cell's traceback
(a widget in the cell's layout, never an output); a click runs
``help_with_error`` silently in the kernel, which asks in the side panel:
Explain answers there, Fix asks the notebook agent for an ``edit_cell``
proposal on the cell, drawn on it and waiting for Accept. Ctrl+I in a cell's
editor opens a one-line box; Enter asks about the cell (or the selected lines)
and the proposal that answers takes the keyboard: Enter accepts, Escape
rejects. While the model writes the ``edit_cell`` call, its source grows on the
cell, to read only, until the stored proposal takes its place. What lands is
read from the page's notebook model, what was asked from the scripted model
server's recorded requests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from playwright.sync_api import Locator, Page, expect

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import NotebookPage, write_notebook

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
LOAD = 'import pandas as pd\ndf = pd.DataFrame({"revenue": [1, 2]})'
TYPO = 'df["revenu"].sum()'
FIXED = 'df["revenue"].sum()\n'
EXPLANATION = "The column is called revenue, not revenu: a KeyError names the missing key."
LINES = "total = 1\ntotal += 2\ntotal += 3\nprint(total)"
ASKED = "total = 1 + 2\ntotal += 3\nprint(total)\n"
OTHER = "name = 'kept'\nprint(name)  # byte for byte\n"
GROWN = "".join(f"total_{n} = {n} * 2  # line {n}\n" for n in range(30))  # ~4 s in 8-char pieces
HOSTILE = ("# <img src=x onerror=window.__pwned=1>\n"
           "name = 'abc\u202edcba'  # a bidi override\n"
           + "".join(f"line_{n} = {n}\n" for n in range(10_000)))  # fmt: skip

_JS_MODEL = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells.map(c => ({
        id: c.id, source: Array.isArray(c.source) ? c.source.join('') : c.source}));
}
"""
_JS_DIRTY = """
(path) => Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path).context.model.dirty
"""
_JS_SELECTION = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    const editor = panel.content.activeCell.editor;
    const {start, end} = editor.getSelection();
    return editor.model.sharedModel.getSource().slice(
        editor.getOffsetAt(start), editor.getOffsetAt(end));
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


def is_title_request(body: dict[str, Any]) -> bool:
    return "conversation title" in str(body["messages"][0].get("content"))


def texts(request: Any) -> str:
    """Every message's text of a recorded request, joined."""
    parts = []
    for message in request.body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(str(content or ""))
    return "\n".join(parts)


def asked(server: ScriptedServer, text: str) -> list[Any]:
    return [r for r in server.chat_requests if text in texts(r) and not is_title_request(r.body)]


def side(page: Page) -> Locator:
    return page.locator(".jupyterlab-sidecar .nbchat-panel")


def edit_on(nb: NotebookPage, index: int) -> Locator:
    return nb.cell(index).locator(".nbchat-proposal[data-nbchat-tool='edit_cell']")


def open_with_error(notebook, server: ScriptedServer, tmp_path: Path,
                    rules: Callable[[list[str]], list[Reply]],
                    ) -> tuple[NotebookPage, list[str]]:  # fmt: skip
    """[setup, LOAD, TYPO, end], the first three run: cell 2 holds a KeyError."""
    setup = SETUP.format(url=server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, LOAD, TYPO, "# end"])
    ids = [c["id"] for c in model(nb)]
    server.script(Reply("Title", when=is_title_request), *rules(ids))
    for index in range(3):
        nb.run_cell(index)
    nb.wait_for_text(2, "KeyError")
    bars = nb.page.locator(".nbchat-error-help")
    expect(bars).to_have_count(1, timeout=30_000)  # under the traceback of cell 2 only
    expect(nb.cell(2).locator(".nbchat-error-help")).to_have_count(1)
    for button, label in ((".nbchat-error-fix", "Fix"), (".nbchat-error-explain", "Explain")):
        expect(nb.cell(2).locator(f".nbchat-error-help {button}")).to_have_text(label)
    below = nb.output(2).bounding_box()
    assert bars.bounding_box()["y"] >= below["y"] + below["height"] - 1  # under the traceback
    assert bars.evaluate("e => e.closest('.jp-OutputArea') === null")  # no output of the cell
    return nb, ids


def run_alone(cells: list[str], tmp_path: Path) -> list[Any]:
    """The cells run headless (nbclient), as saved with nothing of the page's."""
    path = tmp_path / "alone.ipynb"
    write_notebook(path, cells)
    alone = nbformat.read(str(path), as_version=4)
    NotebookClient(alone, timeout=60, allow_errors=True, record_timing=False,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()  # fmt: skip
    return alone.cells


def shape(cell: Any) -> tuple[Any, ...]:
    outputs = [(o.output_type, o.get("ename"), o.get("evalue")) for o in cell.outputs]
    return cell.cell_type, dict(cell.metadata), outputs


def save(nb: NotebookPage) -> None:
    nb.cell(3).locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("Control+s")
    wait_until(lambda: not nb.page.evaluate(_JS_DIRTY, nb.path), "the notebook saved", nb)


def test_fix_proposes_the_corrected_cell_which_lands_on_accept_and_nothing_is_saved_of_it(
    notebook, jupyterlab, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_with_error(notebook, scripted_server, tmp_path, lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": FIXED,
                                         "why": "The column is revenue."})],
              when=f"Fix cell {ids[2]}", times=1),
        Reply("Fixed the column's name.", after_tool="edit_cell"),
    ])  # fmt: skip
    nb.cell(2).locator(".nbchat-error-fix").click()
    view = edit_on(nb, 2)
    view.wait_for(timeout=30_000)
    view.scroll_into_view_if_needed()
    expect(view.locator(".cm-content").first).to_contain_text('df["revenue"].sum()')
    (fixing,) = asked(scripted_server, f"Fix cell {ids[2]}")
    assert "KeyError" in texts(fixing) and "'revenu'" in texts(fixing)  # the page's traceback
    assert source_of(nb, ids[2]) == TYPO  # a proposal: nothing lands before the yes
    nb.screenshot("1-fix-proposed")
    time.sleep(1)
    assert source_of(nb, ids[2]) == TYPO
    save(nb)  # drawn: the bar and the proposal; saved: what running the cells alone gives
    alone = run_alone([LOAD, TYPO], tmp_path)
    on_disk = jupyterlab.root_dir / nb.path
    saved = nbformat.read(str(on_disk), as_version=4).cells
    assert [c.source for c in saved][1:] == [LOAD, TYPO, "# end"]
    assert [shape(c) for c in saved[1:3]] == [shape(c) for c in alone]
    for trace in ("nbchat-error", "nbchat-proposal", "help_with_error", "Explain"):
        assert trace not in on_disk.read_text(), trace

    view.get_by_role("button", name=re.compile(r"^Accept")).click()
    wait_until(lambda: source_of(nb, ids[2]) == FIXED, "the fix landed", nb)
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    expect(side(nb.page)).to_contain_text("Fixed the column's name.", timeout=30_000)
    save(nb)
    saved = nbformat.read(str(on_disk), as_version=4).cells
    assert [c.source for c in saved][1:] == [LOAD, FIXED, "# end"]
    assert [shape(c)[2] for c in saved[1:3]] == [shape(c)[2] for c in alone]  # the same outputs
    assert saved[1].metadata == {}
    # The accepted edit's provenance only (the agent's, cell_tools.py), nothing of the buttons.
    assert list(saved[2].metadata) == ["nbchat"], saved[2].metadata
    assert set(saved[2].metadata["nbchat"]) == {"thread", "turn", "call", "accepted"}
    for trace in ("nbchat-error", "nbchat-proposal", "help_with_error", "Explain"):
        assert trace not in on_disk.read_text(), trace


def test_explain_answers_in_the_side_panel_and_changes_nothing(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_with_error(notebook, scripted_server, tmp_path,
                              lambda ids: [Reply(EXPLANATION, when="Explain briefly")])  # fmt: skip
    nb.cell(2).locator(".nbchat-error-explain").click()
    panel = side(nb.page)
    expect(panel).to_contain_text(EXPLANATION, timeout=30_000)
    (explaining,) = asked(scripted_server, "Explain briefly")
    assert "KeyError" in texts(explaining) and TYPO in texts(explaining)
    tools = [t["function"]["name"] for t in explaining.body.get("tools") or []]
    assert "edit_cell" not in tools, tools
    nb.screenshot("1-explained")
    time.sleep(1)  # a late proposal would show by now
    expect(nb.page.locator(".nbchat-proposal")).to_have_count(0)
    assert source_of(nb, ids[2]) == TYPO
    expect(nb.cell(2).locator(".nbchat-error-help")).to_have_count(1)  # still there to ask again


def select_lines(nb: NotebookPage, index: int, first: int, count: int) -> None:
    """Click line `first` of cell `index` and select `count` whole lines with Shift+Down."""
    nb.cell(index).locator(".cm-line").nth(first).click()
    nb.page.keyboard.press("Home")
    for _ in range(count):
        nb.page.keyboard.press("Shift+ArrowDown")


def ask_box(nb: NotebookPage, index: int) -> Locator:
    return nb.cell(index).locator(".nbchat-ask-box .nbchat-ask-input")


def open_asking(notebook, server: ScriptedServer, tmp_path: Path, cells: list[str],
                rules: Callable[[list[str]], list[Reply]],
                ) -> tuple[NotebookPage, list[str]]:  # fmt: skip
    setup = SETUP.format(url=server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, *cells])
    ids = [c["id"] for c in model(nb)]
    server.script(Reply("Title", when=is_title_request), *rules(ids))
    nb.run_cell(0)
    return nb, ids


def test_ctrl_i_asks_about_the_selected_lines_and_the_proposal_takes_the_keyboard(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_asking(notebook, scripted_server, tmp_path, [LINES, OTHER, "# end"],
                          lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[1], "source": ASKED, "why": "One."})],
              when="fold the first two", times=1),
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[2], "source": "name = 'lost'\n",
                                         "why": "No."})], when="rename it", times=1),
        Reply("Done.", after_tool="edit_cell"),
    ])  # fmt: skip
    page = nb.page
    select_lines(nb, 1, 0, 2)
    assert page.evaluate(_JS_SELECTION, nb.path) == "total = 1\ntotal += 2\n"
    page.keyboard.press("Control+i")
    box = ask_box(nb, 1)
    expect(box).to_be_focused(timeout=10_000)
    expect(box).to_have_attribute("placeholder", re.compile("Ask about the 2 lines selected"))
    expect(page.locator(".jp-Inspector")).to_have_count(0)  # not JupyterLab's Contextual Help
    assert page.evaluate(_JS_SELECTION, nb.path) == "total = 1\ntotal += 2\n"  # untouched
    nb.screenshot("1-ask-box")
    box.fill("fold the first two lines")
    box.press("Enter")
    view = edit_on(nb, 1)
    view.wait_for(timeout=30_000)
    expect(view).to_be_focused(timeout=10_000)
    assert source_of(nb, ids[1]) == LINES
    (request,) = asked(scripted_server, "fold the first two lines")
    selected = re.search(r"the selected lines:\n`{3,}python\n(.*?)\n`{3,}", texts(request), re.S)
    assert selected and selected.group(1) == "total = 1\ntotal += 2", texts(request)
    nb.screenshot("2-proposal-focused")
    page.keyboard.press("Enter")
    wait_until(lambda: source_of(nb, ids[1]) == ASKED, "Enter accepted the proposal", nb)
    expect(page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[1]) == ASKED  # exactly the proposed text

    nb.cell(2).locator(".cm-line").first.click()
    page.keyboard.press("Control+i")
    expect(ask_box(nb, 2)).to_be_focused(timeout=10_000)
    # A mere cursor: nothing selected (Ctrl+I did not select a syntax node first).
    expect(ask_box(nb, 2)).to_have_attribute("placeholder", re.compile("^Ask about this cell"))
    ask_box(nb, 2).fill("rename it")
    page.keyboard.press("Enter")
    view = edit_on(nb, 2)
    expect(view).to_be_focused(timeout=30_000)
    page.keyboard.press("Escape")
    expect(page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[2]) == OTHER  # byte for byte

    nb.cell(3).locator(".cm-line").first.click()
    page.keyboard.press("Control+i")
    expect(ask_box(nb, 3)).to_be_focused(timeout=10_000)
    ask_box(nb, 3).fill("never sent")
    page.keyboard.press("Escape")
    expect(nb.page.locator(".nbchat-ask-box")).to_have_count(0)
    time.sleep(2)  # a request would have gone by now
    assert asked(scripted_server, "never sent") == []
    assert source_of(nb, ids[3]) == "# end"


_JS_CTRL_I = """
() => {
    const bindings = window.jupyterapp.commands.keyBindings;
    const editor = document.activeElement;
    const inEditor = sel => {
        for (let e = editor; e; e = e.parentElement) if (e.matches(sel)) return true;
        return false;
    };
    return bindings.map(b => ({command: b.command, keys: [...b.keys], selector: b.selector,
                               inEditor: inEditor(b.selector)}));
}
"""


_JS_SHORTCUTS = """
async () => {
    const app = window.jupyterapp;
    const plugin = app.pluginRegistry._plugins.get('@jupyterlab/apputils-extension:settings');
    const registry = await app.resolveRequiredService(plugin.provides);
    const all = await registry.load('@jupyterlab/shortcuts-extension:shortcuts');
    return all.composite.shortcuts.map(s => ({command: s.command, keys: s.keys,
                                              selector: s.selector}));
}
"""


def test_the_keymap_gives_ctrl_i_in_a_cell_editor_to_nbchat_only(notebook):
    nb = notebook(["x = 1\ny = 2"])
    nb.cell(0).locator(".cm-line").first.click()
    expect(nb.cell(0).locator(".cm-content")).to_be_focused()
    bindings = nb.page.evaluate(_JS_CTRL_I)
    ctrl_i = {(b["command"], b["selector"]) for b in bindings
              if b["keys"] == ["Ctrl I"] and b["inEditor"]}  # fmt: skip
    ours = ".jp-Notebook.jp-mod-editMode .jp-Cell.jp-mod-active .jp-InputArea-editor"
    assert ctrl_i == {("nbchat:ask-in-cell", ours), ("inspector:toggle", "body")}, ctrl_i
    ask = [b["keys"] for b in bindings if b["command"] == "nbchat:ask-in-cell"]
    assert ask == [["Ctrl I"]], ask
    inline = {"Tab", "Alt ]", "Alt [", "Alt End", "Alt \\"}
    completer = {k for b in bindings if b["command"].startswith("inline-completer:")
                 for k in b["keys"]}  # fmt: skip
    assert inline <= completer, completer  # still the inline completer's
    assert not inline & {k for keys in ask for k in keys}
    shortcuts = nb.page.evaluate(_JS_SHORTCUTS)  # the settings registry, as the page has it
    assert {"command": "nbchat:ask-in-cell", "keys": ["Accel I"], "selector": ours} in shortcuts
    # The Settings Editor's Keyboard Shortcuts list shows it, as a person looks for it.
    nb.page.evaluate("window.jupyterapp.commands.execute('settingeditor:open')")
    nb.page.locator(".jp-PluginList").get_by_text("Keyboard Shortcuts").click()
    row = nb.page.locator(".jp-Shortcuts-Row", has_text="nbchat: Ask in this cell")
    expect(row).to_have_count(1, timeout=30_000)
    expect(row).to_contain_text("Ctrl + I")
    nb.screenshot("1-keyboard-shortcuts")


def test_a_hostile_proposal_is_inert_marked_and_escape_rejects_it(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_asking(notebook, scripted_server, tmp_path, ["x = 1\n", "# end"],
                          lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[1], "source": HOSTILE,
                                         "why": "<img src=x onerror=window.__pwned=2>"})],
              when="make it long", times=1),
        Reply("Done.", after_tool="edit_cell"),
    ])  # fmt: skip
    page = nb.page
    nb.cell(1).locator(".cm-line").first.click()
    page.keyboard.press("Control+i")
    ask_box(nb, 1).fill("make it long")
    page.keyboard.press("Enter")
    view = edit_on(nb, 1)
    view.wait_for(timeout=60_000)
    expect(view).to_be_focused(timeout=30_000)
    expect(view.locator(".cm-content").first).to_contain_text("onerror=window.__pwned=1")
    assert page.evaluate("() => window.__pwned") is None
    # No element of the answer's: CodeMirror's own cursor buffers are the only img (no src).
    made = view.locator("img:not(.cm-widgetBuffer), img[src], [onerror]")
    assert made.count() == 0, made.evaluate_all("els => els.map(e => e.outerHTML)")
    assert view.locator(".nbchat-proposal-why").inner_text().startswith("<img src=x")
    expect(page.locator("img[src='x'], [onerror]")).to_have_count(0)  # the side panel's too
    marks = view.locator(".cm-specialChar")
    titles = marks.evaluate_all("els => els.map(e => e.title)")
    assert "Control character right-to-left override" in titles, titles
    nb.screenshot("1-hostile-proposal")
    page.wait_for_function("() => true", timeout=10_000)  # the page answers
    page.keyboard.press("Escape")
    expect(page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[1]) == "x = 1\n"
    assert page.evaluate("() => window.__pwned") is None


def streaming_on(nb: NotebookPage, index: int) -> Locator:
    return nb.cell(index).locator(".nbchat-streaming-edit")


def drawn_text(nb: NotebookPage, index: int) -> str:
    """The text of the edit drawn while it streams ("" when none is drawn)."""
    view = streaming_on(nb, index).locator(".cm-content")
    return view.first.inner_text() if view.count() else ""


def is_prefix_drawn(drawn: str, whole: str) -> bool:
    """Whether ``drawn`` (lines as the page shows them) is how the start of ``whole`` looks."""
    lines, expected = drawn.split("\n"), whole.split("\n")
    return lines[:-1] == expected[: len(lines) - 1] and \
        expected[len(lines) - 1].startswith(lines[-1])  # fmt: skip


def test_ctrl_i_the_proposal_grows_on_the_cell_while_it_streams_then_enter_lands_it(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_asking(notebook, scripted_server, tmp_path, [LINES, "# end"],
                          lambda ids: [
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[1], "source": GROWN, "why": "Grown."})],
              when="grow the first two", times=1, delay=0.03),
        Reply("Done.", after_tool="edit_cell"),
    ])  # fmt: skip
    page = nb.page
    select_lines(nb, 1, 0, 2)
    page.keyboard.press("Control+i")
    ask_box(nb, 1).fill("grow the first two lines")
    ask_box(nb, 1).press("Enter")
    growing = streaming_on(nb, 1)
    samples = [wait_until(lambda: len(drawn_text(nb, 1)) > 20 and drawn_text(nb, 1),
                          "the edit drawn as it streams", nb)]  # fmt: skip
    nb.screenshot("1-streaming")
    samples.append(wait_until(lambda: len(t := drawn_text(nb, 1)) > len(samples[0]) + 40 and t,
                              "the drawn edit grown", nb))  # fmt: skip
    assert edit_on(nb, 1).count() == 0, "the call was complete before two samples"
    assert len(samples[1]) < len(GROWN) - 40  # still being written
    for sample in samples:
        assert is_prefix_drawn(sample, GROWN), sample
    # Only to read: no button, nothing focusable to accept it, nothing landed.
    assert growing.locator("button, input").count() == 0
    expect(growing.locator(".nbchat-proposal-title")).to_have_text("Proposed edit, being written…")
    assert growing.locator(".nbchat-changed-line").count() > 0  # its new lines marked
    assert source_of(nb, ids[1]) == LINES

    view = edit_on(nb, 1)
    expect(view).to_be_focused(timeout=30_000)  # the stored proposal, which takes the keyboard
    expect(growing).to_have_count(0)  # in place of the streamed drawing
    expect(view.locator(".nbchat-chunk-control").first).to_be_visible()  # the merge view
    nb.screenshot("2-stored")
    page.keyboard.press("Enter")
    wait_until(lambda: source_of(nb, ids[1]) == GROWN, "Enter landed the final proposal", nb)
    expect(page.locator(".nbchat-proposal, .nbchat-streaming-edit")).to_have_count(0,
                                                                                   timeout=30_000)
    assert source_of(nb, ids[1]) == GROWN  # exactly the proposal


def test_a_hostile_streamed_edit_is_inert_and_goes_when_the_turn_fails(
    notebook, scripted_server: ScriptedServer, tmp_path: Path
):
    nb, ids = open_asking(notebook, scripted_server, tmp_path, ["x = 1\n", "# end"],
                          lambda ids: [
        # Written up to the bidi line, a pause, then the 10,000 lines at once.
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[1], "source": HOSTILE,
                                         "why": "<img src=x onerror=window.__pwned=2>"})],
              when="make it long", times=1, stall_after=20, stall=6),
        Reply("Done.", after_tool="edit_cell"),
        # The second question's call is cut off by a failure mid-stream.
        Reply(tool_calls=[("edit_cell", {"cell_id": ids[1], "source": HOSTILE, "why": "x"})],
              when="again", times=1, delay=0.02, error_after=40),
    ])  # fmt: skip
    page = nb.page
    nb.cell(1).locator(".cm-line").first.click()
    page.keyboard.press("Control+i")
    ask_box(nb, 1).fill("make it long")
    page.keyboard.press("Enter")
    growing = streaming_on(nb, 1)
    wait_until(lambda: "dcba" in drawn_text(nb, 1), "the hostile lines drawn as they stream", nb)
    assert "onerror=window.__pwned=1" in drawn_text(nb, 1)
    assert edit_on(nb, 1).count() == 0  # the call is not complete yet
    assert page.evaluate("() => window.__pwned") is None
    made = growing.locator("img:not(.cm-widgetBuffer), img[src], [onerror]")
    assert made.count() == 0, made.evaluate_all("els => els.map(e => e.outerHTML)")
    titles = growing.locator(".cm-specialChar").evaluate_all("els => els.map(e => e.title)")
    assert "Control character right-to-left override" in titles, titles
    assert growing.locator("button").count() == 0
    nb.screenshot("1-hostile-streaming")

    view = edit_on(nb, 1)
    expect(view).to_be_focused(timeout=60_000)  # all 10,000 lines came: the stored proposal
    expect(growing).to_have_count(0)
    assert page.evaluate("() => window.__pwned") is None
    page.keyboard.press("Escape")
    expect(page.locator(".nbchat-proposal")).to_have_count(0, timeout=30_000)
    assert source_of(nb, ids[1]) == "x = 1\n"

    nb.cell(1).locator(".cm-line").first.click()
    page.keyboard.press("Control+i")
    ask_box(nb, 1).fill("again")
    page.keyboard.press("Enter")
    wait_until(lambda: drawn_text(nb, 1), "the second edit drawn as it streams", nb)
    expect(growing).to_have_count(0, timeout=30_000)  # the turn failed: the drawing went
    expect(side(page)).to_contain_text("error mid-stream", timeout=30_000)
    time.sleep(1)
    expect(page.locator(".nbchat-proposal, .nbchat-streaming-edit")).to_have_count(0)
    assert source_of(nb, ids[1]) == "x = 1\n"
    assert page.evaluate("() => window.__pwned") is None
