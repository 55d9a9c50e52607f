"""``%chat --with`` in real kernels: the agent's turn in the cell, its request answered once,
and its whole process tree gone with the kernel, shut down or killed."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from kernel_helpers import Kernel, kernel_env

pytestmark = pytest.mark.kernel

WRITE = [{"say": "Writing it. "}, {"write": {"path": "notes.txt", "content": "hello\n"}},
         {"say": "Done."}]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = kernel_env(tmp_path / "kernel", NBCHAT_STORE=str(tmp_path / "store"),
                     NBCHAT_USER="ana", NBCHAT_ACP_ADMIN_CONFIG=str(tmp_path / "none.json"))
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [
        {"when": "write", "steps": WRITE},
        {"when": "spawn", "steps": [{"spawn": 300}, {"say": "spawned"}]},
        {"when": "hostile", "steps": [{"say": "<img src=x onerror=alert(1)> \x1b[31mred"}]},
    ]}))
    folder = Path(env["JUPYTER_CONFIG_DIR"]) / "nbchat"
    folder.mkdir(parents=True)
    entry = {"command": sys.executable, "args": ["-m", "nbchat.testing.acp_agent", str(script)],
             "env": {"SCRIPTED_ACP_PIDS": str(tmp_path / "pids")}}
    (folder / "agents.json").write_text(json.dumps({"agentServers": {"scripted": entry}}))
    return env


def test_an_agent_answers_in_the_cell_and_its_write_waits_for_one_answer(env, tmp_path):
    with Kernel(env, cwd=tmp_path) as kernel:
        kernel.ok("%load_ext nbchat")
        asked = kernel.run("%chat --with scripted please write the notes", interactive=False)
        assert asked.status == "ok", asked.text()
        shown = asked.text()
        assert "Writing it." in shown and "scripted asks" in shown and "+hello" in shown
        assert not (tmp_path / "notes.txt").exists()
        kernel.ok("%chat --answer allow")
        assert (tmp_path / "notes.txt").read_text() == "hello\n"
        again = kernel.run("%chat --answer allow", interactive=False)
        assert "no" in again.text().lower() and again.status == "error"
        assert (tmp_path / "notes.txt").read_text() == "hello\n"
        listed = kernel.ok("%chat --list").text()
        assert "agent:scripted" in listed
        hostile = kernel.ok("%chat what about hostile text?", interactive=False)
        html = " ".join(o.get("data", {}).get("text/html", "") for o in hostile.outputs)
        assert "&lt;img src=x onerror=alert(1)&gt;" in html  # text, escaped in the HTML
        assert "<img" not in html


@pytest.mark.parametrize("how", ["shut down", "killed"])
def test_the_agents_tree_ends_with_the_kernel(env, tmp_path, how):
    kernel = Kernel(env, cwd=tmp_path).start()
    try:
        kernel.ok("%load_ext nbchat")
        kernel.ok("%chat --with scripted spawn a child", interactive=False)
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        if how == "killed":
            os.kill(kernel.manager.provisioner.process.pid, signal.SIGKILL)
    finally:
        kernel.shutdown()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.1)
    assert not [pid for pid in pids if _running(pid)]


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
