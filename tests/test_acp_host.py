"""Coding agents hosted in the chat (ACP), against the scripted ACP agent in real processes.

The agent is ``python -m nbchat.testing.acp_agent`` speaking ACP over stdio
through the protocol's own SDK, configured in the test's ``agents.json``;
what it does is checked where it lands (a file written or not, a process
still there or not), never by its exit code.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from nbchat import AgentError, AgentGone, AlreadyAnswered, Chat, InvalidToolAnswer
from nbchat.agents.acp import AcpHost, find_agent
from nbchat.agents.acp._process import descendants
from nbchat.base.events import ReasoningDelta, TextDelta, ToolCallPending, ToolResult
from nbchat.store.tinydb import ThreadStore

WRITE = [{"say": "Writing it. ", "chunks": 2},
         {"write": {"path": "notes.txt", "content": "hello\n"}}, {"say": "Done."}]


def configure(tmp_path: Path, turns: list[dict]) -> Path:
    """agents.json naming the scripted agent ``scripted``, playing ``turns``."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    folder = Path(os.environ["JUPYTER_CONFIG_DIR"]) / "nbchat"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"command": sys.executable, "args": ["-m", "nbchat.testing.acp_agent", str(script)],
             "env": {"SCRIPTED_ACP_PIDS": str(tmp_path / "pids")}}
    (folder / "agents.json").write_text(json.dumps({"agentServers": {"scripted": entry}}))
    return tmp_path


@pytest.fixture
def host(tmp_path: Path):
    store = ThreadStore(tmp_path / "store", "tester")
    made = AcpHost(store, cwd=str(tmp_path))
    yield made
    made.close()


def chat_for(host: AcpHost) -> Chat:
    return Chat(store=host.store, hosted=host, base_url="http://127.0.0.1:9/v1")


def ask(host: AcpHost, thread: int, question: str) -> list:
    return list(host.iter_ask(thread, question))


def test_an_agents_turn_streams_as_events_and_is_kept_in_its_thread(host, tmp_path):
    configure(tmp_path, [{"when": "hello", "steps": [
        {"think": "A greeting."}, {"plan": [["greet", "completed"], ["wait", "pending"]]},
        {"say": "Hi <img src=x onerror=alert(1)> \u202e there", "chunks": 4},
        {"tool": {"kind": "edit", "title": "Edit a.py", "path": "a.py", "old": "x = 1\n",
                  "new": "x = 2\n"}}]}])
    thread = host.new_thread("scripted")
    events = ask(host, thread, "hello agent")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Hi <img src=x onerror=alert(1)> \u202e there"  # data, kept as sent
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["A greeting."]
    plan, edit = [e for e in events if isinstance(e, ToolResult)]
    assert plan.shown == "☑ greet\n☐ wait"
    assert edit.call.name == "edit: Edit a.py (a.py)"
    assert "-x = 1\n+x = 2" in edit.shown and edit.shown.startswith("--- a.py (now)")
    saved = host.store.get(thread)
    assert saved.model == "agent:scripted" and saved.title == "hello agent"
    assert saved.settings["acp"]["session"]
    (turn,) = saved.turns
    assert (turn.status, turn.answer, turn.reasoning) == ("complete", text, "A greeting.")
    assert any("edit: Edit a.py" in json.dumps(m) for m in turn.messages)  # the audit


def test_a_write_waits_for_the_person_and_reject_leaves_nothing(host, tmp_path):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    events = ask(host, thread, "write the notes")
    (pending,) = [e.pending for e in events if isinstance(e, ToolCallPending)]
    assert pending.prompt.options == ("Allow once", "Allow always", "Reject")
    assert "+hello" in pending.prompt.markdown  # the request's own diff, shown
    assert host.store.get(thread).turns[-1].status == "suspended"  # persisted, waiting
    chat = chat_for(host)
    with pytest.raises(InvalidToolAnswer, match="allow once, allow always, reject"):
        chat.iter_answer_tool_call(thread, "maybe")
    list(chat.iter_answer_tool_call(thread, "reject"))
    assert not (tmp_path / "notes.txt").exists()
    turn = host.store.get(thread).turns[-1]
    assert turn.status == "complete" and turn.answered[0].answer == "reject"


def test_allow_runs_it_once_and_a_second_answer_is_refused(host, tmp_path):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    ask(host, thread, "write the notes")
    chat = chat_for(host)
    results = []

    def answer(value: str) -> None:
        try:
            results.append(list(chat.iter_answer_tool_call(thread, value)))
        except AlreadyAnswered as error:
            results.append(error)

    racers = [threading.Thread(target=answer, args=(v,)) for v in ("allow", "allow once")]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    assert sum(isinstance(r, AlreadyAnswered) for r in results) == 1
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    turn = host.store.get(thread).turns[-1]
    assert turn.status == "complete" and turn.answer == "Writing it. Done."
    assert [a.answer for a in turn.answered] == ["allow once"]


def test_always_is_kept_per_agent_and_kind_within_the_cap(host, tmp_path, monkeypatch):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    chat = chat_for(host)
    ask(host, thread, "write the notes")
    list(chat.iter_answer_tool_call(thread, "always"))
    (tmp_path / "notes.txt").unlink()
    events = ask(host, thread, "write again")  # the same kind: not asked again
    assert not [e for e in events if isinstance(e, ToolCallPending)]
    assert (tmp_path / "notes.txt").exists()
    assert "remembered" in json.dumps(host.store.get(thread).turns[-1].messages)
    (tmp_path / "notes.txt").unlink()
    another = host.new_thread("scripted")  # the same agent in another thread: kept too
    assert not [e for e in ask(host, another, "write the notes")
                if isinstance(e, ToolCallPending)]  # fmt: skip
    assert (tmp_path / "notes.txt").exists()
    # Under the administrator's cap "always", nothing is allowed for good, even what was.
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "always")
    other = host.new_thread("scripted")
    ask(host, other, "write the notes")
    list(chat.iter_answer_tool_call(other, "allow always"))
    assert host.store.get(other).turns[-1].answered[0].answer == "allow once"
    assert [e for e in ask(host, other, "write again") if isinstance(e, ToolCallPending)]


def test_a_request_whose_agent_is_gone_is_answered_as_cancelled(host, tmp_path):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    ask(host, thread, "write the notes")
    host.close()  # the agent's process tree ends while its request waits
    chat = chat_for(host)
    with pytest.raises(AgentGone, match="ask again: %chat --with scripted"):
        chat.iter_answer_tool_call(thread, "allow")
    turn = host.store.get(thread).turns[-1]
    assert turn.status == "interrupted" and turn.answered[0].answer == "cancelled"
    assert not (tmp_path / "notes.txt").exists()
    # The thread goes on: the next question starts the agent again.
    assert ask(host, thread, "hello")[-1].status == "complete"


def test_a_restarted_kernel_closes_what_the_ended_one_left_waiting(host, tmp_path):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    ask(host, thread, "write the notes")
    settings = host.store.get(thread).settings
    dead = {**settings["acp"], "host": "elsewhere:1:0"}  # a host process that has ended
    host.store.update_thread(thread, settings={**settings, "acp": dead})
    later = AcpHost(host.store, cwd=str(tmp_path))
    try:
        with pytest.raises(AgentGone):
            chat_for(later).iter_answer_tool_call(thread, "allow")
        assert host.store.get(thread).turns[-1].answered[0].answer == "cancelled"
    finally:
        later.close()


def test_stop_cancels_the_turn_and_the_agent_says_so(host, tmp_path):
    configure(tmp_path, [{"when": "slow", "steps": [
        {"say": "Starting."}, {"sleep": 30}, {"say": "never"}]}])
    thread = host.new_thread("scripted")
    answer = host.iter_ask(thread, "slow work")
    timer = threading.Timer(1.0, host.stop, args=(thread,))
    timer.start()
    started = time.monotonic()
    events = list(answer)
    assert time.monotonic() - started < 15
    assert events[-1].status == "interrupted"
    turn = host.store.get(thread).turns[-1]
    assert turn.status == "interrupted" and turn.answer == "Starting."


def test_the_agents_whole_process_tree_is_ended(host, tmp_path):
    configure(tmp_path, [{"when": "spawn", "steps": [{"spawn": 300}, {"say": "ok"}]}])
    thread = host.new_thread("scripted")
    ask(host, thread, "spawn a child")
    agent, child = map(int, (tmp_path / "pids").read_text().split())
    assert child in descendants(agent)
    host.close()
    for pid in (agent, child):
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def test_a_huge_update_is_bounded(host, tmp_path):
    configure(tmp_path, [{"when": "big", "steps": [{"say": "y" * 10_000_000}]}])
    thread = host.new_thread("scripted")
    events = ask(host, thread, "big answer")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert len(text) < 2_100_000 and "the rest is left out" in text
    assert events[-1].status == "complete"


def test_agents_that_cannot_start_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no adapter installed
    with pytest.raises(AgentError, match="npm install -g @zed-industries/claude-agent-acp"):
        find_agent("claude")
    with pytest.raises(AgentError, match="no agent is called 'nope'"):
        find_agent("nope")
    configure(tmp_path, [])
    monkeypatch.setenv("NBCHAT_ACP_ALLOW", "/usr/bin/*")
    with pytest.raises(AgentError, match="not allowed here"):
        find_agent("scripted")
    monkeypatch.setenv("NBCHAT_ACP", "off")
    with pytest.raises(AgentError, match="turned off by NBCHAT_ACP=off"):
        find_agent("scripted")


def test_a_question_for_nbchats_model_in_an_agents_thread_is_refused(host, tmp_path):
    configure(tmp_path, [])
    thread = host.new_thread("scripted")
    with pytest.raises(Exception, match="--with scripted QUESTION"):
        chat_for(host).iter_ask(thread, "hello")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_later_start_resumes_the_agents_session(host, tmp_path):
    configure(tmp_path, [])
    thread = host.new_thread("scripted")
    ask(host, thread, "hello")
    first = host.store.get(thread).settings["acp"]["session"]
    host.close()  # as a kernel restart does
    assert ask(host, thread, "hello again")[-1].status == "complete"
    assert host.store.get(thread).settings["acp"]["session"] == first  # session/load, same id
    assert [t.answer for t in host.store.get(thread).turns] == [
        "You asked: hello", "You asked: hello again"]


def test_each_session_gets_a_token_of_its_own_scoped_and_revoked(tmp_path, monkeypatch):
    from nbchat.agents.tokens import TokenStore
    from nbchat.jupyter.agents import _endpoint, _hosting

    monkeypatch.setattr(_endpoint, "endpoint_url", lambda: "http://127.0.0.1:1/nbchat/mcp")
    monkeypatch.setattr(_endpoint, "notebook_scope", lambda: "work/nb.ipynb")
    store = ThreadStore(tmp_path / "store", "tester")
    (server,), revoke = _hosting._nbchat_mcp(store, 3)
    assert server.url == "http://127.0.0.1:1/nbchat/mcp" and server.name == "nbchat"
    secret = server.headers[0].value.removeprefix("Bearer ")
    tokens = TokenStore("tester")
    token = tokens.verify(secret)
    assert token.paths == ("work/nb.ipynb",) and token.label.startswith("hosted agent: thread 3")
    (again,), _ = _hosting._nbchat_mcp(store, 3)  # a later session of that thread (a restart)
    with pytest.raises(Exception, match="revoked"):
        tokens.verify(secret)  # the earlier session's token no longer works
    renewed = again.headers[0].value.removeprefix("Bearer ")
    assert tokens.verify(renewed).is_live
    monkeypatch.setenv("NBCHAT_AGENTS", "off")
    assert _hosting._nbchat_mcp(store, 4) == ([], None)  # the endpoint is off: no tools handed
    revoke()  # the first session's: revoked already, and says nothing


def test_without_the_sdk_one_line_says_what_to_install(host, tmp_path, monkeypatch):
    configure(tmp_path, [])
    thread = host.new_thread("scripted")
    monkeypatch.setitem(sys.modules, "acp", None)  # as if nbchat[acp] were not installed
    with pytest.raises(AgentError, match=r'pip install "nbchat\[acp\]"'):
        host.iter_ask(thread, "hello")
    assert host.store.get(thread).turns == []  # nothing half-written


def test_a_restarted_kernel_never_offers_the_ended_agents_request(host, tmp_path):
    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    ask(host, thread, "write the notes")
    assert len(chat_for(host).pending_calls(thread)) == 1  # its agent waits on it: offered
    settings = host.store.get(thread).settings
    host.store.update_thread(thread, settings={**settings, "acp": {**settings["acp"],
                                                                   "host": "elsewhere:1:0"}})
    later = AcpHost(host.store, cwd=str(tmp_path))  # the restarted kernel's host
    try:
        assert chat_for(later).pending_calls(thread) == []  # not offered with live buttons
        assert chat_for(later).pending_calls() == []
        turn = host.store.get(thread).turns[-1]
        assert turn.status == "interrupted" and turn.answered[0].answer == "cancelled"
    finally:
        later.close()


def test_the_agents_words_before_a_closed_request_stay_in_its_turn(host, tmp_path):
    from nbchat.jupyter.cell._views import answer_markdown

    configure(tmp_path, [{"when": "write", "steps": WRITE}])
    thread = host.new_thread("scripted")
    ask(host, thread, "write the notes")
    ask(host, thread, "never mind")  # closes the waiting request as cancelled
    first, second = host.store.get(thread).turns
    shown = answer_markdown(first)
    assert shown.startswith("Writing it.") and "**cancelled**" in shown
    assert answer_markdown(second) == "You asked: never mind"
    # A resumed turn keeps its words in order too: before the request, then after it.
    ask(host, thread, "write the notes")
    list(chat_for(host).iter_answer_tool_call(thread, "allow"))
    shown = answer_markdown(host.store.get(thread).turns[-1])
    assert shown.index("Writing it.") < shown.index("allow once") < shown.index("Done.")


def test_a_thread_another_live_kernel_hosts_is_not_started_twice(host, tmp_path):
    import socket
    import subprocess

    from nbchat.base._pids import started

    configure(tmp_path, [])
    thread = host.new_thread("scripted")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        settings = host.store.get(thread).settings
        key = f"{socket.gethostname()}:{other.pid}:{started(other.pid)}"  # a live kernel's
        host.store.update_thread(thread, settings={**settings,
                                                   "acp": {**settings["acp"], "host": key}})
        with pytest.raises(AgentError, match=f"in another kernel .process {other.pid}"):
            host.iter_ask(thread, "hello")
        assert host.store.get(thread).turns == []
    finally:
        other.kill()
        other.wait()
    assert ask(host, thread, "hello")[-1].status == "complete"  # that kernel ended: taken up
    host.close()
    assert host.store.get(thread).settings["acp"]["host"] == ""  # let go for another kernel


def test_an_agents_entry_can_leave_the_persons_variables_out(tmp_path, monkeypatch):
    from nbchat.agents.acp._session import _environment

    configure(tmp_path, [])
    path = Path(os.environ["JUPYTER_CONFIG_DIR"]) / "nbchat" / "agents.json"
    config = json.loads(path.read_text())
    config["agentServers"]["scripted"]["env"] = {"IS_SANDBOX": None, "ADDED": "yes"}
    path.write_text(json.dumps(config))
    monkeypatch.setenv("IS_SANDBOX", "yes")
    environment = _environment(find_agent("scripted"))
    assert "IS_SANDBOX" not in environment and environment["ADDED"] == "yes"
    assert environment["PATH"] == os.environ["PATH"]  # the rest is the person's


def test_a_sessions_token_is_scrubbed_from_what_nbchat_shows(tmp_path, monkeypatch):
    from nbchat.base._secrets import scrub, scrub_pieces
    from nbchat.jupyter.agents import _endpoint, _hosting

    monkeypatch.setattr(_endpoint, "endpoint_url", lambda: "http://127.0.0.1:1/nbchat/mcp")
    monkeypatch.setattr(_endpoint, "notebook_scope", lambda: "nb.ipynb")
    (server,), _ = _hosting._nbchat_mcp(ThreadStore(tmp_path / "store", "tester"), 7)
    secret = server.headers[0].value.removeprefix("Bearer ")
    assert secret not in scrub(f"the agent said {secret}")  # by its shape, as every agent token
    kept = "nbchat_agent_ids are 8 hex digits"  # the shape's prefix alone is not a secret
    assert scrub_pieces(kept) == kept
