"""A JupyterLab whose kernels host the scripted ACP agent, and what a test reads back.

`agents_lab` runs `agent_helpers.agent_server` (its store, user and token
folder under the test's folder) with `<JUPYTER_CONFIG_DIR>/nbchat/agents.json`
naming one agent, ``scripted``: ``python -m nbchat.testing.acp_agent`` playing
`script.json`, appending its pid and its children's to `pids`. Its agents work
in the notebooks' folder, so a file the agent writes lands in `lab.root_dir`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page

from agent_helpers import USER, agent_server
from nbchat.store.base import Thread
from nbchat.store.tinydb import ThreadStore

from .jupyterlab import JupyterLab, screenshot

PANEL = ".nbchat-panel"
SIDE = ".jupyterlab-sidecar .nbchat-panel"


@contextmanager
def agents_lab(base: Path, turns: list[dict[str, Any]]) -> Iterator[JupyterLab]:
    """A Jupyter server whose kernels may host ``scripted``, playing ``turns``."""
    script = base / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    config = base / "lab" / "config" / "nbchat"  # the server's JUPYTER_CONFIG_DIR
    config.mkdir(parents=True)
    entry = {"command": sys.executable, "args": ["-m", "nbchat.testing.acp_agent", str(script)],
             "env": {"SCRIPTED_ACP_PIDS": str(pids_file(base))}}
    (config / "agents.json").write_text(json.dumps({"agentServers": {"scripted": entry}}))
    # No administrator's agents.json of this machine's may cap the test's.
    env = {"NBCHAT_ACP_ADMIN_CONFIG": str(base / "no-admin-agents.json")}
    with agent_server(base, env=env) as lab:
        yield lab


def pids_file(base: Path) -> Path:
    return base / "pids"


def agent_pids(base: Path) -> set[int]:
    """The pids the scripted agents wrote: their own and their children's."""
    path = pids_file(base)
    return {int(p) for p in path.read_text().split()} if path.exists() else set()


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def store(base: Path) -> ThreadStore:
    """The server's thread store, as the kernels write it."""
    return ThreadStore(base / "store", USER)


def thread_asked(base: Path, question: str) -> Thread:
    """The stored thread in which ``question`` was asked first."""
    kept = store(base)
    for info in kept.threads():
        thread = kept.get(info.id)
        if thread.turns and thread.turns[0].query == question:
            return thread
    raise AssertionError(f"no thread asked {question!r}: {[t.title for t in kept.threads()]}")


def answers(thread: Thread) -> list[list[str]]:
    """The permission answers of each turn, as stored."""
    return [[a.answer for a in turn.answered if a.tool == "acp_permission"]
            for turn in thread.turns]  # fmt: skip


def wait_until(condition: Callable[[], object], what: str, page: Page,
               timeout: float = 30, shot: str = "agents-in-lab/timeout") -> float:  # fmt: skip
    """Poll ``condition`` every 0.25 s; the seconds it took (a screenshot if it never held)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            screenshot(page, shot)
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)
    return time.monotonic() - started


def text_of(locator: Locator) -> str:
    """The locator's shown text, '' while it is not there."""
    return locator.inner_text() if locator.count() else ""
