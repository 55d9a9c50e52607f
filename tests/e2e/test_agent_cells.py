"""An outside agent's cell changes, answered by the person, made in real JupyterLab.

One JupyterLab for the module with nbchat's store, user and agent tokens in tmp
dirs. The agent is the official MCP SDK's client over HTTP with a minted token;
the person answers in a cell of the notebook (``%chat --answer HANDLE ...``);
the kernel asks the page that has the notebook open to make the change
through the ``nbchat.notebook`` comm, whose reply ends the agent's call.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent_helpers import (
    agent_server,
    kernel_client,
    mcp_call,
    mint,
    rest,
    result_data,
    run_cell,
    start_session,
    write_notebook,
)

from .jupyterlab import JupyterLab, NotebookPage, open_notebook, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FRONT_END_WAIT = 10  # seconds the kernel waits for a page (nbchat's _agent_kernel)

# The notebook's model as the page holds it: cells with ids, sources, metadata, outputs.
_JS_CELLS = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells;
}
"""
_JS_ADD_CELL = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    panel.content.model.sharedModel.insertCell(panel.content.model.cells.length,
                                               {cell_type: 'code', source: ''});
}
"""
# One cell as the page shows it: sent to the kernel or run, its prompt, outputs and kernel.
_JS_CELL_STATE = """
([path, id]) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    const cell = panel.content.widgets.find(w => w.model.id === id);
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    const prompt = cell.node.querySelector('.jp-InputPrompt').textContent;
    return {
        sent: cell.model.executionCount !== null || prompt.includes('*'),
        prompt, count: cell.model.executionCount,
        outputs: cell.node.querySelector('.jp-Cell-outputArea').textContent.slice(0, 2000),
        kernel: kernel ? [kernel.status, kernel.connectionStatus] : null,
    };
}
"""
_JS_DIRTY = """
(path) => Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path && w.content).context.model.dirty
"""


# -- the lab ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-cells")


@pytest.fixture(scope="module")
def lab(base: Path) -> Iterator[JupyterLab]:
    with agent_server(base) as server:
        yield server


@pytest.fixture(scope="module")
def token(base: Path, lab: JupyterLab) -> str:
    return mint(base, "cells-agent")


@pytest.fixture
def agent(lab: JupyterLab, token: str) -> Callable[..., Any]:
    """One tool call of the agent; its structured result (or text)."""

    def call(tool: str, **arguments: Any) -> Any:
        # In a thread: Playwright's sync API keeps an event loop running in this one.
        with ThreadPoolExecutor(1) as pool:
            result = pool.submit(mcp_call, lab, token, tool, **arguments).result()
        data = result_data(result)
        assert not result.is_error, (tool, data)
        return data

    return call


# -- helpers -------------------------------------------------------------------------------


def log_tail(lab: JupyterLab, chars: int = 4000) -> str:
    return lab.log()[-chars:]


def wait_until(condition: Callable[[], Any], what: str, page: Page | None, lab: JupyterLab,
               timeout: float = 30) -> Any:  # fmt: skip
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            if page is not None:
                screenshot(page, f"agent-cells/{re.sub(r'[^A-Za-z0-9]+', '-', what)}")
            raise AssertionError(f"{what} within {timeout} s; server log ends:\n{log_tail(lab)}")
        time.sleep(0.5)
    return value


def cells_of(nb: NotebookPage) -> list[dict]:
    cells = nb.page.evaluate(_JS_CELLS, nb.path)
    for cell in cells:  # the model gives a source as one string; be sure of it
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return cells


def open_saved(page: Page, lab: JupyterLab, name: str, cells: list[str]) -> NotebookPage:
    """Open a notebook of ``cells`` and save it with Ctrl+S (the agent reads the saved file)."""
    nb = open_notebook(page, lab, cells, name=name)
    file = lab.root_dir / nb.path
    before = file.stat().st_mtime_ns
    nb.cell(0).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    wait_until(lambda: file.stat().st_mtime_ns != before and not page.evaluate(_JS_DIRTY, nb.path),
               "the notebook saved", page, lab)  # fmt: skip
    return nb


def answer(nb: NotebookPage, lab: JupyterLab, index: int, line: str) -> int:
    """The person types ``line`` into cell ``index`` and runs it; its execution count.

    Followed by its id: a cell the answer inserts above moves it down.
    """
    cell_id = cells_of(nb)[index]["id"]
    editor = nb.cell(index).locator(".jp-InputArea-editor .cm-content")
    editor.click()
    nb.page.keyboard.press("Control+a")
    nb.page.keyboard.insert_text(line)
    expect(nb.cell(index).locator(".jp-InputArea-editor")).to_have_text(line)
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("Shift+Enter")
    try:  # JupyterLab marks a cell it sends to the kernel at once ([*]), or it has run
        wait_until(lambda: nb.page.evaluate(_JS_CELL_STATE, [nb.path, cell_id])["sent"],
                   "the answer cell sent", None, lab, timeout=15)  # fmt: skip
    except AssertionError:  # a key lost by a loaded browser: the cell never left the page
        nb.cell(index).locator(".jp-InputPrompt").click()
        nb.page.keyboard.press("Escape")
        nb.page.keyboard.press("Shift+Enter")

    def count() -> int | None:
        cell = next(c for c in cells_of(nb) if c["id"] == cell_id)
        return cell.get("execution_count") if nb.is_kernel_idle() else None

    try:
        return wait_until(count, "the answer cell run", nb.page, lab, timeout=60)
    except AssertionError as error:
        state = nb.page.evaluate(_JS_CELL_STATE, [nb.path, cell_id])
        raise AssertionError(f"the answer cell, as the page shows it: {state}\n{error}") from None


def cell_ids(agent: Callable[..., Any], path: str) -> list[str]:
    """The cells' ids as the agent reads them (from the saved file)."""
    text = agent("read_cells", path=path)
    text = text["result"] if isinstance(text, dict) else text  # the SDK wraps a str result
    return re.findall(r'<cell index="\d+" id="([^"]+)"', text)


def connected(lab: JupyterLab, session: dict[str, Any]) -> Any:
    """A jupyter_client client on the session's kernel.

    On a loaded machine a missed heartbeat makes ``wait_for_ready`` say the kernel
    died while it is starting: try again before believing it.
    """
    for attempt in range(3):
        try:
            return kernel_client(lab, session)
        except RuntimeError:
            if attempt == 2:
                raise
            time.sleep(2)
    raise AssertionError("unreachable")


def finished(agent: Callable[..., Any], handle: str) -> dict:
    """call_status, waiting (20 s at most) for the call to end."""
    return agent("call_status", handle=handle, wait_seconds=20)


# -- the tests ---------------------------------------------------------------------------------


def test_an_inserted_cell_appears_where_the_agent_asked(
    page: Page, lab: JupyterLab, agent: Callable[..., Any]
):
    nb = open_saved(page, lab, "inserted", ["x = 1", "print(x)", "# the person answers", "# end"])
    call = agent("insert_cell", path=nb.path, source='print("from the agent")',
                 why="add a check", index=1)  # fmt: skip
    handle = call["handle"]
    assert call["state"] == "waiting"
    assert len(cells_of(nb)) == 4  # nothing before the person answers

    answer(nb, lab, 2, f"%chat --answer {handle} run")
    cells = wait_until(lambda: len(c := cells_of(nb)) == 5 and c, "the agent's cell inserted",
                       page, lab)  # fmt: skip
    new = cells[1]
    assert [c["source"] for c in cells] == [
        "x = 1",
        'print("from the agent")',
        "print(x)",
        f"%chat --answer {handle} run",
        "# end",
    ]
    assert new["cell_type"] == "code"
    assert new["metadata"]["nbchat"]["agent_call"] == handle
    assert new["metadata"]["nbchat"]["agent"] == "cells-agent"
    assert new.get("execution_count") is None and new.get("outputs") == []  # not run
    expect(nb.cell(1).locator(".jp-InputArea-editor")).to_have_text('print("from the agent")')

    done = finished(agent, handle)
    assert done["state"] == "done", (done, log_tail(lab))
    assert f"The cell was inserted; its id is {new['id']}." in done["result"]
    nb.screenshot("inserted")


def test_an_edit_the_person_changed_goes_in_as_they_wrote_it(
    page: Page, lab: JupyterLab, agent: Callable[..., Any]
):
    nb = open_saved(page, lab, "edited", ["y = 1", "# the person answers", "# end"])
    target = cell_ids(agent, nb.path)[0]
    assert target == cells_of(nb)[0]["id"]
    call = agent("edit_cell", path=nb.path, cell_id=target, source="y = 99", why="change y")
    handle = call["handle"]
    assert call["state"] == "waiting"

    answer(nb, lab, 1, f"%chat --answer {handle} 'edit: y = 2'")
    wait_until(lambda: cells_of(nb)[0]["source"] == "y = 2", "the cell edited", page, lab)
    cells = cells_of(nb)
    assert len(cells) == 3
    assert cells[0]["id"] == target
    assert cells[0]["metadata"]["nbchat"]["agent_call"] == handle
    expect(nb.cell(0).locator(".jp-InputArea-editor")).to_have_text("y = 2")

    done = finished(agent, handle)
    assert done["state"] == "done", (done, log_tail(lab))
    result = done["result"]
    assert "edited it first" in result and "y = 2" in result
    assert result.index("edited it first") < result.index("y = 2")
    assert "y = 99" not in result
    assert f"The cell was edited; its id is {target}." in result


def test_an_executed_cell_runs_once_and_its_outputs_reach_the_agent(
    page: Page, lab: JupyterLab, agent: Callable[..., Any]
):
    runs = "print(sum(('z = 40' + ' + 2') in source for source in In))"
    nb = open_saved(page, lab, "executed",
                    ["z = 40 + 2\nprint(z)", "# the person answers", runs, "# end"])  # fmt: skip
    target = cell_ids(agent, nb.path)[0]
    call = agent("execute_cell", path=nb.path, cell_id=target, why="see z")
    handle = call["handle"]
    assert call["state"] == "waiting"
    assert nb.execution_count(0) is None

    answered = answer(nb, lab, 1, f"%chat --answer {handle} run")
    nb.wait_for_text(0, "42")
    wait_until(nb.is_kernel_idle, "the kernel idle", page, lab)
    done = finished(agent, handle)
    assert done["state"] == "done", (done, log_tail(lab))
    count = nb.execution_count(0)
    assert count == answered + 1
    assert nb.output(0).inner_text().strip() == "42"
    cell = cells_of(nb)[0]
    assert cell["source"] == "z = 40 + 2\nprint(z)"
    assert cell["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]
    assert cell["metadata"]["nbchat"]["agent_call"] == handle
    result = done["result"]
    assert f"The cell ran (execution count {count})." in result
    outputs = json.loads(result.split("Its outputs: ", 1)[1].split("\n</output>")[0])
    assert outputs == [{"output_type": "stream", "name": "stdout", "text": "42\n"}]

    nb.run_cell(2)  # it ran once: the kernel's history holds its source once
    nb.wait_for_text(2, "1")
    assert nb.output(2).inner_text().strip() == "1"
    assert nb.execution_count(0) == count
    assert nb.execution_count(2) == count + 1
    nb.screenshot("executed")


def test_a_rejected_insert_inserts_nothing(page: Page, lab: JupyterLab, agent: Callable[..., Any]):
    nb = open_saved(page, lab, "rejected", ["a = 1", "# the person answers", "# end"])
    call = agent("insert_cell", path=nb.path, source="a = 'from the agent'", why="overwrite a",
                 index=0)  # fmt: skip
    handle = call["handle"]
    answer(nb, lab, 1, f"%chat --answer {handle} 'reject: not now'")

    done = finished(agent, handle)
    assert done["state"] == "rejected", (done, log_tail(lab))
    assert "not now" in done["answer"]
    page.wait_for_timeout(2000)  # a change would have come right after the answer
    cells = cells_of(nb)
    assert [c["source"] for c in cells] == [
        "a = 1",
        f"%chat --answer {handle} 'reject: not now'",
        "# end",
    ]
    assert not any("nbchat" in c["metadata"] for c in cells)


def test_with_no_page_open_the_change_goes_into_the_saved_file(
    lab: JupyterLab, agent: Callable[..., Any]
):
    name = "unopened.ipynb"
    file = write_notebook(lab, name, ["w = 1"])
    session = start_session(lab, name)
    client = connected(lab, session)
    try:
        call = agent("insert_cell", path=name, source="w = 2", why="add a cell", index=0)
        handle = call["handle"]
        assert call["state"] == "waiting"
        answered = time.monotonic()
        run_cell(client, f"%chat --answer {handle} run")
        done = finished(agent, handle)
        if done["state"] == "running":  # one more wait, within ~20 s of the answer in all
            done = finished(agent, handle)
        took = time.monotonic() - answered
        assert done["state"] == "done", (done, took, log_tail(lab))
        assert took < FRONT_END_WAIT + 10, took
        assert "made in its saved file" in done["result"], done["result"]
        sources = ["".join(c["source"]) for c in json.loads(file.read_text())["cells"]]
        assert sources == ["w = 2", "w = 1"]
    finally:
        client.stop_channels()


def test_a_notebook_sharing_the_kernel_never_gets_another_ones_change(
    page: Page, lab: JupyterLab, agent: Callable[..., Any]
):
    """B, open in the page, uses the kernel of A, which no page holds: A's change goes into
    A's saved file, and B is left as it was."""
    write_notebook(lab, "shared-a.ipynb", ["a = 1"])
    first = start_session(lab, "shared-a.ipynb")
    write_notebook(lab, "shared-b.ipynb", ["b = 1"])
    body = json.dumps({"path": "shared-b.ipynb", "type": "notebook", "name": "shared-b.ipynb",
                       "kernel": {"id": first["kernel"]["id"]}}).encode()  # fmt: skip
    rest(lab, "api/sessions", "POST", body)
    nb = NotebookPage(page, "shared-b.ipynb")
    page.goto(lab.lab_url(nb.path))
    page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    nb.cells.nth(0).wait_for(timeout=60_000)
    nb.wait_for_idle(60)
    call = agent("insert_cell", path="shared-a.ipynb", source="a = 2", why="for A", index=0)
    assert call["state"] == "waiting"
    page.keyboard.press("Escape")
    nb.page.evaluate(_JS_ADD_CELL, nb.path)  # a cell in B to answer from
    wait_until(lambda: len(cells_of(nb)) == 2, "a cell to answer in", page, lab)
    answer(nb, lab, 1, f"%chat --answer {call['handle']} run")
    done = finished(agent, call["handle"])
    if done["state"] == "running":
        done = finished(agent, call["handle"])
    assert done["state"] == "done", (done, log_tail(lab))
    assert "made in its saved file" in done["result"], done["result"]
    saved = json.loads((lab.root_dir / "shared-a.ipynb").read_text())["cells"]
    assert ["".join(c["source"]) for c in saved] == ["a = 2", "a = 1"]
    shown = [c["source"] for c in cells_of(nb)]  # Shift+Enter on the last cell adds one
    assert shown[:2] == ["b = 1", f"%chat --answer {call['handle']} run"] and "a = 2" not in shown
    nb.screenshot("shared-kernel")
