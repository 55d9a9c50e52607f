"""An outside agent's call answered by the person in real JupyterLab + Chromium.

One Jupyter server with nbchat's extension for the module (its store, user and
agent tokens in a tmp dir, as ``agent_helpers.agent_server`` makes them); the
agent is the official MCP SDK's client over HTTP with a minted token. Each
test opens its own notebook (its own kernel) in a fresh browser context. When
a call arrives, the server wakes the notebook's kernel, which opens the side
panel on the agent's thread by itself; ``%chat --agents`` in a cell shows the
same prompt. The person clicks Run, Edit or Reject there; ``call_status``
tells the agent how it ended.

Screenshots (1280x800, light theme) and the measured seconds (``timings.json``)
go to ``test-artifacts/e2e/agent-prompts/``. Defects seen in the prompt's
layout are checked at the end.
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
from playwright.sync_api import Browser, Locator, Page

import agent_helpers
from agent_helpers import agent_server, mint, result_data

from .jupyterlab import ARTIFACTS, JupyterLab, NotebookPage, open_notebook, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

LABEL = "Claude Code e2e"
COUNT = "counter += 1\nprint('ran', counter)"
CELLS = ["counter = 0", "%chat --agents", "print('counter is', counter)"]
SHOTS = "agent-prompts"
SIDE = ".jupyterlab-sidecar .nbchat-panel"
PROMPTS = ".nbchat-prompts"  # the group of a turn's prompts, in a cell and in the panel
RUN = re.compile(r"^\W*Run\s*$")  # not "Run edited"
REJECT = re.compile(r"^\W*Reject\s*$")
EDIT = re.compile(r"^\W*Edit\s*$")

# Hostile arguments: markup in the reason and in a string, a right-to-left override and
# a zero-width space outside strings, and a line of about 300 characters.
WHY = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=2</script>"
HOSTILE = (
    f'label = "{SCRIPT}"\n'
    'access = "user"\u200b\n'
    'if access != "admin"\u202e:\n'
    "    print(label)\n"
    'note = "' + "z" * 300 + '"; print("far end")\n'
)
BIG = "# " + "y" * 10_000_000 + "\nprint(1)"
BIG_TARGET_SECONDS = 20  # what the brief calls not hanging; measured and reported
BIG_BOUND_SECONDS = 150  # beyond this the page counts as hung: the test fails

# Where the text `needle` of a code block is drawn, against the block's visible box
# (as in test_true_to_the_eye).
VISIBLE = """(pre, needle) => {
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  let all = "", nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    nodes.push([n, all.length]);
    all += n.nodeValue;
  }
  const at = all.indexOf(needle);
  const [node, start] = nodes.filter(([n, s]) => s <= at).pop();
  const range = document.createRange();
  range.setStart(node, at - start); range.setEnd(node, at - start + 1);
  const box = range.getBoundingClientRect(), edge = pre.getBoundingClientRect();
  return {left: box.left, right: box.right, edgeLeft: edge.left, edgeRight: edge.right,
          scroll: pre.scrollWidth - pre.clientWidth};
}"""
# Click the button at `at` (ms since the epoch, the machine's clock), and note when it did.
CLICK_AT = """(b, at) => setTimeout(() => {
  window.__clickedAt = performance.timeOrigin + performance.now();
  b.click();
}, at - Date.now())"""
# Whether a button's label runs past its content box (Chromium then draws `R…`).
CUT = """(b) => {
  const text = [...b.childNodes].filter((n) => n.nodeType === 3 && n.nodeValue.trim()).pop();
  const range = document.createRange();
  range.selectNodeContents(text);
  const style = getComputedStyle(b), box = b.getBoundingClientRect();
  const right = box.right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth);
  return range.getBoundingClientRect().right > right + 0.05;  // Chromium cuts at any overflow
}"""
# The longest task that blocked the page's main thread since `LONG_TASKS_START`.
LONG_TASKS_START = """() => {
  window.__longest = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      window.__longest = Math.max(window.__longest, entry.duration);
  }).observe({type: "longtask", buffered: false});
}"""


# -- the server and the agent -----------------------------------------------------------
@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-prompts")


@pytest.fixture(scope="module")
def lab(base: Path) -> Iterator[JupyterLab]:
    with agent_server(base) as server:
        yield server


@pytest.fixture(scope="module")
def worker() -> Iterator[ThreadPoolExecutor]:
    # Playwright's sync API runs an event loop in this thread; the SDK's client needs its own.
    with ThreadPoolExecutor(2) as pool:
        yield pool


class Agent:
    """An outside agent with its own token, calling through the SDK's client."""

    def __init__(self, lab: JupyterLab, base: Path, worker: ThreadPoolExecutor) -> None:
        self.lab, self.worker = lab, worker
        self.token = mint(base, LABEL)

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.worker.submit(agent_helpers.mcp_call, self.lab, self.token, tool,
                                  **arguments).result(timeout=120)  # fmt: skip

    def data(self, tool: str, **arguments: Any) -> Any:
        return result_data(self.call(tool, **arguments))

    def run_code(self, path: str, code: str, why: str) -> dict[str, Any]:
        call = self.data("run_code", path=path, code=code, why=why)
        assert call["state"] == "waiting", call
        return call

    def status(self, handle: str, wait: float = 20) -> dict[str, Any]:
        return self.data("call_status", handle=handle, wait_seconds=wait)


@pytest.fixture
def agent(lab: JupyterLab, base: Path, worker: ThreadPoolExecutor) -> Agent:
    return Agent(lab, base, worker)


@pytest.fixture
def opened(
    page: Page, lab: JupyterLab, request: pytest.FixtureRequest
) -> Callable[[], NotebookPage]:
    """Open this test's notebook (``CELLS``) and run ``counter = 0``."""

    def open_it() -> NotebookPage:
        nb = open_notebook(page, lab, CELLS, name=request.node.name[:40])
        nb.run_cell(0)
        return nb

    return open_it


# -- what the person sees ------------------------------------------------------------------
def wait_until(condition: Callable[[], bool], what: str, page: Page, timeout: float = 30) -> float:
    """Poll ``condition``; the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            screenshot(page, f"{SHOTS}/timeout")
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)
    return time.monotonic() - started


def side_prompts(page: Page) -> Locator:
    return page.locator(f"{SIDE} {PROMPTS}").first


def wait_for_side_prompt(page: Page, timeout: float = 30) -> Locator:
    """The prompt in the side panel that the server's wake opened, by itself."""
    prompts = side_prompts(page)
    wait_until(lambda: prompts.locator("button", has_text=RUN).count() > 0,
               "the side panel opened with the agent's prompt", page, timeout)  # fmt: skip
    return prompts


def cell_prompts(nb: NotebookPage, index: int) -> Locator:
    prompts = nb.output(index).locator(PROMPTS).first
    prompts.locator("button", has_text=RUN).wait_for(timeout=30_000)
    return prompts


def button(prompts: Locator, name: re.Pattern[str]) -> Locator:
    return prompts.locator("button", has_text=name).first


def shows_the_call(prompts: Locator, code: str, why: str, path: str) -> None:
    text = prompts.inner_text()
    assert f"Agent {LABEL} asks to run code in {path}" in text
    assert f"gives as its reason: “{why}”" in text
    pre = prompts.locator("pre").first
    assert pre.inner_text().replace("\n", "") == code.replace("\n", "")


def kernel_says(nb: NotebookPage, text: str) -> None:
    nb.run_cell(2)
    nb.wait_for_text(2, text)


def open_again(browser: Browser, lab: JupyterLab, path: str) -> NotebookPage:
    """The same notebook in a second browser window: its own page, the same kernel."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(lab.lab_url(path))
    page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    nb = NotebookPage(page, path)
    nb.cells.nth(len(CELLS) - 1).wait_for(timeout=60_000)
    nb.wait_for_idle(60)
    return nb


def record(name: str, **numbers: float) -> None:
    """Keep measured seconds in test-artifacts/e2e/agent-prompts/timings.json."""
    path = ARTIFACTS / SHOTS / "timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    known[name] = {key: round(value, 2) for key, value in numbers.items()}
    path.write_text(json.dumps(known, indent=2) + "\n")
    print(name, known[name])


# -- Run, Reject, Edit ---------------------------------------------------------------------
def test_run_in_the_panel_that_opens_by_itself(page: Page, opened, agent: Agent) -> None:
    nb = opened()
    started = time.monotonic()
    call = agent.run_code(nb.path, COUNT, "To count once.")
    returned = time.monotonic() - started
    prompts = wait_for_side_prompt(page)
    shown = time.monotonic() - started
    shows_the_call(prompts, COUNT, "To count once.", nb.path)
    kernel_says(nb, "counter is 0")  # nothing ran before the answer
    screenshot(page, f"{SHOTS}/1-run-prompt-in-the-side-panel")

    button(prompts, RUN).click()
    done = agent.status(call["handle"])
    assert done["state"] == "done", done
    assert "ran 1" in done["result"]
    # The panel swaps the answered prompt for the turn: what was approved and its output.
    panel = page.locator(SIDE).first
    wait_until(lambda: "The person answered: run." in panel.inner_text(), "the answered turn",
               page)  # fmt: skip
    wait_until(lambda: "ran 1" in panel.inner_text(), "the run's output in the panel", page)
    assert panel.locator("button", has_text=RUN).count() == 0
    kernel_says(nb, "counter is 1")
    screenshot(page, f"{SHOTS}/2-ran-from-the-side-panel")
    record("run", call_returned=returned, side_prompt_shown=shown)


def test_reject_runs_nothing_and_edit_runs_exactly_the_edited_code(
    page: Page, opened, agent: Agent
) -> None:
    nb = opened()
    # Reject, in a cell: %chat --agents shows the waiting call.
    call = agent.run_code(nb.path, "counter = 99\nprint('overwrote')", "To reset it.")
    wait_for_side_prompt(page)
    nb.run_cell(1)
    prompts = cell_prompts(nb, 1)
    shows_the_call(prompts, "counter = 99\nprint('overwrote')", "To reset it.", nb.path)
    prompts.get_by_placeholder("why not (optional)").fill("keep my counter")
    screenshot(page, f"{SHOTS}/3-reject-with-a-reason-in-a-cell")
    button(prompts, REJECT).click()
    done = agent.status(call["handle"])
    assert done["state"] == "rejected", done
    assert "keep my counter" in done["answer"] and "did not run" in done["result"]
    assert "overwrote" not in done["result"]
    nb.wait_for_text(1, "✓ rejected: keep my counter")
    kernel_says(nb, "counter is 0")

    # Edit, in the side panel the next call opens.
    call = agent.run_code(nb.path, "counter = 99\nprint('overwrote')", "To reset it, again.")
    prompts = wait_for_side_prompt(page)
    wait_until(lambda: "To reset it, again." in prompts.inner_text(), "the new call's prompt",
               page)  # fmt: skip
    button(prompts, EDIT).click()
    editor = prompts.locator("textarea").first
    editor.wait_for(timeout=10_000)
    editor.fill("counter += 5\nprint('edited', counter)")
    screenshot(page, f"{SHOTS}/4-editing-in-the-side-panel")
    button(prompts, re.compile(r"Run edited")).click()
    done = agent.status(call["handle"])
    assert done["state"] == "done", done
    assert "counter += 5\nprint('edited', counter)" in done["result"]
    assert "edited 5" in done["result"] and "overwrote" not in done["result"]
    kernel_says(nb, "counter is 5")
    screenshot(page, f"{SHOTS}/5-ran-edited")


def test_two_tabs_racing_run_it_once(
    page: Page, browser: Browser, lab: JupyterLab, opened, agent: Agent
) -> None:
    first = opened()
    second = open_again(browser, lab, first.path)
    try:
        call = agent.run_code(first.path, COUNT, "To count once, from two tabs.")
        tabs = [first, second]
        for nb in tabs:
            nb.run_cell(1)
        both = [cell_prompts(nb, 1) for nb in tabs]
        for prompts in both:
            shows_the_call(prompts, COUNT, "To count once, from two tabs.", first.path)
        # Both clicks timed for the same instant of the machine's clock, one in each window.
        at = time.time() * 1000 + 1000
        for prompts in both:
            button(prompts, RUN).evaluate(CLICK_AT, at)
        for nb in tabs:
            nb.page.wait_for_function("() => window.__clickedAt !== undefined", timeout=10_000)
        clicked = [nb.page.evaluate("() => window.__clickedAt") for nb in tabs]
        gap = abs(clicked[0] - clicked[1]) / 1000
        done = agent.status(call["handle"])
        assert done["state"] == "done", done
        assert "ran 1" in done["result"]
        for nb, prompts in zip(tabs, both, strict=True):
            wait_until(lambda p=prompts: "✓ ran" in p.inner_text() or "already" in p.inner_text(),
                       "both prompts locked", nb.page)  # fmt: skip
        said = [prompts.inner_text() for prompts in both]
        assert sum("✓ ran" in text for text in said) == 1, said
        assert sum("already answered" in text for text in said) == 1, said
        for prompts in both:
            assert button(prompts, RUN).is_disabled()
        for n, nb in enumerate(tabs, 1):
            screenshot(nb.page, f"{SHOTS}/6-two-tabs-tab-{n}")
        kernel_says(first, "counter is 1")
        # The side panel the call opened in the other window still offers Run: nothing runs.
        stale = side_prompts(second.page)
        if stale.locator("button", has_text=RUN).count():
            button(stale, RUN).click()
            wait_until(lambda: "already answered" in stale.inner_text()
                       or stale.locator("button", has_text=RUN).count() == 0,
                       "the stale prompt refusing", second.page)  # fmt: skip
            screenshot(second.page, f"{SHOTS}/6-two-tabs-stale-side-prompt-clicked")
        kernel_says(first, "counter is 1")
        assert agent.status(call["handle"], wait=0)["result"] == done["result"]
        record("two tabs", clicks_apart=gap)
    finally:
        second.page.context.close()


# -- hostile arguments ------------------------------------------------------------------
def drawn_inert_and_whole(page: Page, prompts: Locator) -> None:
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert prompts.locator("img, script").count() == 0
    text = prompts.inner_text()
    assert WHY in text  # the reason, literally
    pre = prompts.locator("pre").first
    pre.scroll_into_view_if_needed()
    drawn = pre.inner_text()
    assert SCRIPT in drawn
    assert "z" * 300 in drawn.replace("\n", "")  # whole, never cut
    assert not re.search("[\u202a-\u202e\u2066-\u2069\u200b-\u200d]", drawn), drawn
    assert "\\u202e" in drawn and "\\u200b" in drawn
    marks = pre.locator(".nbchat-hidden")
    assert marks.count() == 2
    assert marks.first.evaluate("el => getComputedStyle(el).fontWeight") in ("700", "bold")
    assert "This code holds 2 characters that draw nothing" in text
    where = pre.evaluate(VISIBLE, "far end")
    assert where["scroll"] <= 1, where  # the long line wraps: nothing to scroll to
    assert where["edgeLeft"] <= where["left"] and where["right"] <= where["edgeRight"], where


def test_hostile_arguments_are_shown_inert_and_whole(page: Page, opened, agent: Agent) -> None:
    nb = opened()
    call = agent.run_code(nb.path, HOSTILE, WHY)
    prompts = wait_for_side_prompt(page)
    panel = page.locator(SIDE).first
    assert WHY in panel.inner_text()  # the reason as the agent's message, literally
    assert panel.locator("img").count() == 0
    drawn_inert_and_whole(page, prompts)
    screenshot(page, f"{SHOTS}/7-hostile-in-the-side-panel")

    nb.run_cell(1)
    prompts = cell_prompts(nb, 1)
    drawn_inert_and_whole(page, prompts)
    prompts.scroll_into_view_if_needed()
    screenshot(page, f"{SHOTS}/8-hostile-in-a-cell")

    button(prompts, RUN).click()  # refused: the code holds hidden characters outside strings
    refusal = "so it does not run as it is"
    nb.wait_for_text(1, refusal)
    assert "U+200B" in prompts.inner_text() or "ZERO WIDTH SPACE" in prompts.inner_text()
    assert not button(prompts, RUN).is_disabled()  # still waiting: Edit or Reject it
    screenshot(page, f"{SHOTS}/9-hostile-run-refused")
    assert agent.status(call["handle"], wait=0)["state"] == "waiting"
    nb.run_cell(2)
    nb.wait_for_text(2, "counter is 0")
    assert page.evaluate("() => typeof window.__pwned") == "undefined"

    prompts.get_by_placeholder("why not (optional)").fill("hidden characters")
    button(prompts, REJECT).click()
    done = agent.status(call["handle"])
    assert done["state"] == "rejected" and "hidden characters" in done["answer"], done
    assert page.evaluate("() => typeof window.__pwned") == "undefined"


def test_ten_megabytes_of_code_show_without_hanging_the_page(
    page: Page, tmp_path: Path, worker: ThreadPoolExecutor
) -> None:
    # A server of its own: 10 MB in the module's store would slow every later store read.
    with agent_server(tmp_path) as own:
        agent = Agent(own, tmp_path, worker)
        nb = open_notebook(page, own, CELLS, name="ten-megabytes")
        nb.run_cell(0)
        page.evaluate(LONG_TASKS_START)
        started = time.monotonic()
        call = agent.run_code(nb.path, BIG, "A big one.")
        returned = time.monotonic() - started
        prompts = wait_for_side_prompt(page, timeout=BIG_BOUND_SECONDS)
        shown = time.monotonic() - started
        probe = time.monotonic()
        assert page.evaluate("1 + 1") == 2
        answered = time.monotonic() - probe
        longest = page.evaluate("() => window.__longest") / 1000
        text = prompts.inner_text()
        assert f"Agent {LABEL} asks to run code" in text and "print(1)" in text
        assert answered < 5, f"the page took {answered:.1f} s to answer once the prompt showed"
        screenshot(page, f"{SHOTS}/10-ten-megabytes-in-the-side-panel")
        # How far below the code's first line the person finds the buttons.
        top = prompts.locator("pre").first.evaluate("p => p.getBoundingClientRect().top")
        below = button(prompts, REJECT).evaluate("b => b.getBoundingClientRect().top") - top
        probe = time.monotonic()
        button(prompts, REJECT).click()
        done = agent.status(call["handle"])
        rejected = time.monotonic() - probe
        assert done["state"] == "rejected", done
        kernel_says(nb, "counter is 0")
        record("ten megabytes", call_returned=returned, side_prompt_shown=shown,
               longest_main_thread_block=longest, page_answered_after=answered,
               buttons_below_first_line_px=below, reject_to_rejected=rejected,
               target=BIG_TARGET_SECONDS)  # fmt: skip


# -- the prompt's layout in the side panel and in a cell ------------------------------------------
def test_the_side_panel_prompt_hides_its_editor_until_edit(
    page: Page, opened, agent: Agent
) -> None:
    nb = opened()
    agent.run_code(nb.path, COUNT, "To look at the prompt.")
    prompts = wait_for_side_prompt(page)
    editor = prompts.locator("textarea").first
    shown = {"editor": editor.is_visible(),
             "Run edited": button(prompts, re.compile("Run edited")).is_visible()}  # fmt: skip
    assert not any(shown.values()), shown


@pytest.mark.parametrize("where", ["side panel", "cell"])
def test_the_prompt_buttons_read_whole(page: Page, opened, agent: Agent, where: str) -> None:
    nb = opened()
    agent.run_code(nb.path, COUNT, "To look at the buttons.")
    prompts = wait_for_side_prompt(page)
    if where == "cell":
        nb.run_cell(1)
        prompts = cell_prompts(nb, 1)
    cut = {}
    for name in (RUN, EDIT, REJECT):
        found = button(prompts, name)
        cut[found.inner_text().strip()] = found.evaluate(CUT)
    assert not any(cut.values()), cut
