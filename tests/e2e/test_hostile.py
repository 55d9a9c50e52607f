"""Hostile model and endpoint text in real JupyterLab: shown as text, never run, also reopened.

JupyterLab does not sanitize the outputs of cells the person ran, and a saved
notebook is trusted when it is opened again: any HTML nbchat let through would
run in the page, with the page's access to the Jupyter server. One notebook
plants payloads in every place nbchat shows model or endpoint text (answers,
reasoning, titles, model names, tool names, tool questions, error bodies, the
code a model wants to run and what it printed, the panel), runs it as a person
would, then saves it and opens it again without running a cell.

Each payload marks what it did with its source's name: a script sets
``window.pwned_<source>_<kind>``, an image is fetched from ``/nbchat-pwned/...``
and a handler fetches ``/api/kernels?nbchat-pwned=<source>``. A control cell
displays the same kind of HTML itself and must run, so a quiet page means
nbchat's output was safe, not that the detector was blind. What every output
showed is kept in ``test-artifacts/e2e/hostile/story.json``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import ARTIFACTS, JupyterLab, NotebookPage, open_notebook

pytestmark = pytest.mark.e2e


def payload(source: str) -> str:
    """Markdown and HTML that would run script in the page if any of it became markup."""

    def mark(kind: str) -> str:
        return f"window.pwned_{source}_{kind}=1"

    return "\n".join([
        f"Payload {source} begins.",
        f'<img src="/nbchat-pwned/{source}" onerror="{mark("img")};'
        f"fetch('/api/kernels?nbchat-pwned={source}')\">",
        f"<script>{mark('script')}</script>",
        f'<svg onload="{mark("svg")}"><circle r="3"></circle></svg>',
        f'<iframe srcdoc="<script>parent.pwned_{source}_iframe=1</script>"></iframe>',
        f'<details open ontoggle="{mark("toggle")}"><summary>toggle-{source}</summary></details>',
        f'<button data-commandlinker-command="notebook:run-all-cells">command-{source}</button>',
        f'<a href="javascript:{mark("href")}">anchor-{source}</a>',
        f"[link-{source}](javascript:{mark('link')})",
        f"Payload {source} ends.",
    ])


def one_word_payload(prefix: str, source: str) -> str:
    """A name with an image tag in it (a model, a tool, an option): no quotes, no newlines."""
    return f"{prefix}<img src=/nbchat-pwned/{source} onerror=pwned_{source}=1>"


# Titles keep 2-5 words and at most 80 characters; this one is 5.
TITLE = "Tea <img src=/nbchat-pwned/title onerror=pwned_title=1> Time"
MODEL = one_word_payload("m", "model")
TOOL = one_word_payload("t", "tool")
OPTION = one_word_payload("o", "option")
FENCED = "```\n</pre><img src=/nbchat-pwned/fence onerror=pwned_fence=1>\n```"
ANSWER = f"Tea is a drink.\n\n{payload('answer')}\n\n{FENCED}\n\nThat is all about tea."
# The comment would hide the `hidden` line if the prompt rendered the code as Markdown.
CODE = '''\
shown = """```
</pre><img src=/nbchat-pwned/code onerror=pwned_code=1>
<!--"""
hidden = "the hidden line runs too"
closing = """-->"""
print("`````\\n<img src=/nbchat-pwned/output onerror=pwned_output=1>\\n" + hidden)
'''
WHY = one_word_payload("To print. ", "why")

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL={model!r}, NBCHAT_STORE={store!r})
%load_ext nbchat
%config ChatMagics.approval = "always"
"""
CONTROL = """\
from IPython.display import display
display({"text/html": '<img src="/nbchat-pwned/control" onerror="window.pwned_control_img=1">',
         "text/plain": "control"}, raw=True)
"""
CELLS = {
    "side-note": "%chat --panel --side",  # the side panel follows every %chat below
    "answer": "%chat Tell me about tea",
    "tool-name": "%chat Call the broken tool",
    "tool-question": "%chat Ask me something",
    "server-error": "%chat The server breaks now",
    "run-code": "%chat --agent Run the snippet",
    "list": "%chat --list",
    "search": "%chat --search Tea",
    "show": "%chat --show",
    "models": "%chat --models",
    "panel": "%chat --panel",
    "control": CONTROL,
}
INDEX = {name: i + 1 for i, name in enumerate(CELLS)}  # cell 0 is the setup
SURFACES = [name for name in CELLS if name not in ("control", "side-note")]
PHASES = ("live", "reopened")

RAN = "The snippet ran."
RAN_OUTPUT = "<img src=/nbchat-pwned/output onerror=pwned_output=1>"
TEXTS = {
    "answer": [
        "Payload answer begins.", "<script>", "command-answer", "anchor-answer",
        "[link-answer](javascript:", "</pre><img src=/nbchat-pwned/fence", "Payload answer ends.",
        "Payload reasoning begins.", "Payload reasoning ends.",
    ],
    "tool-name": [TOOL[:30], "unknown tool", "That tool does not exist."],
    "tool-question": ["Payload question begins.", "Payload question ends.", OPTION, "Plain it is."],
    "server-error": ["HTTP 500", '<img src="/nbchat-pwned/error"'],
    "run-code": [*CODE.splitlines(), "`````", RAN_OUTPUT, RAN],
    "list": [TITLE, MODEL],
    "search": [TITLE],
    "show": [
        TITLE, MODEL, "Payload reasoning begins.", "Payload answer begins.",
        "</pre><img src=/nbchat-pwned/fence", "Payload question begins.",
        '<img src="/nbchat-pwned/error"', WHY, RAN,
    ],
    "models": [MODEL],
    "panel": ["Payload panel begins.", "Payload panel ends.", TITLE, MODEL,
              '<img src="/nbchat-pwned/panelerror"'],
}

# The side panel shows the thread of the last %chat (it is not reopened: no cell holds it).
SIDE_TEXTS = [TITLE, MODEL, "Payload answer begins.", "Payload question begins.", RAN]

# The panel's conversation is an Output widget: the saved notebook keeps its
# thread list and model picker, not what it showed.
REOPENED_TEXTS = {**TEXTS, "panel": [TITLE, MODEL]}

# Everything in an output that could run script or act on JupyterLab: handlers,
# script-bearing elements, command links, links that are not http(s)/mailto.
_JS_ACTIVE = """
(root) => {
    const found = [];
    const say = (why, el) => found.push(`${why}: ${el.outerHTML.slice(0, 200)}`);
    for (const el of root.querySelectorAll('*')) {
        for (const attr of el.attributes) {
            if (/^on/i.test(attr.name)) say(`handler ${attr.name}`, el);
            if (attr.name === 'srcdoc' || attr.name === 'data-commandlinker-command')
                say(`attribute ${attr.name}`, el);
        }
    }
    const risky = 'script,iframe,frame,object,embed,img,svg,form,base,link,meta,video,audio';
    for (const el of root.querySelectorAll(risky)) say('element', el);
    for (const el of root.querySelectorAll('button:not(.jupyter-button)')) say('button', el);
    for (const a of root.querySelectorAll('a[href]')) {
        if (!/^\\s*(https?:|mailto:|#)/i.test(a.getAttribute('href'))) say('link', a);
    }
    return found;
}
"""
# What the output shows as text, with closed <details> opened (which also
# fires any ontoggle) and the options of every <select>.
_JS_TEXT = """
(root) => {
    for (const d of root.querySelectorAll('details')) d.open = true;
    const options = [...root.querySelectorAll('option')].map(o => o.textContent);
    return [root.innerText, ...options].join('\\n').replace(/\\u00a0/g, ' ');
}
"""
_JS_RAN = "() => Object.keys(window).filter(k => k.startsWith('pwned_')).sort()"
_JS_SAVE = """
async (path) => {
    const app = window.jupyterapp;
    const panel = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
    await panel.context.save();
    return panel.context.model.dirty;
}
"""


@dataclass
class Seen:
    """What one cell's output showed: its text and anything in it that could run."""

    text: str
    active: list[str]


@dataclass
class Story:
    """What the page showed and did, live and after reopening the saved notebook."""

    seen: dict[str, dict[str, Seen]] = field(default_factory=lambda: {p: {} for p in PHASES})
    ran: dict[str, list[str]] = field(default_factory=dict)  # pwned_* globals set
    fetched: dict[str, list[str]] = field(default_factory=lambda: {p: [] for p in PHASES})
    ran_by_step: dict[str, list[str]] = field(default_factory=dict)  # live, per cell
    prompt: str = ""  # the run_code prompt's text before Run
    phase: str = "live"


def is_title_request(body) -> bool:
    return "conversation title" in body["messages"][0]["content"]


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[ScriptedServer]:
    """A scripted endpoint whose every answer, title, tool call, error and model name is hostile."""
    code_call = ("run_code", {"code": CODE, "why": WHY})
    question_call = ("choose", {"question": payload("question"), "options": [OPTION, "plain"]})
    with ScriptedServer(models=(MODEL, "scripted-small")) as server:
        server.script(
            Reply(TITLE, when=is_title_request),
            Reply(ANSWER, when="tell me about tea", reasoning=payload("reasoning"), delay=0.01),
            Reply("", when="call the broken tool", tool_calls=[(TOOL, {})]),
            Reply("That tool does not exist.", after_tool=TOOL),
            Reply("", when="ask me something", tool_calls=[question_call]),
            Reply("Plain it is.", after_tool="choose"),
            Reply(status=500, error_message=payload("error"), when="the server breaks"),
            Reply("", when="run the snippet", tool_calls=[code_call]),
            Reply(RAN, after_tool="run_code"),
            Reply(payload("panel"), when="panel tea", delay=0.01),
            Reply(status=500, error_message=payload("panelerror"), when="panel breaks"),
        )
        yield server


@pytest.fixture(scope="module")
def story(
    browser: Browser, jupyterlab: JupyterLab, hostile_server: ScriptedServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Story]:
    """Run the hostile notebook as a person would, save it, open it again; record everything."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    story = Story()
    context.on("request", lambda request: _note_request(story, request.url))
    page = context.new_page()
    store = tmp_path_factory.mktemp("hostile-store")
    setup = SETUP.format(url=hostile_server.url, model=MODEL, store=str(store))
    nb = open_notebook(page, jupyterlab, [setup, *CELLS.values()], name="hostile")
    try:
        nb.run_cell(0)
        _run_live(nb, story)
        _observe(nb, story, "live")
        story.ran["live"] = page.evaluate(_JS_RAN)
        story.phase = "reopened"
        _reopen(nb, jupyterlab)
        _observe(nb, story, "reopened")
        story.ran["reopened"] = page.evaluate(_JS_RAN)
        saved = ARTIFACTS / "hostile" / "story.json"
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(asdict(story), indent=1))
        yield story
    finally:
        context.close()


def _note_request(story: Story, url: str) -> None:
    # Not JupyterLab's own /api/resolvePath?path=/nbchat-pwned/..., which checks
    # whether a path in a text output names a file.
    parts = urlsplit(url)
    if parts.path.startswith("/nbchat-pwned/") or "nbchat-pwned=" in parts.query:
        story.fetched[story.phase].append(url)


def _run_live(nb: NotebookPage, story: Story) -> None:
    """Run every cell and answer every prompt, noting what ran after each cell."""
    for name in CELLS:
        index = INDEX[name]
        nb.run_cell(index)
        if name == "side-note":
            side_panel(nb.page).wait_for(timeout=30_000)
        elif name == "answer":
            nb.wait_for_text(index, "That is all about tea.")
            nb.cell(index).scroll_into_view_if_needed()
            nb.screenshot("1-answer")
        elif name == "tool-question":
            _click(nb, index, "plain")
            nb.wait_for_text(index, "Plain it is.")
        elif name == "run-code":
            out = nb.output(index)
            run = out.get_by_role("button", name=re.compile(r"Run$"))
            run.wait_for(timeout=30_000)
            story.prompt = out.evaluate(_JS_TEXT)
            story.seen["live"]["run-code prompt"] = Seen(story.prompt, _active(out))
            nb.screenshot("2-code-prompt")
            run.click()
            nb.wait_for_text(index, RAN)
        elif name == "panel":
            _use_panel(nb, index)
        story.ran_by_step[name] = nb.page.evaluate(_JS_RAN)


def side_panel(page: Page) -> Locator:
    return page.locator(".jupyterlab-sidecar .nbchat-panel")


def _click(nb: NotebookPage, index: int, label: str) -> None:
    button = nb.output(index).get_by_role("button", name=label, exact=True)
    button.wait_for(timeout=30_000)
    button.click()


def _use_panel(nb: NotebookPage, index: int) -> None:
    """Ask in a new thread (its title arrives in the thread list), then ask what fails."""
    out = nb.output(index)
    box = out.locator(".nbchat-panel textarea")
    box.wait_for(timeout=30_000)
    out.get_by_role("button", name="New thread").click()
    box.fill("Panel tea please")
    out.get_by_role("button", name="Send").click()
    nb.wait_for_text(index, "Payload panel ends.")
    titles = out.locator(".nbchat-threads .nbchat-thread")
    _wait(lambda: sum("pwned/title" in title for title in titles.all_text_contents()) == 2, 30)
    box.fill("The panel breaks now")
    out.get_by_role("button", name="Send").click()
    nb.wait_for_text(index, "/nbchat-pwned/panelerror")
    out.get_by_role("button", name="Stop").wait_for(state="hidden", timeout=30_000)
    out.get_by_role("button", name="Threads").click()  # the titles, in the shot
    out.locator(".nbchat-threads").scroll_into_view_if_needed()
    nb.screenshot("3-panel")


def _reopen(nb: NotebookPage, lab: JupyterLab) -> None:
    """Save the notebook and open it again, running nothing: JupyterLab trusts what it saved."""
    assert nb.page.evaluate(_JS_SAVE, nb.path) is False, "the notebook did not save"
    nb.page.goto(lab.lab_url(nb.path))
    nb.page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    nb.cells.nth(len(CELLS)).wait_for(timeout=60_000)
    nb.wait_for_text(INDEX["answer"], "That is all about tea.", timeout=60)
    nb.cell(INDEX["answer"]).scroll_into_view_if_needed()
    nb.screenshot("4-reopened-answer")


def _observe(nb: NotebookPage, story: Story, phase: str) -> None:
    """Bring each output into view (offscreen cells are not rendered), read it, click its links."""
    for name in CELLS:
        nb.cell(INDEX[name]).scroll_into_view_if_needed()
        out = nb.output(INDEX[name])
        if name == "control":
            _wait_for_control(nb.page)
        else:
            _wait(lambda out=out: out.evaluate(_JS_TEXT).strip(), 10)
        text = out.evaluate(_JS_TEXT)
        for link in out.locator("a").all():
            if re.match(r"(anchor|link)-", link.inner_text()):
                link.click()
        story.seen[phase][name] = Seen(text, _active(out))
    if phase == "live":
        side = side_panel(nb.page)
        story.seen[phase]["side panel"] = Seen(side.evaluate(_JS_TEXT), side.evaluate(_JS_ACTIVE))
    nb.page.wait_for_timeout(500)  # a clicked javascript: link runs on the next task


def _active(area: Locator) -> list[str]:
    """What could run in an output area's rendered outputs (not JupyterLab's own icons)."""
    outputs = area.locator(".jp-OutputArea-output").all()
    return [found for output in outputs for found in output.evaluate(_JS_ACTIVE)]


def _wait_for_control(page: Page) -> None:
    """Wait until the control's handler ran: an image's onerror fires once its request failed.

    The control renders last, so the payloads above it had as long to run. If
    it never runs, the control test says so.
    """
    with suppress(PlaywrightTimeout):
        page.wait_for_function("() => window.pwned_control_img === 1", timeout=10_000)


def _wait(condition: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        time.sleep(0.5)


# ---------------------------------------------------------------- the checks


@pytest.mark.parametrize("phase", PHASES)
def test_the_control_html_runs_so_the_detector_sees(story, phase):
    assert "pwned_control_img" in story.ran[phase]
    assert any("/nbchat-pwned/control" in url for url in story.fetched[phase])


@pytest.mark.parametrize("phase", PHASES)
def test_no_payload_runs_or_fetches(story, phase):
    ran = [name for name in story.ran[phase] if not name.startswith("pwned_control")]
    fetched = [url for url in story.fetched[phase] if "/nbchat-pwned/control" not in url]
    assert (ran, fetched) == ([], []), f"after each live cell: {story.ran_by_step}"


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("surface", SURFACES)
def test_the_output_holds_nothing_that_runs(story, surface, phase):
    assert story.seen[phase][surface].active == []


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("surface", SURFACES)
def test_the_payload_shows_as_text(story, surface, phase):
    text = story.seen[phase][surface].text
    expected = (TEXTS if phase == "live" else REOPENED_TEXTS)[surface]
    missing = [shown for shown in expected if shown not in text]
    assert missing == [], f"the output shows:\n{text}"


def test_the_side_panel_shows_the_thread_as_text(story):
    seen = story.seen["live"]["side panel"]
    assert seen.active == []
    missing = [shown for shown in SIDE_TEXTS if shown not in seen.text]
    assert missing == [], f"the side panel shows:\n{seen.text}"


def test_the_code_prompt_shows_every_line_before_run(story):
    assert story.seen["live"]["run-code prompt"].active == []
    missing = [line for line in CODE.splitlines() if line not in story.prompt]
    assert missing == [], f"the prompt shows:\n{story.prompt}"
