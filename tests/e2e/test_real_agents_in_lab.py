"""Claude Code, Codex and Gemini CLI through their real ACP adapters, picked in the panel of real
JupyterLab + Chromium, offline against the scripted model server.

``test_agents_in_lab.py`` drives the scripted ACP agent this way, and
``test_acp_adapters_hosted.py`` the real adapters through ``AcpHost`` alone; here
the whole way: ``agents.json`` names each adapter (``acp_adapters.launch``:
a throw-away home, the scripted server as its model, its asking mode), the
panel's agent picker picks it, and the person answers in the page.

One Jupyter server for the module. Its environment is cut down to ``PATH``
and ``LANG`` (and the isolated Jupyter folders) before it starts, because a
kernel hands an agent ``{**os.environ, **entry["env"]}``: this machine's
``IS_SANDBOX=yes`` (as root) makes Claude Code refuse ``session/new``, and
Codex misbehaves with the full environment (see
``test_acp_adapters_hosted.only_the_launch_environment``). The notebooks'
folder is the agents' working folder (Gemini trusts it).

Through nbchat's MCP server, Claude and Gemini ask through ACP before each
of nbchat's tools (the person allows once in the panel); Codex asks for
neither (``describe_variable`` is read-only, ``insert_cell`` is annotated
not destructive). Either way nbchat's own prompt for the insert waits in the
notebook until the person answers it. Every check is read
off the page, the file, the store, the scripted server's log and ``/proc``.
Screenshots go to ``test-artifacts/e2e/real-agents-in-lab/``.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page

from acp_adapters import (
    ADAPTERS,
    SERVED_MODELS,
    Launch,
    adapter_binary,
    launch,
    live_processes,
    process_tree,
    require_adapter,
    write_file_replies,
)
from agent_helpers import USER
from nbchat.testing import Reply, ScriptedServer

from .agents_helpers import (
    PANEL,
    SIDE,
    answers,
    running,
    text_of,
    thread_asked,
    wait_until,
)
from .jupyterlab import JupyterLab, NotebookPage, open_notebook, screenshot, start_jupyterlab

pytestmark = [pytest.mark.e2e, pytest.mark.acp_agent, pytest.mark.timeout(150)]

SHOTS = "real-agents-in-lab"
SAUCE = "tomato-basil-4711"
SETUP = f"%load_ext nbchat\nsauce = {SAUCE!r}"
PANEL_CELL = "%chat --panel"
ANSWER = "Hello from the scripted model, in five words."
TEXT = "written by the agent\n"
INSERTED = "print('the agent was here')"
FINAL = "Asked for the cell."
# How each adapter names a tool of the MCP server it is handed as "nbchat" (Codex: the tool
# in namespace "mcp__nbchat", which the scripted Responses API spells "mcp__nbchat__TOOL").
MCP_NAMES = {"claude": "mcp__nbchat__{}", "codex": "mcp__nbchat__{}", "gemini": "mcp_nbchat_{}"}
# Only these of this process's variables reach the server, its kernels and so the agents.
KEPT = ("PATH", "LANG")

_JS_CELLS = """
(path) => {
    const panel = Array.from(window.jupyterapp.shell.widgets('main'))
        .find(w => w.context && w.context.path === path && w.content);
    return panel.content.model.toJSON().cells.map(
        c => Array.isArray(c.source) ? c.source.join('') : c.source);
}
"""
_JS_HAS = "(el, text) => el.textContent.includes(text)"


# -- the module's server: the scripted model, the adapters, one JupyterLab ------------------
@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("real-agents-in-lab")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(models=SERVED_MODELS) as running_server:
        yield running_server


@pytest.fixture(scope="module")
def launches(base: Path, model: ScriptedServer) -> dict[str, Launch]:
    """The installed adapters' launches, each with a home of its own, working in the notebooks'
    folder (a missing one is failed or skipped by its tests, through require_adapter)."""
    root = base / "root"
    root.mkdir()
    found = {}
    for name in ADAPTERS:
        if adapter_binary(name) is None:
            continue
        spec = launch(name, model.ollama_url, base / "adapters" / name)
        if name == "gemini":  # Gemini ignores MCP servers in a folder it does not trust
            trusted = {str(spec.cwd): "TRUST_FOLDER", str(root): "TRUST_FOLDER"}
            (spec.home / ".gemini" / "trustedFolders.json").write_text(json.dumps(trusted))
        found[name] = spec
    return found


@pytest.fixture(scope="module")
def lab(base: Path, launches: dict[str, Launch]) -> Iterator[JupyterLab]:
    """A Jupyter server whose kernels may host the adapters, started with only ``KEPT`` of this
    process's environment (``start_jupyterlab`` adds os.environ and cannot remove from it)."""
    root = base / "root"
    config = base / "lab" / "config" / "nbchat"  # the server's JUPYTER_CONFIG_DIR
    config.mkdir(parents=True)
    entries = {name: {"command": spec.command, "args": list(spec.args), "env": dict(spec.env),
                      "cwd": str(root)} for name, spec in launches.items()}  # fmt: skip
    (config / "agents.json").write_text(json.dumps({"agentServers": entries}))
    home = base / "lab-home"
    home.mkdir()
    extra = {
        "HOME": str(home),
        "NBCHAT_STORE": str(base / "store"),
        "NBCHAT_USER": USER,
        "NBCHAT_AGENT_TOKENS": str(base / "tokens"),
        "NBCHAT_BASE_URL": "demo",
        # No administrator's agents.json of this machine's may cap the test's.
        "NBCHAT_ACP_ADMIN_CONFIG": str(base / "no-admin-agents.json"),
    }
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name not in KEPT:
                patch.delenv(name)
        starting = start_jupyterlab(base / "lab", env=extra, root=root)
        server = starting.__enter__()  # the server's environment is fixed once it runs
    try:
        yield server
    finally:
        starting.__exit__(None, None, None)


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest, launches: dict[str, Launch]) -> Launch:
    name = str(request.param)
    require_adapter(name)  # fails when NBCHAT_TEST_ACP_AGENTS names a folder without it
    return launches[name]


# -- what the person does --------------------------------------------------------------------
class AgentPanel:
    """The panel shown by ``%chat --panel`` in cell 1 of a notebook set up by ``SETUP``."""

    def __init__(self, nb: NotebookPage) -> None:
        self.nb, self.page = nb, nb.page
        self.el = nb.output(1).locator(PANEL).first

    @classmethod
    def open(cls, page: Page, lab: JupyterLab, name: str) -> AgentPanel:
        nb = open_notebook(page, lab, [SETUP, PANEL_CELL], name=name)
        nb.run_cell(0)
        nb.run_cell(1)
        panel = cls(nb)
        panel.el.wait_for(timeout=30_000)
        # A thread of its own (the panel opens on the user's latest thread).
        panel.el.locator(".nbchat-header button.nbchat-new").click()
        wait_until(lambda: "Started thread" in panel.text(), "a new thread", page)
        return panel

    @property
    def box(self) -> Locator:
        return self.el.locator("textarea.nbchat-input-box")

    @property
    def picker(self) -> Locator:
        return self.el.locator("select.nbchat-agent")

    def text(self) -> str:
        return text_of(self.el)

    def has(self, text: str) -> bool:
        return bool(self.el.count()) and bool(self.el.evaluate(_JS_HAS, text))

    def ask(self, question: str, agent: str) -> None:
        if self.picker.input_value() != agent:
            self.picker.select_option(agent)
        self.box.click()
        self.box.fill(question)
        self.box.press("Enter")

    def wait_for(self, text: str, what: str, timeout: float = 60) -> float:
        return wait_until(lambda: self.has(text), what, self.page, timeout, f"{SHOTS}/timeout")

    def streaming(self) -> bool:
        return self.el.locator(".nbchat-stop").is_visible()

    def wait_for_the_end(self, timeout: float = 60) -> float:
        return wait_until(lambda: not self.streaming(), "the turn's end", self.page, timeout,
                          f"{SHOTS}/timeout")  # fmt: skip

    def button(self, name: str) -> Locator:
        return self.el.locator(".nbchat-prompts button", has_text=re.compile(f"^\\W*{name}\\s*$"))

    def wait_for_request(self, timeout: float = 60) -> str:
        """The shown request's text, once its Allow once is there."""
        wait_until(lambda: self.button("Allow once").count() > 0, "the agent's request shown",
                   self.page, timeout, f"{SHOTS}/timeout")  # fmt: skip
        return self.el.locator(".nbchat-prompts").first.inner_text()

    def shot(self, name: str) -> None:
        screenshot(self.page, f"{SHOTS}/{name}")


# -- what the adapters sent the model, and their processes -----------------------------------
def tool_names(body: Any) -> set[str]:
    """The tools a model request offers, by the name the model calls them: Anthropic's and the
    Responses API's ``tools`` (a namespace's as ``NAMESPACE__TOOL``), Gemini's declarations."""
    names: set[str] = set()
    for tool in (body or {}).get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names |= {f"{tool.get('name')}__{t.get('name')}" for t in tool.get("tools") or []}
        elif "functionDeclarations" in tool:
            names |= {str(d.get("name")) for d in tool["functionDeclarations"]}
        elif "name" in tool:
            names.add(str(tool["name"]))
    return names


def adapter_processes(spec: Launch) -> set[int]:
    """The live processes of the adapter's tree: every process with the adapter's throw-away
    HOME (however it was reparented), and their descendants."""
    marker = f"HOME={spec.home}".encode()
    found = set()
    for pid in live_processes():
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environment:
            found |= {pid} | process_tree(pid)
    return {pid for pid in found if running(pid)}


def environment_of(pid: int) -> dict[str, str]:
    """A live process's environment ({} once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def model_said(model: ScriptedServer) -> str:
    """The model requests so far, briefly, for a failure's message."""
    return "\n".join(f"{r.path} {json.dumps(r.body)[-600:]}" for r in model.chat_requests)


# -- 1. a session runs to its end in the panel ------------------------------------------------
def test_a_picked_adapter_answers_and_its_write_waits_reject_then_allow_once(
    page: Page, lab: JupyterLab, base: Path, model: ScriptedServer, adapter: Launch
) -> None:
    name = adapter.name
    target = lab.root_dir / f"note-{name}.txt"
    panel = AgentPanel.open(page, lab, f"{name}-session")
    assert name in panel.picker.locator("option").all_inner_texts()

    model.reset()
    model.script(Reply(ANSWER))
    question = f"Say hello, {name}."
    started = time.monotonic()
    panel.ask(question, name)
    panel.wait_for(ANSWER, "the scripted model's text through the adapter")
    panel.wait_for_the_end()
    first = time.monotonic() - started
    who = panel.el.locator(".nbchat-from-model .nbchat-who").last
    assert who.inner_text().strip() == f"agent:{name}"
    assert question in json.dumps(model.chat_requests[0].body)  # the question reached the model
    panel.shot(f"{name}-1-answered")

    model.reset()
    model.script(*write_file_replies(name, target, TEXT))
    panel.ask(f"Write {target.name}, please.", name)
    shown = panel.wait_for_request()
    assert target.name in shown, shown  # what it asks about is shown
    assert not target.exists()
    panel.shot(f"{name}-2-write-request")
    panel.button("Reject").click()
    wait_until(lambda: panel.button("Allow once").count() == 0, "the request closed", page)
    ended = (["complete"], ["interrupted"])  # Codex ends a refused command "cancelled"
    wait_until(lambda: [t.status for t in thread_asked(base, question).turns][1:] in ended,
               "the rejected turn's end", page, 60, f"{SHOTS}/timeout")  # fmt: skip
    panel.wait_for_the_end()
    time.sleep(1)  # the adapter had its answer: it writes nothing, now or a moment later
    assert not target.exists(), model_said(model)

    model.reset()
    model.script(*write_file_replies(name, target, TEXT))
    panel.ask(f"Write {target.name} again, please.", name)
    panel.wait_for_request()
    assert not target.exists()
    panel.button("Allow once").click()
    # The turn's end, as stored (the panel shows the rejected turn's "Done." already).
    wait_until(lambda: [t.status for t in thread_asked(base, question).turns][2:] == ["complete"],
               "the allowed turn complete", page, 60, f"{SHOTS}/timeout")  # fmt: skip
    panel.wait_for_the_end()
    assert target.exists(), f"{panel.text()[-1500:]}\n{model_said(model)}"
    assert target.read_text(encoding="utf-8") == TEXT, model_said(model)
    written = target.stat().st_mtime_ns
    panel.shot(f"{name}-3-write-allowed")

    thread = thread_asked(base, question)
    assert thread.model == f"agent:{name}" and thread.settings["acp"]["agent"] == name
    assert answers(thread) == [[], ["reject"], ["allow once"]], answers(thread)
    assert thread.turns[0].answer == ANSWER and thread.turns[-1].status == "complete"
    # The call ran once: the model was asked for it, and once more with its one result.
    assert len(model.chat_requests) == 2, model_said(model)
    time.sleep(1)
    assert panel.button("Allow once").count() == 0  # not asked again
    assert target.read_text(encoding="utf-8") == TEXT and target.stat().st_mtime_ns == written
    print(f"{name}: first answer shown after {first:.1f} s")


# -- 2. nbchat's MCP server, handed in session/new ----------------------------------------------
def test_the_adapter_reads_a_variable_through_nbchats_mcp_and_its_insert_waits(
    page: Page, lab: JupyterLab, base: Path, model: ScriptedServer, adapter: Launch
) -> None:
    name = adapter.name
    panel = AgentPanel.open(page, lab, f"{name}-mcp")
    path = panel.nb.path
    before = page.evaluate(_JS_CELLS, path)
    describe, insert = (MCP_NAMES[name].format(t) for t in ("describe_variable", "insert_cell"))
    reasoning = "The person asked for this." if name == "claude" else ""  # Claude thinks
    model.reset()
    model.script(
        Reply(tool_calls=[(describe, {"path": path, "name": "sauce"})], reasoning=reasoning,
              times=1),
        Reply(tool_calls=[(insert, {"path": path, "source": INSERTED, "why": "to say hello"})],
              reasoning=reasoning, times=1),
        Reply(FINAL),
    )  # fmt: skip
    question = f"Read sauce and add a cell, {name}."
    panel.ask(question, name)

    # The adapter may ask through ACP before it calls a tool (its own mode's rule): the person
    # allows it once, each time; nbchat's own gate is another matter (below).
    allowed = 0
    deadline = time.monotonic() + 90
    while not (panel.has(FINAL) and not panel.streaming()):
        if panel.button("Allow once").count():
            panel.shot(f"{name}-4-mcp-asked-{allowed}")
            panel.button("Allow once").first.click()
            allowed += 1
            wait_until(lambda n=allowed: len(answers(thread_asked(base, question))[0]) >= n,
                       "the answer stored", page)  # fmt: skip
        assert time.monotonic() < deadline, f"{name}'s turn did not end:\n{model_said(model)}"
        time.sleep(0.25)

    requests = model.chat_requests
    offered = tool_names(requests[0].body)
    assert {describe, insert} <= offered, sorted(offered)  # how this adapter names them
    assert len(requests) == 3, model_said(model)
    assert SAUCE not in json.dumps(requests[0].body)
    assert SAUCE in json.dumps(requests[1].body), model_said(model)  # the live value, read
    assert "waiting" in json.dumps(requests[2].body)  # the insert's result: a waiting call
    (turn,) = thread_asked(base, question).turns
    assert turn.status == "complete" and turn.answer.endswith(FINAL), (turn.status, turn.answer)
    assert answers(thread_asked(base, question)) == [["allow once"] * allowed]

    # nbchat's own prompt waits in the notebook, whatever the adapter asked or did not.
    side = page.locator(SIDE).first
    wait_until(lambda: side.count() and "asks to insert cell" in side.inner_text(),
               "the insert's prompt in the side panel", page, 30, f"{SHOTS}/timeout")  # fmt: skip
    assert INSERTED in side.inner_text()
    time.sleep(2)
    assert page.evaluate(_JS_CELLS, path) == before  # nothing landed by itself
    panel.shot(f"{name}-5-insert-waits")
    side.locator(".nbchat-prompts button", has_text=re.compile(r"^\W*Run\s*$")).first.click()
    wait_until(lambda: INSERTED in page.evaluate(_JS_CELLS, path), "the cell after Run", page)
    time.sleep(1)
    assert page.evaluate(_JS_CELLS, path) == [*before, INSERTED]  # that one cell, once
    print(f"{name}: asked through ACP {allowed} time(s) for nbchat's tools")


# -- 3. the kernel's end ends the adapter's whole tree ----------------------------------------
def test_no_process_of_the_adapter_is_left_once_its_kernels_shut_down(
    page: Page, lab: JupyterLab, base: Path, model: ScriptedServer, adapter: Launch
) -> None:
    name = adapter.name
    if not adapter_processes(adapter):  # run alone: start one first
        model.reset()
        model.script(Reply(ANSWER))
        panel = AgentPanel.open(page, lab, f"{name}-alone")
        panel.ask(f"Say hello once more, {name}.", name)
        panel.wait_for(ANSWER, "the adapter's answer")
    tree = adapter_processes(adapter)
    assert tree, f"no process of {name} runs"
    for pid in tree:  # the cut-down environment is what the adapter got
        assert "IS_SANDBOX" not in environment_of(pid), (pid, sorted(environment_of(pid)))
    sessions = lab.api("sessions")
    assert isinstance(sessions, list)
    mine = [s for s in sessions if str(s["path"]).startswith(f"{name}-")]
    assert mine
    for session in mine:  # each of its notebooks' kernels, shut down as the Running tab does
        lab.api(f"kernels/{session['kernel']['id']}", method="DELETE")
    took = wait_until(lambda: not adapter_processes(adapter) and not any(map(running, tree)),
                      f"every process of {name} gone", page, 30, f"{SHOTS}/timeout")  # fmt: skip
    print(f"{name}: {len(tree)} processes gone {took:.1f} s after the shutdown")
