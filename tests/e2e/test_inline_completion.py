"""Code suggestions as ghost text in real JupyterLab: nbchat's inline completion provider.

One JupyterLab for the module, the server (where ``POST nbchat/complete`` runs)
and its kernels pointed at a scripted model server. JupyterLab's inline
completer calls providers only when they are enabled, and nbchat's is opt-in:
the user settings of ``@jupyterlab/completer-extension:inline-completer`` turn
it on (``providers.nbchat.enabled``), as a person does in the Settings Editor.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import JupyterLab, NotebookPage, open_notebook, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

SETTINGS = Path(
    "lab/user-settings/@jupyterlab/completer-extension/inline-completer.jupyterlab-settings"
)
PREFIX = "def add(a, b):\n    return "
GHOST = ".jp-GhostText"
MAX_SUGGESTION = 4000

# The source of the active cell of the notebook at `path`, read from its model.
_JS_ACTIVE_SOURCE = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.activeCell.model.sharedModel.getSource();
}
"""


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture(scope="module")
def lab(
    tmp_path_factory: pytest.TempPathFactory, model_server: ScriptedServer
) -> Iterator[JupyterLab]:
    base = tmp_path_factory.mktemp("inline-completion")
    env = {
        "NBCHAT_BASE_URL": model_server.url,
        "NBCHAT_MODEL": "scripted-small",
        "NBCHAT_STORE": str(base / "store"),
    }
    with start_jupyterlab(base, env=env) as server:
        yield server


def set_provider(lab: JupyterLab, **settings: object) -> None:
    """nbchat's provider settings, as the Settings Editor saves them (read when a page loads)."""
    path = lab.root_dir.parent / "config" / SETTINGS  # the server's JUPYTER_CONFIG_DIR
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"providers": {"nbchat": settings}}))


@pytest.fixture
def enabled(lab: JupyterLab, model_server: ScriptedServer) -> JupyterLab:
    set_provider(lab, enabled=True)
    model_server.reset()
    return lab


def completions(page: Page) -> list[dict]:
    """The bodies of the page's requests to nbchat/complete, as they are sent."""
    sent: list[dict] = []

    def seen(request: Request) -> None:
        if request.url.split("?")[0].endswith("/nbchat/complete"):
            sent.append(json.loads(request.post_data or "null"))

    page.on("request", seen)
    return sent


def wait_until(condition: Callable[[], object], what: str, page: Page, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            screenshot(page, f"inline-completion/{what.replace(' ', '-')}")
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)
    return value


def type_in_cell(nb: NotebookPage, index: int, text: str, delay: float = 30) -> None:
    """Click into cell `index`'s editor and type `text` (Enter auto-indents, as for a person)."""
    nb.cell(index).locator(".cm-content").click()
    nb.page.keyboard.press("Control+End")
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if number:
            nb.page.keyboard.press("Enter")
        nb.page.keyboard.type(line.lstrip(" ") if number else line, delay=delay)


def source(nb: NotebookPage) -> str:
    return nb.page.evaluate(_JS_ACTIVE_SOURCE, nb.path)


def ghost(page: Page) -> str:
    found = page.locator(GHOST)
    return found.first.inner_text() if found.count() else ""


def suggestion_requests(server: ScriptedServer) -> list:
    """The model endpoint's requests for suggestions (FIM forms, or the chat fallback)."""
    return [r for r in server.requests if r.method == "POST"]


# -- the tests --------------------------------------------------------------------


def test_the_suggestion_streams_as_ghost_text_and_tab_inserts_it_exactly(
    page: Page, enabled: JupyterLab, model_server: ScriptedServer
):
    suggestion = "a + b  # the sum"
    model_server.script(Reply(suggestion, chunk_size=3, delay=0.1))
    sent = completions(page)
    nb = open_notebook(page, enabled, ["x = 1", "# notes\ny = 2", ""], name="ghost")
    type_in_cell(nb, 2, PREFIX)
    assert source(nb) == PREFIX
    wait_until(lambda: ghost(page) == suggestion, "the whole suggestion showed as ghost text", page)
    nb.screenshot("ghost-text")
    assert source(nb) == PREFIX  # shown, not inserted
    page.keyboard.press("Tab")
    wait_until(lambda: page.locator(GHOST).count() == 0, "the ghost text went", page)
    assert source(nb) == PREFIX + suggestion

    assert len(sent) == 1, sent  # one request for one pause in typing
    assert sent[0]["prefix"] == PREFIX and sent[0]["suffix"] == ""
    assert sent[0]["path"] == nb.path
    assert sent[0]["cells"] == ["x = 1", "# notes\ny = 2"]
    assert sent[0]["language"] == "python" and sent[0]["max_tokens"] == 64


def test_typing_on_before_a_slow_suggestion_arrives_cancels_its_request(
    page: Page, enabled: JupyterLab, model_server: ScriptedServer
):
    # Headers at once, then nothing for 30 s. (A `hold` before the headers would not do:
    # until the endpoint answers, the server keeps its request open after a stop.)
    model_server.script(Reply("too late", stall_after=0, stall=30, times=1), Reply("b"))
    sent = completions(page)
    nb = open_notebook(page, enabled, [""], name="typing-on")
    type_in_cell(nb, 0, "total = a")
    slow = model_server.wait_for(lambda: next(iter(suggestion_requests(model_server)), None), 20)
    page.keyboard.type(" + ", delay=30)  # typed on while the suggestion is held
    model_server.wait_for(lambda: slow.disconnected, 10)
    assert not slow.completed
    wait_until(lambda: ghost(page) == "b", "the next suggestion showed", page)
    assert page.locator(GHOST).count() == 1
    assert [body["prefix"] for body in sent] == ["total = a", "total = a + "]


def test_with_the_provider_off_nothing_is_sent(
    page: Page, lab: JupyterLab, model_server: ScriptedServer
):
    set_provider(lab, enabled=False)
    model_server.reset()
    model_server.script(Reply("never"))
    sent = completions(page)
    nb = open_notebook(page, lab, [""], name="off")
    type_in_cell(nb, 0, PREFIX)
    time.sleep(3)  # well past the debounce and any answer
    assert sent == []
    assert suggestion_requests(model_server) == []
    assert page.locator(GHOST).count() == 0
    page.keyboard.press("Tab")  # an ordinary Tab: indents, or opens the tab completer
    assert source(nb).startswith(PREFIX)


HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>\u202e# evil'


def test_hostile_suggestions_are_inserted_as_inert_text(
    page: Page, enabled: JupyterLab, model_server: ScriptedServer
):
    model_server.script(Reply(HOSTILE, chunk_size=7))
    nb = open_notebook(page, enabled, [""], name="hostile")
    type_in_cell(nb, 0, PREFIX)
    wait_until(lambda: ghost(page) == HOSTILE, "the hostile suggestion showed as text", page)
    page.keyboard.press("Tab")
    wait_until(lambda: source(nb) == PREFIX + HOSTILE, "the hostile text inserted as it is", page)
    nb.screenshot("hostile")
    assert page.evaluate("window.__pwned") is None
    assert (
        page.evaluate("document.querySelectorAll('img[src=\"x\"], .jp-Notebook script').length")
        == 0
    )


def test_a_100_kb_suggestion_is_cut_at_4000_characters(
    page: Page, enabled: JupyterLab, model_server: ScriptedServer
):
    long = "<b>x</b>" + "A" * 100_000
    model_server.script(Reply(long, chunk_size=1000))
    nb = open_notebook(page, enabled, [""], name="long")
    type_in_cell(nb, 0, PREFIX)
    wait_until(lambda: len(ghost(page)) >= MAX_SUGGESTION, "the long suggestion showed", page)
    time.sleep(1)  # nothing more arrives
    page.keyboard.press("Tab")
    wait_until(lambda: source(nb) != PREFIX, "the suggestion inserted", page)
    assert source(nb) == PREFIX + long[:MAX_SUGGESTION]
    assert page.evaluate("window.__pwned") is None


def test_the_browser_cuts_a_suggestion_at_4000_characters_itself(
    page: Page, enabled: JupyterLab, model_server: ScriptedServer
):
    """Whatever the server sends: here a route standing in for it sends 100 KB."""
    pieces = [HOSTILE] + ["\U0001f600" * 500] * 200  # astral characters: no half pair at the cut
    body = "".join(json.dumps({"text": p}) + "\n" for p in pieces) + '{"done": true}\n'
    page.route(
        "**/nbchat/complete*",
        lambda route: route.fulfill(status=200, content_type="application/x-ndjson", body=body),
    )
    nb = open_notebook(page, enabled, [""], name="client-cut")
    type_in_cell(nb, 0, PREFIX)
    wait_until(lambda: len(ghost(page)) > 100, "the suggestion showed", page)
    time.sleep(0.5)
    page.keyboard.press("Tab")
    wait_until(lambda: source(nb) != PREFIX, "the suggestion inserted", page)
    inserted = source(nb)[len(PREFIX) :]
    assert inserted.startswith(HOSTILE)
    units = len(inserted.encode("utf-16-le")) // 2  # JavaScript's length
    assert MAX_SUGGESTION - 1 <= units <= MAX_SUGGESTION
    assert inserted == "".join(pieces)[: len(inserted)]
    assert page.evaluate("window.__pwned") is None


_JS_FILE_SOURCE = """
(path) => {
    const widget = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path);
    return widget ? widget.context.model.sharedModel.getSource() : null;
}
"""


def test_in_a_python_file_too(page: Page, enabled: JupyterLab, model_server: ScriptedServer):
    model_server.script(Reply("a * b", chunk_size=2, delay=0.05))
    sent = completions(page)
    (enabled.root_dir / "mul.py").write_text("import math\n\n")
    page.goto(enabled.lab_url("mul.py"))
    editor = page.locator(".jp-FileEditor .cm-content")
    editor.wait_for(timeout=60_000)
    editor.click()
    page.keyboard.press("Control+End")
    page.keyboard.type("def mul(a, b):", delay=30)
    page.keyboard.press("Enter")
    page.keyboard.type("return ", delay=30)
    wait_until(lambda: ghost(page) == "a * b", "the suggestion showed in the file", page)
    page.keyboard.press("Tab")
    expected = "import math\n\ndef mul(a, b):\n    return a * b"
    wait_until(
        lambda: page.evaluate(_JS_FILE_SOURCE, "mul.py") == expected, "the file's text", page
    )
    assert len(sent) == 1, sent
    assert sent[0]["path"] == "mul.py" and sent[0]["cells"] == []
    assert sent[0]["prefix"] == "import math\n\ndef mul(a, b):\n    return "


def test_the_settings_editor_shows_nbchat_and_its_settings_reach_the_request(
    page: Page, lab: JupyterLab, model_server: ScriptedServer
):
    set_provider(lab, enabled=True, model="scripted-large", maxTokens=16)
    model_server.reset()
    model_server.script(Reply("1"))
    sent = completions(page)
    nb = open_notebook(page, lab, [""], name="settings")
    type_in_cell(nb, 0, "n = ")
    wait_until(lambda: ghost(page) == "1", "the suggestion showed", page)
    assert sent[0]["model"] == "scripted-large" and sent[0]["max_tokens"] == 16
    assert [r.model for r in suggestion_requests(model_server)][-1] == "scripted-large"

    page.keyboard.press("Escape")
    page.evaluate("window.jupyterapp.commands.execute('settingeditor:open', {query: 'Inline'})")
    form = page.locator(".jp-SettingsPanel, .jp-SettingsEditor").first
    wait_until(lambda: "nbchat provider" in form.inner_text(), "nbchat's settings listed", page)
    text = form.inner_text()
    for label in ("Model", "Maximum tokens", "Debouncer delay", "Enabled"):
        assert label in text, label
    screenshot(page, "inline-completion/settings-editor")
