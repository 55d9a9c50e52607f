"""Claude Code, Codex and Gemini CLI through their real ACP adapters, hosted by nbchat's AcpHost.

``test_acp_adapters.py`` proves the adapters against the protocol's SDK;
these drive the same adapters (``acp_adapters.launch``: a throw-away home,
the scripted server as their model, their asking mode) through nbchat
itself: an ``agents.json`` entry named after the adapter, an
:class:`~nbchat.agents.acp.AcpHost` over a thread store, the person's answer
given with :meth:`nbchat.Chat.iter_answer_tool_call`. A plain answer streams
as TextDelta and completes the turn; a write suspends the turn on one call
(drawn from the request's own ``toolCall``: Codex and Gemini send no
``tool_call`` first), and the file exists only after "allow"; closing the
host ends the adapter's whole process tree, and an answer after that is
AgentGone with nothing written. What is proved is read off the file, the
store and ``/proc``, never an exit code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_adapters import (
    ADAPTERS,
    SERVED_MODELS,
    Launch,
    end_process_tree,
    launch,
    live_processes,
    process_tree,
    write_file_replies,
)
from nbchat import AgentGone, AlreadyAnswered, Chat, NoPendingCall
from nbchat.agents.acp import AcpHost
from nbchat.base.events import TextDelta, ToolCallPending, TurnFinished
from nbchat.base.records import PendingCall
from nbchat.store.tinydb import ThreadStore
from nbchat.testing import Reply, ScriptedServer

pytestmark = [pytest.mark.acp_agent, pytest.mark.timeout(60)]

ANSWER = "Hello from the scripted model, in five words."
TEXT = "written by the agent\n"
ASK_WRITE = "Write note.txt, please."
# What each adapter says it asks about (the request's toolCall kind).
TOOL_KINDS = {"claude": "edit", "codex": "execute", "gemini": "edit"}


@dataclass
class Hosted:
    """One adapter as nbchat hosts it: its launch, the host, a thread of it, the target file."""

    name: str
    launch: Launch
    host: AcpHost
    thread: int

    @property
    def target(self) -> Path:
        return self.launch.cwd / "note.txt"

    def chat(self) -> Chat:
        return Chat(store=self.host.store, hosted=self.host, base_url="http://127.0.0.1:9/v1")

    def ask(self, question: str) -> list[Any]:
        return list(self.host.iter_ask(self.thread, question))

    def answer(self, response: str) -> list[Any]:
        return list(self.chat().iter_answer_tool_call(self.thread, response))

    def turn(self) -> Any:
        return self.host.store.get(self.thread).turns[-1]

    def pid(self) -> int:
        process = self.host._sessions[self.thread].process
        assert process is not None
        return process.pid

    def said(self) -> str:
        """The adapter's last stderr lines, for a failure's message."""
        session = self.host._sessions.get(self.thread)
        return "\n".join(session.stderr) if session is not None else "(no session)"


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(models=SERVED_MODELS) as running:
        yield running


def configure(spec: Launch) -> None:
    """The test's agents.json: an entry named after the adapter, started as the launch says."""
    folder = Path(os.environ["JUPYTER_CONFIG_DIR"]) / "nbchat"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"command": spec.command, "args": list(spec.args), "env": dict(spec.env),
             "cwd": str(spec.cwd)}  # fmt: skip
    (folder / "agents.json").write_text(json.dumps({"agentServers": {spec.name: entry}}))


def only_the_launch_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave in this process only what nbchat reads (``NBCHAT_*``, ``JUPYTER_*``) and the
    launch's own PATH and LANG: an agent runs with ``os.environ`` plus its entry's ``env``, and
    the launch's env is complete, so the adapter gets that and nothing of the machine's. (A
    machine's variables change what the adapters do: as root, ``IS_SANDBOX=yes`` makes
    claude-agent-acp offer the bypass mode that Claude Code then refuses, so ``session/new``
    fails "Query closed before response received"; and with the machine's environment Codex
    sometimes runs an approved command in its bubblewrap sandbox, which is not shipped, so
    the command panics and writes nothing.)"""
    for name in list(os.environ):
        if not name.startswith(("NBCHAT_", "JUPYTER_")) and name not in ("PATH", "LANG"):
            monkeypatch.delenv(name)


@pytest.fixture
def hosted(
    adapter: str, server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Hosted]:
    only_the_launch_environment(monkeypatch)
    spec = launch(adapter, server.ollama_url, tmp_path / "adapter")
    configure(spec)
    host = AcpHost(ThreadStore(tmp_path / "store", "tester"), cwd=str(spec.cwd))
    made = Hosted(adapter, spec, host, host.new_thread(adapter))
    try:
        yield made
    finally:
        pids = [s.process.pid for s in host._sessions.values() if s.process is not None]
        host.close()
        left = {pid: sorted(process_tree(pid)) for pid in pids if process_tree(pid)}
        for pid in left:
            end_process_tree(pid)
        assert not left, f"{adapter}'s process tree outlived host.close(): {left}"


def the_pending(hosted: Hosted, events: list[Any]) -> PendingCall:
    """The one call the turn waits on; the turn suspended, kept so in the store."""
    pending = [e.pending for e in events if isinstance(e, ToolCallPending)]
    assert len(pending) == 1, f"{hosted.name} asked {len(pending)} times:\n{hosted.said()}"
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "suspended"
    assert hosted.turn().status == "suspended"
    assert [call.call_id for call in hosted.turn().pending] == [pending[0].call_id]
    return pending[0]


def test_a_plain_answer_streams_and_completes_the_turn(hosted, server):
    server.script(Reply(ANSWER))
    events = hosted.ask("Say hello.")
    text = "".join(e.text for e in events if type(e) is TextDelta)
    assert text == ANSWER, hosted.said()
    assert not [e for e in events if isinstance(e, ToolCallPending)]
    turn = hosted.turn()
    assert (turn.status, turn.answer) == ("complete", ANSWER)
    assert hosted.host.store.get(hosted.thread).settings["acp"]["session"]
    assert server.chat_requests and "Say hello." in json.dumps(server.chat_requests[0].body)


def test_a_write_waits_for_the_person_and_reject_leaves_no_file(hosted, server):
    server.script(*write_file_replies(hosted.name, hosted.target, TEXT))
    pending = the_pending(hosted, hosted.ask(ASK_WRITE))
    assert {"Allow once", "Reject"} <= set(pending.prompt.options)
    assert pending.arguments["tool_kind"] == TOOL_KINDS[hosted.name]
    assert "note.txt" in pending.prompt.markdown  # what it asks about is shown
    assert not hosted.target.exists()  # nothing before the answer
    hosted.answer("reject")
    assert not hosted.target.exists()
    assert list(hosted.launch.cwd.iterdir()) == []
    turn = hosted.turn()
    assert turn.status != "suspended" and not turn.pending
    assert [a.answer for a in turn.answered] == ["reject"]


def test_allow_writes_the_file_once_and_a_second_answer_is_refused(hosted, server):
    server.script(*write_file_replies(hosted.name, hosted.target, TEXT))
    the_pending(hosted, hosted.ask(ASK_WRITE))
    events = hosted.answer("allow")
    assert hosted.target.read_text(encoding="utf-8") == TEXT, hosted.said()
    assert not [e for e in events if isinstance(e, ToolCallPending)]  # not asked again
    turn = hosted.turn()
    assert turn.status == "complete", (turn.status, turn.error, hosted.said())
    assert turn.answer.endswith("Done.")
    assert [a.answer for a in turn.answered] == ["allow once"]
    first, follow_up = server.chat_requests  # the call ran once: one result went back
    assert len([m for m in follow_up.messages if m.get("role") == "tool"]) == 1
    with pytest.raises((AlreadyAnswered, NoPendingCall)):
        hosted.answer("allow")
    assert hosted.target.read_text(encoding="utf-8") == TEXT
    assert len(server.chat_requests) == 2


def test_closing_the_host_ends_the_adapters_tree_and_a_later_answer_is_agent_gone(hosted, server):
    server.script(*write_file_replies(hosted.name, hosted.target, TEXT))
    the_pending(hosted, hosted.ask(ASK_WRITE))
    pid = hosted.pid()
    tree = process_tree(pid)
    assert pid in tree
    hosted.host.close()  # Stop, while the adapter waits on the person
    assert not (tree | process_tree(pid)) & set(live_processes())
    with pytest.raises(AgentGone):
        hosted.answer("allow")
    assert not hosted.target.exists()
    turn = hosted.turn()
    assert turn.status == "interrupted"
    assert [a.answer for a in turn.answered] == ["cancelled"]
