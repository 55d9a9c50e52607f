"""Claude Code, Codex and Gemini CLI through their real ACP adapters, offline, over the ACP SDK.

Each test starts one adapter (``acp_adapters.launch``: a throw-away home,
the scripted server as its model, its asking mode) and talks to it with the
protocol's own Python SDK: initialize, session/new, one prompt. A plain
answer must arrive as ``agent_message_chunk`` updates; a model that asks to
write a file must make the adapter ask the person first
(``session/request_permission``), and the answer, chosen by its *kind*
(the option ids differ by adapter), decides whether the file exists. What
is proved is read off the file and the scripted server's log, never an exit
code; the adapter's whole process tree is ended after each test, and a
process left over fails it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import acp
import pytest
from acp import schema

from acp_adapters import (
    ADAPTERS,
    SERVED_MODELS,
    Launch,
    launch,
    live_processes,
    process_tree,
    start_adapter,
    write_file_replies,
)
from agent_helpers import run_async
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.acp_agent

ANSWER = "Hello from the scripted model, in five words."
STEP = 60.0  # seconds any one ACP request may take before the test fails with stderr


@dataclass
class Person(acp.Client):
    """The client side: records every update and answers each permission request with the
    first option of ``answer``'s kind; fs and terminal are not offered, so the adapters use
    their own."""

    answer: str = "reject_once"
    updates: list[Any] = field(default_factory=list)
    asked: list[schema.RequestPermissionRequest] = field(default_factory=list)

    async def request_permission(
        self, options: list[schema.PermissionOption], session_id: str,
        tool_call: schema.ToolCallUpdate, **kwargs: Any,
    ) -> schema.RequestPermissionResponse:  # fmt: skip
        self.asked.append(schema.RequestPermissionRequest(
            options=options, session_id=session_id, tool_call=tool_call))  # fmt: skip
        chosen = next(option for option in options if option.kind == self.answer)
        outcome = schema.AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        return schema.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    @property
    def message_text(self) -> str:
        """The agent's message chunks' text, joined."""
        return "".join(u.content.text for u in self.updates
                       if u.session_update == "agent_message_chunk"
                       and isinstance(u.content, schema.TextContentBlock))  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    stop_reason: str
    stderr: str


async def _converse(spec: Launch, person: Person, prompt: str) -> Outcome:
    """initialize, session/new in the launch's folder, one prompt; the adapter ended after."""
    async with start_adapter(spec) as running:
        connection = acp.connect_to_agent(person, running.stdin, running.stdout)
        try:
            await _step(running, connection.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(),
                client_info=schema.Implementation(name="nbchat-tests", version="0")))  # fmt: skip
            session = await _step(running, connection.new_session(cwd=str(spec.cwd),
                                                                  mcp_servers=[]))  # fmt: skip
            reply = await _step(running, connection.prompt(
                session_id=session.session_id, prompt=[acp.text_block(prompt)]))  # fmt: skip
        finally:
            await connection.close()
        return Outcome(reply.stop_reason, running.stderr_text)


async def _step(running: Any, request: Any) -> Any:
    try:
        return await asyncio.wait_for(request, STEP)
    except (asyncio.TimeoutError, acp.RequestError) as exc:
        name, stderr = running.launch.name, running.stderr_text
        raise AssertionError(f"{name}: {exc!r}\nstderr:\n{stderr}") from exc


def converse(spec: Launch, person: Person, prompt: str) -> Outcome:
    return run_async(lambda: _converse(spec, person, prompt))


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Any:
    with ScriptedServer(models=SERVED_MODELS) as running:
        yield running


def test_a_plain_answer_arrives_as_agent_message_chunks(adapter, server, tmp_path):
    server.script(Reply(ANSWER))
    spec = launch(adapter, server.ollama_url, tmp_path)
    person = Person()
    outcome = converse(spec, person, "Say hello.")
    assert outcome.stop_reason == "end_turn"
    assert person.message_text == ANSWER
    chunks = [u for u in person.updates if u.session_update == "agent_message_chunk"]
    assert len([c for c in chunks if c.content.text]) == len(ANSWER.split())  # streamed
    assert not person.asked
    requests = server.chat_requests
    assert requests and all(r.model == spec.model and r.status == 200 for r in requests)
    assert "Say hello." in json.dumps(requests[0].body)


@pytest.mark.parametrize(("answer", "written"), [("reject_once", False), ("allow_once", True)])
def test_a_file_is_written_only_after_the_person_allows_it(
    adapter, server, tmp_path, answer, written
):
    target = tmp_path / "work" / "note.txt"
    server.script(*write_file_replies(adapter, target, "written by the agent\n"))
    spec = launch(adapter, server.ollama_url, tmp_path)
    person = Person(answer=answer)
    outcome = converse(spec, person, "Write note.txt, please.")
    (asked,) = person.asked
    assert {o.kind for o in asked.options} >= {"allow_once", "allow_always", "reject_once"}
    assert "note.txt" in asked.tool_call.model_dump_json()  # what is asked about is shown
    if written:
        assert target.read_text(encoding="utf-8") == "written by the agent\n"
        assert outcome.stop_reason == "end_turn"
        assert person.message_text.endswith("Done.")
    else:
        assert not target.exists()
        assert list((tmp_path / "work").iterdir()) == []
    assert server.chat_requests[0].status == 200


def _tool_call_ids(updates: list[Any]) -> set[str]:
    kinds = ("tool_call", "tool_call_update")
    return {u.tool_call_id for u in updates if u.session_update in kinds}


def test_allowing_once_runs_the_call_once_and_the_model_hears_its_result(
    adapter, server, tmp_path
):
    target = tmp_path / "work" / "note.txt"
    server.script(*write_file_replies(adapter, target, "once\n"))
    spec = launch(adapter, server.ollama_url, tmp_path)
    person = Person(answer="allow_once")
    converse(spec, person, "Write note.txt, please.")
    assert target.read_text(encoding="utf-8") == "once\n"
    assert len(person.asked) == 1
    first, follow_up = server.chat_requests
    results = [m for m in follow_up.messages if m.get("role") == "tool"]
    assert len(results) == 1
    ids = _tool_call_ids(person.updates) | {person.asked[0].tool_call.tool_call_id}
    assert len(ids) == 1


def test_the_whole_process_tree_ends_even_what_left_the_group(tmp_path):
    """The harness itself: an adapter's child in a session of its own (as Codex's commands in
    their PTY) is found through its parent and ended with the group."""
    script = "setsid sleep 300 & sleep 300 & echo started; wait"
    spec = Launch("shell", "/bin/sh", ("-c", script), {"PATH": "/usr/bin:/bin"}, tmp_path,
                  tmp_path, "none")  # fmt: skip

    async def run() -> set[int]:
        async with start_adapter(spec) as running:
            assert await running.stdout.readline() == b"started\n"
            tree = process_tree(running.process.pid)
        return tree

    tree = run_async(run)
    assert len(tree) == 3  # the shell, its sleep, and the sleep in a session of its own
    assert not tree & set(live_processes())
