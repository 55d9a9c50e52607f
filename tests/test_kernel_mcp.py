"""MCP tools in real kernels: at once, suspended, resumed after a restart, raced, stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernel_helpers import Kernel, kernel_env
from mcp_helpers import SRC, server_entry, write_config
from nbchat import Chat
from nbchat.mcp.servers import session_servers
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


@pytest.fixture
def env(scripted_server: ScriptedServer, tmp_path: Path, notes: Path) -> dict[str, str]:
    env = kernel_env(
        tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url, NBCHAT_MODEL="scripted-small",
        NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER="ana", PYTHONPATH=SRC,
        NBCHAT_MCP_ADMIN_CONFIG=str(tmp_path / "no-admin.json"),
    )  # fmt: skip
    entry = server_entry(extra_args=["--notes", str(notes)], approve="read-only")
    write_config(Path(env["JUPYTER_CONFIG_DIR"]), {"t": entry})
    return env


def gone(pid: int, wait: float = 15.0) -> bool:
    """Whether process ``pid`` has ended, waiting up to ``wait`` seconds for it."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("now", [False, True], ids=["shut down", "killed"])
def test_a_read_only_tool_runs_at_once_and_the_server_ends_with_the_kernel(
    env, scripted_server, now
):
    scripted_server.script(
        Reply(when="pid", tool_calls=[("t__whoami", {})], times=1),
        Reply("Got it.", after_tool="t__whoami"),
    )
    kernel = Kernel(env).start()
    try:
        kernel.ok("%load_ext nbchat")
        asked = kernel.ok("%chat --no-stream what is the pid?")
        assert "Got it." in asked.text()
        (tool,) = [m for request in scripted_server.chat_requests for m in request.messages
                   if m["role"] == "tool"]  # fmt: skip
        answer = tool["content"].split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]
        pid = json.loads(answer)["pid"]
        assert not gone(pid, wait=0)
        kernel.client.stop_channels()
        # Shut down as a front end does (nbchat stops the server at exit), or killed
        # outright (the server sees its stdin close, and exits, as MCP asks of it).
        kernel.manager.shutdown_kernel(now=now)
        kernel.client = kernel.manager = None
        assert gone(pid)
    finally:
        kernel.shutdown()


def test_a_writing_tool_suspends_and_is_answered_after_a_restart(env, scripted_server, notes):
    scripted_server.script(
        Reply(when="note", tool_calls=[("t__write_note", {"text": "kept"})], times=1),
        Reply("Noted.", after_tool="t__write_note"),
    )
    with Kernel(env) as first:
        first.ok("%load_ext nbchat")
        asked = first.ok("%chat --no-stream take a note")
        assert "Run tool 'write_note' of MCP server 't' with the arguments shown?" in asked.text()
        assert not notes.exists()
    with Kernel(env) as second:
        second.ok("%load_ext nbchat")
        answered = second.ok("%chat --answer run")
        assert "Noted." in answered.text()
        again = second.run("%chat --answer run")
        assert "no client-tool call waiting" in again.text() or "already answered" in again.text()
    assert notes.read_text() == "kept\n"


RACER = textwrap.dedent("""
    import sys, time
    from nbchat import Chat
    from nbchat.base.errors import AlreadyAnswered
    start = float(sys.argv[1])
    chat = Chat(user="ana")
    (call,) = chat.pending_calls(1)
    time.sleep(max(0.0, start - time.time()))
    try:
        chat.answer_tool_call(1, "run")
        print("ran")
    except AlreadyAnswered:
        print("lost")
""")


def test_two_answers_racing_run_the_tool_once(
    env, scripted_server, notes, tmp_path, monkeypatch
):
    scripted_server.script(
        Reply(when="note", tool_calls=[("t__write_note", {"text": "once"})], times=1),
        Reply("Noted.", after_tool="t__write_note"),
    )
    chat = Chat(base_url=scripted_server.url, store=tmp_path / "store", user="ana",
                model="scripted-small")  # fmt: skip
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", env["JUPYTER_CONFIG_DIR"])
    assert chat.ask(chat.new_thread(), "take a note").status == "suspended"
    session_servers().close()
    start = str(time.time() + 4)
    racers = [subprocess.Popen([sys.executable, "-c", RACER, start], env=env,
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    results = sorted(racer.communicate(timeout=90)[0].strip() for racer in racers)
    assert results == ["lost", "ran"]
    assert notes.read_text() == "once\n"
