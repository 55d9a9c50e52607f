"""``python -m nbchat keys``: a key typed once at a hidden prompt in a real terminal."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from nbchat.base.connections import config_path, load
from nbchat.testing import Reply, ScriptedServer

KEY = "sk-typed-in-a-terminal-0123456789"


def in_a_terminal(args: list[str], typed: str | None = None,
                  timeout: float = 60) -> tuple[int, str]:  # fmt: skip
    """Run ``python -m nbchat ARGS`` on a pseudo-terminal, typing ``typed`` at its prompt."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "nbchat", *args], stdin=follower,
                               stdout=follower, stderr=follower, env=dict(os.environ),
                               start_new_session=True)  # fmt: skip
    os.close(follower)
    shown, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
            if typed is not None and b"hidden" in shown:
                os.write(leader, typed.encode() + b"\r")
                typed = None
        elif process.poll() is not None:
            break
    code = process.wait(10)
    os.close(leader)
    return code, shown.decode("utf-8", "replace")


def test_set_list_and_remove_in_a_terminal() -> None:
    with ScriptedServer(Reply("Four."), api_key=KEY) as guarded:
        code, shown = in_a_terminal(["keys", "set", "work", "--kind", "compatible",
                                     "--url", guarded.url], typed=KEY)  # fmt: skip
        assert code == 0, shown
        assert KEY not in shown  # the prompt does not echo it
        assert "Connected work" in shown and "keys.json" in shown
        assert KEY not in config_path().read_text()
        assert load().get("work").base_url == guarded.url
        code, listed = in_a_terminal(["keys", "list"])
        assert code == 0 and "work" in listed and "key in the file" in listed
        assert KEY not in listed
        code, answered = in_a_terminal(["ask", "-n", "What is 2+2?"])
        assert code == 0 and "Four." in answered, answered
        assert guarded.chat_requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    code, removed = in_a_terminal(["keys", "remove", "work", "--endpoint"])
    assert code == 0 and "key forgotten" in removed
    assert load().get("work") is None
    code, listed = in_a_terminal(["keys", "list"])
    assert "No endpoint connected" in listed


def test_bad_input_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    code, shown = in_a_terminal(["keys", "set", "bad name"])
    assert code == 1 and "endpoint name 'bad name' is not usable" in shown
    code, shown = in_a_terminal(["keys", "set", "myazure", "--kind", "azure"])
    assert code == 1 and "needs its URL" in shown
    code, shown = in_a_terminal(["keys", "set", "openai"], typed="")
    assert code == 1 and "no key given" in shown
    assert not config_path().exists() or not load().endpoints


def test_a_key_from_a_pipe(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "nbchat", "keys", "set", "openai"],
                         input=KEY + "\n", capture_output=True, text=True, timeout=60)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert KEY not in ran.stdout + ran.stderr
    assert load().get("openai").base_url == "https://api.openai.com/v1"
