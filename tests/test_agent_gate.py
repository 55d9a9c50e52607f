"""Agent tokens, the endpoint's checks and the gate, without a Jupyter server.

The gate's calls are answered through ``Chat(answering=...)`` exactly as the
notebook's kernel answers them, with a runner that records what ran; races
between answers and between minting processes use real processes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agent_helpers import run_async
from nbchat import Chat
from nbchat.agents import AgentGate, TokenStore
from nbchat.agents.gate import request_key
from nbchat.agents.tools import answering_tools
from nbchat.base.errors import AgentRefused, AlreadyAnswered, InputError, StoreCorrupt
from nbchat.context.run_code import CodeDecision

RAN: list[str] = []


def runner(code: str) -> str:
    RAN.append(code)
    return f"stdout:\nran {code!r}"


def applied(op: str, arguments: dict[str, Any], decision: CodeDecision) -> None:
    RAN.append(f"{op}:{decision.code}")


@pytest.fixture
def tokens(tmp_path: Path) -> TokenStore:
    return TokenStore("ana", tmp_path / "tokens")


def reader(arguments: dict[str, Any]) -> str:
    return f"read {arguments['read']} {arguments.get('name', '')}".strip()


@pytest.fixture
def chat(open_for: Any) -> Chat:
    """A Chat over each store backend (a folder; a PostgreSQL schema when one runs)."""
    RAN.clear()
    return Chat(store=open_for("ana"), base_url="http://127.0.0.1:9/v1",
                answering=answering_tools(runner, applied, reader))  # fmt: skip


def ask(chat: Chat, token: Any, code: str = "x = 1", request_id: object = 1) -> Any:
    key = request_key(token, "run_code", {"code": code}, request_id)
    return AgentGate(chat.store).request(token, "run_code", {"code": code}, notebook="nb.ipynb",
                                         key=key, why="because")  # fmt: skip


# -- tokens ----------------------------------------------------------------------------
def test_a_token_is_shown_once_and_kept_only_as_a_hash(tokens: TokenStore) -> None:
    minted = tokens.mint("claude", paths=["analysis/"], classes=["read", "execute"], days=2)
    assert minted.secret.startswith("nbchat_agent_") and minted.secret not in repr(minted)
    on_disk = tokens.path.read_text()
    assert minted.secret not in on_disk and minted.secret.split("_")[-1] not in on_disk
    assert stat.S_IMODE(os.stat(tokens.path).st_mode) == 0o600
    token = tokens.verify(minted.secret)
    assert (token.label, token.paths, token.classes) == ("claude", ("analysis",),
                                                         ("read", "execute"))  # fmt: skip
    assert token.may_touch("analysis/q1.ipynb") and not token.may_touch("analysis2/x.ipynb")
    with pytest.raises(AgentRefused, match="leaves the server's root"):
        token.may_touch("analysis/../secret.ipynb")
    with pytest.raises(AgentRefused, match="may not use edit tools"):
        token.check("analysis/q1.ipynb", "edit")


@pytest.mark.parametrize("secret", [None, "", "Bearer x", "nbchat_agent_00000000_" + "a" * 43])
def test_unknown_tokens_are_refused_with_401(tokens: TokenStore, secret: str | None) -> None:
    tokens.mint("one")
    with pytest.raises(AgentRefused) as refused:
        tokens.verify(secret)
    assert refused.value.status == 401


def test_revoked_and_expired_tokens_are_refused(tokens: TokenStore) -> None:
    revoked, brief = tokens.mint("gone"), tokens.mint("brief", days=0.00001)
    tokens.revoke("gone")
    time.sleep(1)
    for minted, state in ((revoked, "revoked"), (brief, "expired")):
        with pytest.raises(AgentRefused, match=state) as refused:
            tokens.verify(minted.secret)
        assert refused.value.status == 401 and minted.secret not in str(refused.value)
    assert {t.label: t.state() for t in tokens.tokens()} == {"gone": "revoked", "brief": "expired"}


def test_bad_mint_arguments_are_clear_errors(tokens: TokenStore) -> None:
    for kwargs, words in (({"classes": ["write"]}, "tool classes"), ({"days": 0}, "days"),
                          ({"days": 400}, "365")):  # fmt: skip
        with pytest.raises(InputError, match=words):
            tokens.mint("x", **kwargs)
    with pytest.raises(InputError, match="label"):
        tokens.mint("<script>")
    assert not tokens.path.exists()


def test_a_damaged_token_file_is_reported_and_left_as_it_is(tokens: TokenStore) -> None:
    tokens.mint("one")
    tokens.path.write_text('{"tokens": [{"id": 3}]}')
    with pytest.raises(StoreCorrupt, match="not an nbchat token file"):
        tokens.mint("two")
    assert tokens.path.read_text() == '{"tokens": [{"id": 3}]}'


def _mint_many(folder: str, who: int) -> None:
    store = TokenStore("ana", folder)
    for n in range(5):
        store.mint(f"agent-{who}-{n}")


def test_processes_minting_at_once_lose_nothing(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_mint_many, args=(str(tmp_path), who)) for who in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    labels = {token.label for token in TokenStore("ana", tmp_path).tokens()}
    assert labels == {f"agent-{who}-{n}" for who in range(6) for n in range(5)}


# -- the endpoint's checks -------------------------------------------------------------------
def access(tokens: TokenStore, ip: str = "127.0.0.1", jupyter: str = "jupyter-secret") -> Any:
    from nbchat.jupyter.server.mcp import AgentAccess

    server = SimpleNamespace(ip=ip, identity_provider=SimpleNamespace(token=jupyter))
    return AgentAccess(server, tokens)


def test_the_endpoint_checks_the_switch_hosts_origins_and_tokens(
    tokens: TokenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tokens.mint("one").secret
    good = {"Host": "127.0.0.1:8888", "Authorization": f"Bearer {secret}"}
    assert access(tokens).check(good, "").label == "one"
    assert access(tokens).check({**good, "Host": "[::1]:8888"}, "").label == "one"
    refusals = [
        ({**good, "Host": "attacker.example:8888"}, "", 403),
        ({**good, "Origin": "http://attacker.example"}, "", 403),
        ({**good, "Authorization": "Bearer jupyter-secret"}, "", 403),
        ({"Host": "localhost"}, f"token={secret}", 401),
        ({"Host": "localhost"}, "", 401),
    ]
    for headers, query, status in refusals:
        with pytest.raises(AgentRefused) as refused:
            access(tokens).check(headers, query)
        assert refused.value.status == status and "jupyter-secret" not in str(refused.value)
    with pytest.raises(AgentRefused, match="beyond loopback"):
        access(tokens, ip="0.0.0.0").check(good, "")
    monkeypatch.setenv("NBCHAT_AGENT_HOSTS", "hub.example.org")
    monkeypatch.setenv("NBCHAT_AGENT_ORIGINS", "https://hub.example.org")
    hub = {**good, "Host": "hub.example.org", "Origin": "https://hub.example.org"}
    assert access(tokens, ip="0.0.0.0").check(hub, "").label == "one"
    monkeypatch.setenv("NBCHAT_AGENTS", "off")
    with pytest.raises(AgentRefused, match="switched off"):
        access(tokens).check(good, "")


# -- the gate -----------------------------------------------------------------------------------
def test_a_call_waits_and_the_same_request_finds_it(chat: Chat, tokens: TokenStore) -> None:
    token = tokens.verify(tokens.mint("claude").secret)
    first = ask(chat, token)
    assert first.state == "waiting" and ask(chat, token).handle == first.handle
    other = ask(chat, token, request_id=2)
    assert other.handle != first.handle
    assert [c.handle for c in AgentGate(chat.store).waiting(token)] == [first.handle,
                                                                         other.handle]
    someone = tokens.verify(tokens.mint("someone").secret)
    with pytest.raises(AgentRefused, match="no call") as refused:
        AgentGate(chat.store).status(someone, first.handle)
    assert refused.value.status == 404
    assert [info.title for info in chat.threads()] == ["Agent: claude"]  # someone asked nothing


def test_the_persons_answer_runs_the_call_once(chat: Chat, tokens: TokenStore) -> None:
    token = tokens.verify(tokens.mint("claude").secret)
    call = ask(chat, token, "print(1)")
    thread = int(call.handle.split(".")[0])
    waiting = chat.pending_calls(thread)
    assert [c.tool for c in waiting] == ["agent_run_code"]
    assert waiting[0].prompt.extra["agent"] == "claude"
    chat.answer_tool_call(thread, "run", call_id=waiting[0].call_id)
    with pytest.raises(AlreadyAnswered):
        chat.answer_tool_call(thread, "run", call_id=waiting[0].call_id)
    done = AgentGate(chat.store).status(token, call.handle)
    assert (done.state, done.answer, RAN) == ("done", "run", ["print(1)"])
    assert "ran 'print(1)'" in done.result
    shown = chat.store.get(thread).turns[0].answer
    assert "print(1)" in shown and "answered: run" in shown
    with pytest.raises(InputError, match="outside agent"):
        chat.ask(thread, "What did it do?")


def test_a_cell_change_ends_when_the_front_end_replies(chat: Chat, tokens: TokenStore) -> None:
    token = tokens.verify(tokens.mint("codex").secret)
    gate = AgentGate(chat.store)
    key = request_key(token, "insert_cell", {"code": "1+1"}, 7)
    call = gate.request(token, "insert_cell", {"code": "1+1", "index": None, "cell_type": "code"},
                        notebook="nb.ipynb", key=key, why="add")  # fmt: skip
    thread = int(call.handle.split(".")[0])
    chat.answer_tool_call(thread, "edit: 2+2")
    assert RAN == ["insert:2+2"]
    assert gate.status(token, call.handle).state == "running"
    gate.complete(call.handle, "The cell was inserted; its id is abc.")
    gate.complete(call.handle, "a second reply is ignored")
    done = gate.status(token, call.handle)
    assert (done.state, done.result) == ("done", "The cell was inserted; its id is abc.")


def _answer(store: str, thread: int, call_id: str, said: Any) -> None:
    chat = Chat(store=store, user="ana", base_url="http://127.0.0.1:9/v1",
                answering=answering_tools(_record_run, applied))  # fmt: skip
    try:
        chat.answer_tool_call(thread, "run", call_id=call_id)
        said.put("won")
    except AlreadyAnswered:
        said.put("lost")


def _record_run(code: str) -> str:
    with open(os.environ["RUNS_FILE"], "a") as file:
        file.write(code + "\n")
    return "ran"


def test_two_answers_racing_from_two_processes_run_it_once(
    chat: Chat, tokens: TokenStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    location: str,
) -> None:
    runs = tmp_path / "runs.txt"
    monkeypatch.setenv("RUNS_FILE", str(runs))
    token = tokens.verify(tokens.mint("claude").secret)
    call = ask(chat, token, "launch()")
    thread = int(call.handle.split(".")[0])
    call_id = chat.pending_calls(thread)[0].call_id
    context = multiprocessing.get_context("spawn")
    said = context.Queue()
    racers = [context.Process(target=_answer, args=(location, thread, call_id, said))
              for _ in range(4)]  # fmt: skip
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    assert sorted(said.get(timeout=5) for _ in racers) == ["lost", "lost", "lost", "won"]
    assert runs.read_text() == "launch()\n"
    assert AgentGate(chat.store).status(token, call.handle).state == "done"


def test_the_prompt_shows_who_asks_why_and_every_character(chat: Chat, tokens: TokenStore) -> None:
    from nbchat.jupyter.cell._tool_prompt import ToolPrompt

    token = tokens.verify(tokens.mint("codex").secret)
    code = "x = '<img src=x onerror=alert(1)>'\nif x\u202e:\n    pass"
    key = request_key(token, "run_code", {"code": code}, 3)
    call = AgentGate(chat.store).request(token, "run_code", {"code": code}, notebook="nb.ipynb",
                                         key=key, why="<b>trust me</b>")  # fmt: skip
    pending = chat.pending_calls(int(call.handle.split(".")[0]))[0]
    prompt = ToolPrompt(chat, pending)
    shown = prompt.children[0].outputs[0]["data"]["text/html"]
    prompt.submit("reject")  # answered: it leaves the kernel's live prompts
    assert "Agent codex (token" in shown and "&lt;b&gt;trust me&lt;/b&gt;" in shown
    assert "<img" not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown
    assert "\\u202e" in shown and "\u202e" not in shown
    assert "Running code in your kernel" in shown


def test_reads_ask_under_the_tokens_policy_or_the_administrators_cap(
    tokens: TokenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_once = tokens.verify(tokens.mint("reader").secret)
    asking = tokens.verify(tokens.mint("careful", approve="always").secret)
    assert (at_once.reads_ask, asking.reads_ask) == (False, True)
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "always")
    assert at_once.reads_ask
    with pytest.raises(InputError, match="read-only or always"):
        tokens.mint("x", approve="never-ask")


def test_a_read_that_asks_reads_only_after_run(chat: Chat, tokens: TokenStore) -> None:
    token = tokens.verify(tokens.mint("careful", approve="always").secret)
    gate = AgentGate(chat.store)
    arguments = {"code": "describe_variable('df')", "read": "describe_variable", "name": "df"}
    call = gate.request(token, "read", arguments, notebook="nb.ipynb",
                        key=request_key(token, "read", arguments, 1), why="look")  # fmt: skip
    thread = int(call.handle.split(".")[0])
    with pytest.raises(Exception, match="cannot be edited"):
        chat.answer_tool_call(thread, "edit: df.to_csv('/tmp/x')")
    chat.answer_tool_call(thread, "run")
    done = gate.status(token, call.handle)
    assert done.state == "done" and done.result == "read describe_variable df"


def test_a_wait_on_a_call_ends_on_another_processs_answer(
    chat: Chat, tokens: TokenStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    location: str,
) -> None:
    monkeypatch.setenv("RUNS_FILE", str(tmp_path / "runs.txt"))
    token = tokens.verify(tokens.mint("claude").secret)
    gate = AgentGate(chat.store)
    call = ask(chat, token, "answered()")
    thread = int(call.handle.split(".")[0])
    call_id = chat.pending_calls(thread)[0].call_id
    context = multiprocessing.get_context("spawn")
    said = context.Queue()

    async def waiting() -> list[str]:
        stamp = gate.stamp(call.handle)
        seen = [gate.status(token, call.handle).state]
        waiter = asyncio.ensure_future(gate.wait(call.handle, 60, since=stamp))
        await asyncio.sleep(0.5)
        seen.append("woken early" if waiter.done() else "still waiting")
        answerer = context.Process(target=_answer, args=(location, thread, call_id, said))
        answerer.start()
        await asyncio.wait_for(waiter, 30)  # well before its 60 s: the stamp changed
        await asyncio.get_running_loop().run_in_executor(None, answerer.join, 60)
        seen.append(gate.status(token, call.handle).state)
        again = asyncio.ensure_future(gate.wait(call.handle, 60, since=gate.stamp(call.handle)))
        await asyncio.sleep(0)
        key = request_key(token, "run_code", {"code": "another()"}, 2)  # this gate writes
        gate.request(token, "run_code", {"code": "another()"}, notebook="nb.ipynb", key=key)
        await asyncio.wait_for(again, 30)
        return seen

    assert run_async(waiting) == ["waiting", "still waiting", "done"]
    assert said.get(timeout=5) == "won"


def test_the_calls_waiting_for_one_token_are_bounded_in_number_and_size(
    chat: Chat, tokens: TokenStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbchat.agents import gate as gate_module

    monkeypatch.setattr(gate_module, "MAX_WAITING_CHARS", 2_500)
    token = tokens.verify(tokens.mint("claude").secret)
    first = ask(chat, token, "a" * 1_000, request_id=1)
    ask(chat, token, "b" * 1_000, request_id=2)
    assert ask(chat, token, "a" * 1_000, request_id=1).handle == first.handle  # a re-send
    with pytest.raises(AgentRefused, match=r"this call's 1,000 characters with the 2,0\d\d of "
                                           r"this token's waiting calls pass 2,500") as refused:
        ask(chat, token, "c" * 1_000, request_id=3)
    assert refused.value.status == 429
    thread = int(first.handle.split(".")[0])
    chat.answer_tool_call(thread, "reject", call_id=chat.pending_calls(thread)[0].call_id)
    assert ask(chat, token, "c" * 1_000, request_id=3).state == "waiting"  # room again
    someone = tokens.verify(tokens.mint("someone").secret)
    assert ask(chat, someone, "d" * 2_000).state == "waiting"
