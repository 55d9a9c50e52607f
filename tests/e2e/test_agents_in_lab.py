"""A coding agent hosted in the chat (ACP), driven from the panel in real JupyterLab + Chromium.

One Jupyter server for the module (`agents_helpers.agents_lab`): its kernels
find the scripted ACP agent ``scripted`` in ``agents.json``; each test opens a
notebook of its own (its own kernel), opens the panel with ``%chat --panel``,
starts a thread, picks ``scripted`` in the agent picker and asks. Every test
checks what the person sees and the side effect itself: the file the agent
writes in the notebook's folder (or not), the store's turn, the notebook's
cells, the agent's processes (by the pids the scripted agent writes).
Screenshots go to ``test-artifacts/e2e/agents-in-lab/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page

from .agents_helpers import (
    PANEL,
    SIDE,
    agent_pids,
    agents_lab,
    answers,
    running,
    store,
    text_of,
    thread_asked,
    wait_until,
)
from .jupyterlab import JupyterLab, NotebookPage, open_notebook, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

SHOTS = "agents-in-lab"
SAUCE = "tomato-basil-4711"
SETUP = f"%load_ext nbchat\nsauce = {SAUCE!r}"
PANEL_CELL = "%chat --panel"
GREETING = "Hello from the scripted agent, streamed in parts."
HOSTILE = ('Look: <img src=x onerror="window.__pwned=1"> and <script>window.__pwned=2</script> '
           "abc\u202edcba then \x1b[31mred\x1b[0m \x1b]0;title\x07 the last words")  # fmt: skip
BIG = 10_000_000
CUT = "the rest is left out"
MCP_NOTEBOOK = "mcp-notebook"
INSERTED = "print('the agent was here')"


def write(path: str) -> list[dict]:
    return [{"say": "Writing it. "}, {"write": {"path": path, "content": f"{path} once\n"}},
            {"say": "Done writing."}]  # fmt: skip


TURNS = [
    {"when": "greet", "steps": [{"spawn": 300}, {"think": "A greeting."},
                                {"say": GREETING, "chunks": 6}]},
    {"when": "write twice.txt", "steps": write("twice.txt")},
    {"when": "write reload.txt", "steps": write("reload.txt")},
    {"when": "write restart.txt", "steps": [{"spawn": 300}, *write("restart.txt")]},
    {"when": "write dropped.txt", "steps": write("dropped.txt")},
    {"when": "slow", "steps": [{"say": "Starting the slow part."}, {"sleep": 60},
                               {"say": "never shown"}]},
    {"when": "variables", "steps": [
        {"say": "Read: "},
        {"mcp": {"tool": "describe_variable",
                 "arguments": {"path": f"{MCP_NOTEBOOK}.ipynb", "name": "sauce"}}},
        {"say": " | Insert: "},
        {"mcp": {"tool": "insert_cell",
                 "arguments": {"path": f"{MCP_NOTEBOOK}.ipynb", "source": INSERTED,
                               "why": "to say hello"}}},
        {"say": " | all asked."}]},
    {"when": "hostile", "steps": [{"say": HOSTILE, "chunks": 3}]},
    {"when": "huge", "steps": [{"say": "y" * BIG}, {"say": " after the flood"}]},
]

# The cells of a notebook as the page holds them (what a proposal would change).
_JS_CELLS = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells.map(
        c => Array.isArray(c.source) ? c.source.join('') : c.source);
}
"""
_JS_HAS = "(el, text) => el.textContent.includes(text)"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agents-in-lab")


@pytest.fixture(scope="module")
def lab(base: Path) -> Iterator[JupyterLab]:
    with agents_lab(base, TURNS) as server:
        yield server


# -- what the person does -----------------------------------------------------------------
class AgentPanel:
    """The panel shown by ``%chat --panel`` in cell 1 of a notebook set up by ``SETUP``."""

    def __init__(self, nb: NotebookPage) -> None:
        self.nb, self.page = nb, nb.page
        self.el = nb.output(1).locator(PANEL).first

    @classmethod
    def open(cls, page: Page, lab: JupyterLab, name: str) -> AgentPanel:
        nb = open_notebook(page, lab, [SETUP, PANEL_CELL], name=name)
        nb.run_cell(0)
        return cls(nb).show().new_thread()

    def show(self) -> AgentPanel:
        self.nb.run_cell(1)
        self.el.wait_for(timeout=30_000)
        return self

    def new_thread(self) -> AgentPanel:
        """Start a thread of its own (the panel opens on the user's latest thread)."""
        self.el.locator(".nbchat-header button.nbchat-new").click()
        wait_until(lambda: "Started thread" in self.text(), "a new thread", self.page)
        return self

    @property
    def box(self) -> Locator:
        return self.el.locator("textarea.nbchat-input-box")

    @property
    def picker(self) -> Locator:
        return self.el.locator("select.nbchat-agent")

    def text(self) -> str:
        return text_of(self.el)

    def has(self, text: str) -> bool:
        """Whether the panel shows ``text`` (read in the page: its text may be megabytes)."""
        return bool(self.el.count()) and bool(self.el.evaluate(_JS_HAS, text))

    def ask(self, question: str, agent: str = "scripted") -> None:
        if self.picker.input_value() != agent:
            self.picker.select_option(agent)
        self.box.click()
        self.box.fill(question)
        self.box.press("Enter")

    def wait_for(self, text: str, what: str, timeout: float = 30) -> float:
        return wait_until(lambda: self.has(text), what, self.page, timeout)

    def wait_for_the_end(self, timeout: float = 30) -> float:
        """Wait until no answer streams (the Stop button hidden, Send back)."""
        return wait_until(lambda: self.el.locator(".nbchat-stop").is_hidden(),
                          "the turn's end", self.page, timeout)  # fmt: skip

    def button(self, name: str) -> Locator:
        return self.el.locator(".nbchat-prompts button", has_text=re.compile(f"^\\W*{name}\\s*$"))

    def wait_for_request(self, timeout: float = 30) -> Locator:
        wait_until(lambda: self.button("Allow once").count() > 0, "the agent's request shown",
                   self.page, timeout)  # fmt: skip
        return self.el.locator(".nbchat-prompts").first

    def open_thread(self, title: str) -> None:
        """Pick the thread titled ``title`` in the threads popup."""
        self.el.locator("button.nbchat-switch").click()
        self.el.locator("button.nbchat-thread", has_text=title).first.click()

    def shot(self, name: str) -> None:
        screenshot(self.page, f"{SHOTS}/{name}")


def restart_and_clear(nb: NotebookPage) -> None:
    """Kernel > Restart Kernel and Clear Outputs…, confirmed in its dialog."""
    nb.page.evaluate(
        "() => { window.jupyterapp.commands.execute('notebook:restart-clear-output'); }")
    nb.page.locator(".jp-Dialog button.jp-mod-accept").click()
    nb.page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)
    time.sleep(1)  # the old kernel's idle is not the new one's
    nb.wait_for_idle(60)


# -- 1. a session runs to its end --------------------------------------------------------
def test_a_picked_agent_answers_in_the_panel_and_its_thread_names_it(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, "agent-greets")
    assert panel.picker.locator("option").all_inner_texts() == ["nbchat", "scripted"]
    panel.ask("please greet me")
    panel.wait_for(GREETING, "the agent's streamed text")
    panel.wait_for_the_end()
    who = panel.el.locator(".nbchat-from-model .nbchat-who").last
    assert who.inner_text().strip() == "agent:scripted"  # who answered
    assert panel.picker.input_value() == "scripted"
    assert "Reasoning" in panel.text() and panel.has("A greeting.")  # its thought, folded
    panel.shot("1-agent-answered")

    thread = thread_asked(base, "please greet me")
    assert thread.model == "agent:scripted" and thread.settings["acp"]["agent"] == "scripted"
    (turn,) = thread.turns
    assert (turn.status, turn.answer, turn.reasoning) == ("complete", GREETING, "A greeting.")


# -- 2. a write: shown with its diff, rejected, then allowed once -------------------------
def test_reject_leaves_no_file_and_allow_once_writes_it_once(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    target = lab.root_dir / "twice.txt"
    panel = AgentPanel.open(page, lab, "agent-writes")
    panel.ask("please write twice.txt")
    shown = panel.wait_for_request().inner_text()
    assert "scripted asks to edit" in shown
    assert "--- twice.txt (now)" in shown and "+twice.txt once" in shown  # its diff
    assert not target.exists()
    panel.shot("2-write-request")
    panel.button("Reject").click()
    panel.wait_for_the_end()
    wait_until(lambda: panel.button("Allow once").count() == 0, "the request closed", page)
    time.sleep(1)  # the agent had its answer: it writes nothing, now or a moment later
    assert not target.exists()

    panel.ask("please write twice.txt again")
    panel.wait_for_request()
    assert not target.exists()
    panel.button("Allow once").dblclick()  # a double click: one answer, one write
    panel.wait_for("Done writing.", "the agent's end of the turn")
    panel.wait_for_the_end()
    assert target.read_text() == "twice.txt once\n"
    panel.shot("3-write-allowed")
    thread = thread_asked(base, "please write twice.txt")
    assert [t.query for t in thread.turns] == ["please write twice.txt",
                                               "please write twice.txt again"]  # fmt: skip
    assert answers(thread) == [["reject"], ["allow once"]]
    assert thread.turns[-1].status == "complete"
    assert thread.turns[-1].answer == "Writing it. Done writing."
    time.sleep(1)  # a second answer would have reached the agent by now
    assert target.read_text() == "twice.txt once\n"
    assert answers(store(base).get(thread.id)) == [["reject"], ["allow once"]]


# -- 3. a reload while a request waits ------------------------------------------------------
def test_a_request_waits_through_a_reload_and_is_answered_once(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    target = lab.root_dir / "reload.txt"
    panel = AgentPanel.open(page, lab, "agent-reload")
    panel.ask("please write reload.txt")
    panel.wait_for_request()
    page.reload()
    page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    panel.nb.cells.nth(1).wait_for(timeout=60_000)
    panel.nb.wait_for_idle(60)
    assert not target.exists()
    panel.show()  # the panel again, from the same kernel: it opens on the waiting thread
    prompts = panel.wait_for_request()
    assert "+reload.txt once" in prompts.inner_text()
    panel.shot("4-request-after-reload")
    panel.button("Allow once").click()
    panel.wait_for("Done writing.", "the agent's end of the turn")
    assert target.read_text() == "reload.txt once\n"
    thread = thread_asked(base, "please write reload.txt")
    assert answers(thread) == [["allow once"]] and thread.turns[-1].status == "complete"


# -- 4. a kernel restart while a request waits -------------------------------------------------
def test_a_restart_ends_the_agent_and_its_request_closes_as_cancelled(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    target = lab.root_dir / "restart.txt"
    before = agent_pids(base)
    panel = AgentPanel.open(page, lab, "agent-restart")
    panel.ask("please write restart.txt")
    panel.wait_for_request()
    pids = agent_pids(base) - before
    assert len(pids) == 2 and all(running(pid) for pid in pids), pids  # the agent, its child
    restart_and_clear(panel.nb)
    wait_until(lambda: not any(running(pid) for pid in pids), "the agent's processes gone",
               page, timeout=20)  # fmt: skip
    assert not target.exists()

    # The new kernel's panel, on that thread: the request shown closed, as cancelled, with
    # the words the agent said before it; nothing left to answer.
    panel.nb.run_cell(0)
    panel.show()
    panel.open_thread("please write restart.txt")
    panel.wait_for("cancelled", "the request shown cancelled")
    time.sleep(1)
    said = panel.el.locator(".nbchat-from-model .nbchat-body").last.inner_text()
    assert "Write restart.txt → cancelled" in said and "Writing it." in said, said
    assert panel.button("Allow once").count() == 0
    panel.shot("5-cancelled-after-restart")
    (turn,) = thread_asked(base, "please write restart.txt").turns
    assert [a.answer for a in turn.answered] == ["cancelled"] and turn.status == "interrupted"
    assert turn.answer == "Writing it. "
    time.sleep(1)
    assert not target.exists()


def test_the_agents_words_before_a_cancelled_request_stay_in_the_thread(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, "agent-dropped")
    panel.ask("please write dropped.txt")
    panel.wait_for_request()
    panel.ask("never mind, greet me")  # closes the waiting request as cancelled
    panel.wait_for(GREETING, "the next answer")
    panel.wait_for_the_end()
    first, _ = thread_asked(base, "please write dropped.txt").turns
    assert (first.status, first.answer) == ("interrupted", "Writing it. ")
    assert not (lab.root_dir / "dropped.txt").exists()
    said = panel.el.locator(".nbchat-from-model .nbchat-body").first
    panel.shot("5c-words-before-a-cancelled-request")
    assert "cancelled" in said.inner_text() and "Writing it." in said.inner_text()


# -- 5. Stop during a long step ----------------------------------------------------------
def test_escape_cancels_the_agents_turn_and_keeps_its_partial_text(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, "agent-stop")
    panel.ask("a slow one, please")
    panel.wait_for("Starting the slow part.", "the text before the slow step")
    started = time.monotonic()
    panel.box.press("Escape")
    panel.wait_for("(interrupted)", "the turn shown interrupted", timeout=15)
    panel.wait_for_the_end(timeout=10)
    stopped = time.monotonic() - started
    assert stopped < 10, f"the stop took {stopped:.1f} s"
    panel.shot("6-stopped")
    (turn,) = thread_asked(base, "a slow one, please").turns
    assert (turn.status, turn.answer) == ("interrupted", "Starting the slow part.")
    time.sleep(1)
    assert not panel.has("never shown")


# -- 6. nbchat's MCP server, handed to the session ------------------------------------------
def test_the_agent_reads_through_nbchats_mcp_and_its_insert_waits_for_the_person(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, MCP_NOTEBOOK)
    path = panel.nb.path
    before = page.evaluate(_JS_CELLS, path)
    panel.ask("read my variables")
    panel.wait_for("| all asked.", "the agent's turn to its end", timeout=60)
    (turn,) = thread_asked(base, "read my variables").turns
    read, inserted = turn.answer.removeprefix("Read: ").split(" | Insert: ")
    assert SAUCE in read  # the live kernel's variable, read through nbchat's tools
    assert '"state": "waiting"' in inserted and '"tool": "insert_cell"' in inserted
    assert SAUCE in panel.text()

    # The insert is a call waiting for the person, in the side panel the server's wake opened.
    side = page.locator(SIDE).first
    wait_until(lambda: side.count() and "asks to insert cell" in side.inner_text(),
               "the insert's prompt in the side panel", page)  # fmt: skip
    assert INSERTED in side.inner_text()
    time.sleep(2)
    assert page.evaluate(_JS_CELLS, path) == before  # nothing landed by itself
    panel.shot("7-insert-waits")
    side.locator(".nbchat-prompts button", has_text=re.compile(r"^\W*Run\s*$")).first.click()
    wait_until(lambda: INSERTED in page.evaluate(_JS_CELLS, path), "the cell after Run", page)
    assert page.evaluate(_JS_CELLS, path) == [*before, INSERTED]


# -- 7. hostile text ------------------------------------------------------------------------
def test_hostile_agent_text_is_inert_and_a_huge_update_keeps_the_page_responsive(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, "agent-hostile")
    panel.ask("say something hostile")
    panel.wait_for("the last words", "the hostile text")
    panel.wait_for_the_end()
    time.sleep(1)  # an onerror would have run by now
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    body = panel.el.locator(".nbchat-from-model .nbchat-body").last
    assert body.locator("img, script, style, iframe").count() == 0
    assert body.evaluate("el => el.textContent").strip() == HOSTILE  # as text, every character
    panel.shot("8-hostile")

    started = time.monotonic()
    panel.ask("now something huge")
    panel.wait_for(CUT, "the huge text, cut", timeout=120)
    panel.wait_for_the_end(timeout=60)
    shown = time.monotonic() - started
    probe = time.monotonic()
    assert page.evaluate("1 + 1") == 2
    answered = time.monotonic() - probe
    assert answered < 5, f"the page took {answered:.1f} s to answer"
    panel.box.fill("still typing")  # the panel still takes keys
    assert panel.box.input_value() == "still typing"
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    panel.shot("9-huge")
    turn = thread_asked(base, "say something hostile").turns[-1]
    assert turn.status == "complete" and CUT in turn.answer
    assert 2_000_000 <= len(turn.answer) < 2_001_000  # bounded, the flood's tail left out
    print(f"10 MB update: shown cut after {shown:.1f} s; the page answered in {answered:.2f} s")


# -- 8. the session's end ----------------------------------------------------------------------
def test_every_agent_process_is_gone_once_the_kernels_shut_down(
    page: Page, lab: JupyterLab, base: Path
) -> None:
    panel = AgentPanel.open(page, lab, "agent-shutdown")
    before = agent_pids(base)
    panel.ask("please greet me once more")
    panel.wait_for(GREETING, "the agent's answer")
    mine = agent_pids(base) - before
    assert len(mine) == 2 and all(running(pid) for pid in mine), mine
    everyone = agent_pids(base)
    sessions = lab.api("sessions")
    assert isinstance(sessions, list)
    for session in sessions:  # each notebook's kernel, shut down as the Running tab does
        lab.api(f"kernels/{session['kernel']['id']}", method="DELETE")
    wait_until(lambda: not [pid for pid in everyone if running(pid)], "every agent gone", page,
               timeout=30)  # fmt: skip
