"""nbchat's JupyterLab extension: the chat opens without a cell, and the kernel edits its notebook.

One JupyterLab for the module, its kernels pointed at a scripted model server,
with two more kernelspecs: a Python without nbchat (a bare venv with ipykernel)
and a kernel whose language is not Python (``echo_kernel.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import Page, expect

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import JupyterLab, NotebookPage, open_notebook, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
SHORTCUT = "Control+Shift+Y"  # Accel Shift Y
LABEL = "nbchat: Open chat for this notebook"
ICON = ".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='nbchat-sidebar']"
ANSWER = "Opened from the sidebar, and answering from the notebook's own kernel."

# The right area's sidecars: id, title and whether the panel inside has painted.
_JS_SIDECARS = """
() => Array.from(window.jupyterapp.shell.widgets('right'))
    .filter(w => w.hasClass('jupyterlab-sidecar'))
    .map(w => ({id: w.id, label: w.title.label,
                panel: !!w.node.querySelector('.nbchat-panel textarea')}))
"""
# A notebook's model as JSON (cells with ids, sources, counts, outputs) and whether it is dirty.
_JS_MODEL = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return {cells: panel.content.model.toJSON().cells, dirty: panel.context.model.dirty};
}
"""
_JS_CELL = """
([path, id]) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    const cell = Array.from(panel.content.model.cells).find(c => c.id === id);
    return cell ? cell.toJSON() : null;
}
"""


# -- the lab ------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with ipykernel and without nbchat: a fresh venv."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "ipykernel"], check=True,
                   capture_output=True)
    return python


def write_kernelspec(data_dir: Path, name: str, display: str, language: str,
                     argv: list[str]) -> None:
    spec = {"argv": [*argv, "-f", "{connection_file}"], "display_name": display,
            "language": language}
    folder = data_dir / "kernels" / name
    folder.mkdir(parents=True)
    (folder / "kernel.json").write_text(json.dumps(spec))


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, model_server: ScriptedServer, bare_python: Path
) -> Iterator[JupyterLab]:
    base = tmp_path_factory.mktemp("lab-extension")
    data = base / "data"  # the server's JUPYTER_DATA_DIR (see server_env)
    write_kernelspec(data, "bare", "Python (no nbchat)", "python",
                     [str(bare_python), "-m", "ipykernel_launcher"])
    write_kernelspec(data, "echo", "Echo", "echo", [sys.executable, str(HERE / "echo_kernel.py")])
    env = {"NBCHAT_BASE_URL": model_server.url, "NBCHAT_MODEL": "scripted-small",
           "NBCHAT_STORE": str(base / "store")}
    with start_jupyterlab(base, env=env) as server:
        yield server


# -- helpers ------------------------------------------------------------------


def write_notebook(lab: JupyterLab, name: str, cells: list[str], kernel: str = "python3") -> str:
    specs = {"python3": ("Python 3 (ipykernel)", "python"),
             "bare": ("Python (no nbchat)", "python"), "echo": ("Echo", "echo")}
    display, language = specs[kernel]
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells],
        metadata={"kernelspec": {"name": kernel, "display_name": display, "language": language}},
    )
    path = f"{name}.ipynb"
    nbformat.write(notebook, str(lab.root_dir / path))
    return path


def open_in_page(page: Page, lab: JupyterLab, name: str, cells: list[str],
                 kernel: str = "python3") -> NotebookPage:
    """Open one more notebook in the page already showing JupyterLab."""
    path = write_notebook(lab, name, cells, kernel)
    page.evaluate("p => window.jupyterapp.commands.execute('docmanager:open', {path: p})", path)
    nb = NotebookPage(page, path)
    nb.cells.nth(len(cells) - 1).wait_for(timeout=60_000)
    nb.wait_for_idle(60)
    return nb


def sidecars(page: Page) -> list[dict]:
    return page.evaluate(_JS_SIDECARS)


def wait_until(condition: Callable[[], object], what: str, page: Page, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            screenshot(page, f"lab-extension/{what.replace(' ', '-')}")
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)
    return value


def wait_for_new_panel(page: Page, before: list[dict], label: str) -> dict:
    """The sidecar that opened since ``before``, titled ``label``, with the panel painted."""
    old = {car["id"] for car in before}

    def new() -> dict | None:
        return next((car for car in sidecars(page)
                     if car["id"] not in old and car["label"] == label and car["panel"]), None)

    return wait_until(new, f"a new panel titled {label}", page)


def focus_notebook(nb: NotebookPage) -> None:
    nb.cell(0).locator(".jp-InputPrompt").click()
    nb.page.keyboard.press("Escape")


def toasts(page: Page) -> str:
    return " ".join(page.locator(".Toastify__toast").all_inner_texts())


# -- opening the chat -----------------------------------------------------------


def by_icon(page: Page, nb: NotebookPage) -> None:
    page.locator(ICON).click()


def by_launcher(page: Page, nb: NotebookPage) -> None:
    page.evaluate("window.jupyterapp.commands.execute('launcher:create')")
    page.locator(".jp-LauncherCard[data-category=Other]", has_text="nbchat").click()


def by_palette(page: Page, nb: NotebookPage) -> None:
    focus_notebook(nb)
    page.keyboard.press("Control+Shift+C")  # JupyterLab's own: the command palette
    box = page.locator(".jp-ModalCommandPalette .lm-CommandPalette-input")
    box.fill("open chat for this notebook")
    item = page.locator(".jp-ModalCommandPalette .lm-CommandPalette-item.lm-mod-active")
    expect(item).to_contain_text(LABEL)
    box.press("Enter")


def by_shortcut(page: Page, nb: NotebookPage) -> None:
    focus_notebook(nb)
    page.keyboard.press(SHORTCUT)


def test_icon_tile_palette_and_shortcut_open_the_notebook_kernel_panel(
    page: Page, lab: JupyterLab, model_server: ScriptedServer
):
    model_server.script(Reply(ANSWER, when="which kernel", chunk_size=10, delay=0.01))
    history = "print(len(In), sum('open_from' + '_lab' in s for s in In))"
    nb = open_notebook(page, lab, ["x = 1", history], name="opened")
    nb.run_cell(0)
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    before = wait_until(lambda: (m := page.evaluate(_JS_MODEL, nb.path))["dirty"] is False and m,
                        "the notebook saved", page)
    label = "Chat · opened.ipynb"

    # The icon: the panel opens on the right, the left area gives the room back.
    page.locator(ICON).click()
    wait_for_new_panel(page, [], label)
    panel = page.locator(".jupyterlab-sidecar .nbchat-panel")
    box = panel.locator("textarea")
    expect(box).to_be_focused()
    expect(page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")).to_have_count(1)
    box.fill("Which kernel answers?")
    box.press("Enter")
    expect(panel.locator(".nbchat-conversation")).to_contain_text("answering from the notebook")
    nb.screenshot("1-opened-by-icon")

    # The tile, the palette and the shortcut each bring it back: a new tab, the same panel.
    for way in (by_launcher, by_palette, by_shortcut):
        shown = sidecars(page)
        way(page, nb)
        wait_for_new_panel(page, shown, label)
        assert len(sidecars(page)) == 1, way.__name__
        expect(panel.locator(".nbchat-conversation")).to_contain_text("answering from")

    # Nothing of it reached the notebook or the kernel's history.
    after = page.evaluate(_JS_MODEL, nb.path)
    assert after == before
    assert not after["dirty"]
    nb.run_cell(1)
    nb.wait_for_text(1, "3 0")  # In = ['', 'x = 1', this cell]
    assert nb.execution_count(1) == 2  # silent runs count nothing
    assert toasts(page) == ""


def test_the_tile_with_no_notebook_open_makes_one(page: Page, lab: JupyterLab):
    page.goto(f"{lab.url}/lab?token={lab.token}&reset")
    tile = page.locator(".jp-LauncherCard[data-category=Other]", has_text="nbchat")
    tile.click(timeout=60_000)
    car = wait_for_new_panel(page, [], "Chat · Untitled.ipynb")
    assert car["label"] == "Chat · Untitled.ipynb"
    expect(page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")).to_have_count(1)


def test_the_shortcut_collides_with_nothing(page: Page, lab: JupyterLab):
    open_notebook(page, lab, ["1"], name="keys")
    bindings = page.evaluate(
        "() => window.jupyterapp.commands.keyBindings.map(b => [b.command, b.keys.join(' ')])"
    )
    ours = [keys for command, keys in bindings if command == "nbchat:open-chat"]
    assert ours == ["Ctrl Shift Y"]  # Accel Shift Y, as Linux spells it
    assert [command for command, keys in bindings if keys == "Ctrl Shift Y"] == [
        "nbchat:open-chat"
    ]


SIDE_OF = "import nbchat.jupyter.panel._side as side; print(side._SIDE)"


def test_each_notebook_kernel_gets_its_own_panel(page: Page, lab: JupyterLab):
    first = open_notebook(page, lab, [SIDE_OF],
                          name="first")
    by_shortcut(page, first)
    wait_for_new_panel(page, [], "Chat · first.ipynb")
    second = open_in_page(page, lab, "second",
                          [SIDE_OF])
    second.run_cell(0)
    second.wait_for_text(0, "None")  # the second kernel has no panel yet
    shown = sidecars(page)
    by_shortcut(page, second)
    wait_for_new_panel(page, shown, "Chat · second.ipynb")
    assert sorted(car["label"] for car in sidecars(page)) == [
        "Chat · first.ipynb", "Chat · second.ipynb"]
    second.run_cell(0)
    second.wait_for_text(0, "_Side(panel=ChatPanel(")
    screenshot(page, "lab-extension/two-notebooks")


def test_a_kernel_without_nbchat_is_told_how_to_get_it(page: Page, lab: JupyterLab):
    path = write_notebook(lab, "bare", ["import sys; print(sys.prefix)"], kernel="bare")
    nb = NotebookPage(page, path)
    page.goto(lab.lab_url(path))
    nb.cells.nth(0).wait_for(timeout=60_000)
    nb.wait_for_idle(60)
    by_shortcut(page, nb)
    toast = page.locator(".Toastify__toast")
    expect(toast).to_have_count(1, timeout=30_000)
    expect(toast).to_contain_text(
        "nbchat is not installed for the kernel Python (no nbchat): run %pip install nbchat "
        "in a cell of bare.ipynb, or choose a kernel that has it.")
    assert sidecars(page) == []
    page.wait_for_timeout(800)  # the toast slides in
    screenshot(page, "lab-extension/no-nbchat")


def test_a_kernel_that_is_not_python_is_told_to_change(page: Page, lab: JupyterLab):
    path = write_notebook(lab, "echoes", ["hello"], kernel="echo")
    nb = NotebookPage(page, path)
    page.goto(lab.lab_url(path))
    nb.cells.nth(0).wait_for(timeout=60_000)
    nb.wait_for_idle(60)
    by_shortcut(page, nb)
    toast = page.locator(".Toastify__toast")
    expect(toast).to_have_count(1, timeout=30_000)
    expect(toast).to_contain_text(
        "nbchat needs a Python kernel; echoes.ipynb runs Echo (echo). Choose a Python kernel "
        "with nbchat (Kernel › Change Kernel…).")
    expect(toast.get_by_role("button", name="Change kernel…")).to_be_visible()
    assert sidecars(page) == []


# -- the kernel changes its notebook ------------------------------------------------

BRIDGE_CELLS = [
    # 0: a request before the page has answered waits for its hello
    "import json\n"
    "from nbchat.jupyter.notebook._lab_bridge import NotebookBridge\n"
    "bridge = NotebookBridge.for_kernel()\n"
    "replies = {}\n"
    "def keep(name):\n"
    "    return lambda reply: replies.__setitem__(name, reply)\n"
    "bridge.request({'op': 'insert', 'index': None, 'cell_type': 'code',\n"
    "                'source': 'print(6 * 7)', 'metadata': {'tags': ['from-agent']}},\n"
    "               keep('insert'))\n"
    "print('attached:', bridge.is_attached)",
    # 1
    "print(json.dumps({'attached': bridge.is_attached, 'path': bridge.path, **replies}))",
    # 2
    "cell_id = replies['insert']['cell_id']\n"
    "bridge.request({'op': 'edit', 'cell_id': cell_id, 'source': \"print(6 * 7, 'edited')\",\n"
    "                'metadata': {'nbchat': {'by': 'agent'}}}, keep('edit'))",
    # 3
    "bridge.request({'op': 'execute', 'cell_id': cell_id}, keep('execute'))",
    # 4
    "bridge.request({'op': 'execute', 'cell_id': 'no-such-cell'}, keep('missing'))\n"
    "bridge.request({'op': 'frobnicate'}, keep('unknown'))\n"
    "bridge.request({'op': 'insert', 'index': 1, 'cell_type': 'markdown',\n"
    "                'source': '<img src=x onerror=\"window.nbchatPwned = 1\"> **bold**'},\n"
    "               keep('markdown'))",
    # 5
    "print(json.dumps(replies))",
    # 6: never run (Shift+Enter on the last cell would add one)
    "# the end",
]


def replies_of(nb: NotebookPage, index: int) -> dict:
    return json.loads(nb.output(index).inner_text())


def test_the_kernel_inserts_edits_and_runs_cells_of_its_notebook(page: Page, lab: JupyterLab):
    nb = open_notebook(page, lab, BRIDGE_CELLS, name="bridged")
    nb.run_cell(0)
    nb.wait_for_text(0, "attached: False")
    # The hello came once the cell returned, and the queued insert with it: a new last cell.
    expect(nb.cells).to_have_count(8)
    inserted = nb.cell(7)
    expect(inserted.locator(".jp-InputArea-editor")).to_have_text("print(6 * 7)")
    assert nb.execution_count(7) is None  # inserted, not run

    nb.run_cell(1)
    first = replies_of(nb, 1)
    cell_id = first["insert"]["cell_id"]
    assert first == {
        "attached": True, "path": "bridged.ipynb",
        "insert": {"id": first["insert"]["id"], "ok": True, "cell_id": cell_id, "index": 7},
    }
    cell = page.evaluate(_JS_CELL, [nb.path, cell_id])
    assert (cell["cell_type"], cell["source"], cell["metadata"]) == (
        "code", "print(6 * 7)", {"tags": ["from-agent"]})

    nb.run_cell(2)
    expect(inserted.locator(".jp-InputArea-editor")).to_have_text("print(6 * 7, 'edited')")
    cell = page.evaluate(_JS_CELL, [nb.path, cell_id])
    assert cell["metadata"] == {"tags": ["from-agent"], "nbchat": {"by": "agent"}}

    # Run as the person would: the output and the count show in the notebook.
    nb.run_cell(3)
    nb.wait_for_text(7, "42 edited")
    wait_until(lambda: nb.is_kernel_idle(), "the kernel idle", page)
    count = nb.execution_count(7)
    assert count == 5  # after cells 0 to 3

    nb.run_cell(4)
    expect(nb.cells).to_have_count(9)  # the markdown cell, at index 1
    nb.run_cell(6)  # cell 5, one lower now
    replies = replies_of(nb, 6)
    assert replies["edit"] == {"id": replies["edit"]["id"], "ok": True, "cell_id": cell_id,
                               "replaced_unsaved": False}  # no source was expected
    assert replies["execute"] == {
        "id": replies["execute"]["id"], "ok": True, "cell_id": cell_id,
        "execution_count": count, "status": "ok",
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "42 edited\n"}],
    }
    assert replies["missing"] == {"id": replies["missing"]["id"], "ok": False,
                                  "error": 'no cell with id "no-such-cell" in bridged.ipynb'}
    assert replies["unknown"] == {
        "id": replies["unknown"]["id"], "ok": False,
        "error": 'unknown op "frobnicate"; the ops are insert, edit, delete, move, outputs, '
                 'execute'}

    # Text from the kernel is a cell's source: no markup of it runs.
    markdown = page.evaluate(_JS_CELL, [nb.path, replies["markdown"]["cell_id"]])
    assert markdown["source"] == '<img src=x onerror="window.nbchatPwned = 1"> **bold**'
    rendered = nb.cell(1).locator(".jp-RenderedMarkdown")
    expect(rendered.locator("strong")).to_have_text("bold")  # JupyterLab's own sanitizer
    assert rendered.locator("img[onerror]").count() == 0
    page.wait_for_timeout(500)
    assert page.evaluate("() => window.nbchatPwned") is None
    nb.screenshot("bridge")
