"""A fresh InteractiveShell with ``%chat`` loaded, for tests that run magics in-process.

``tests/conftest.py`` imports the fixtures, so tests ask for the
``ip``, ``run`` and ``server`` fixtures by name and call ``run(code)`` to get a
:class:`Ran`: the cell's result and what it printed.
"""

from __future__ import annotations

import atexit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.jupyter.magic.magics import load
from nbchat.testing import ScriptedServer


@dataclass
class Ran:
    result: Any
    out: str
    err: str

    @property
    def error(self) -> BaseException | None:
        return self.result.error_in_exec or self.result.error_before_exec


@pytest.fixture
def server(scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> ScriptedServer:
    monkeypatch.setenv("NBCHAT_BASE_URL", scripted_server.url)
    monkeypatch.setenv("NBCHAT_MODEL", "scripted-small")
    return scripted_server


@pytest.fixture
def ip(server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    load(shell)
    yield shell
    magics = shell.magics_manager.registry.get("ChatMagics")
    chat = magics.chats.current if magics is not None else None
    if chat is not None:
        chat.wait_for_titles(10)  # no title request left talking to a stopped server
    close_shell()


def close_shell() -> None:
    """Forget the current shell, leaving nothing of it for the interpreter's exit.

    Every InteractiveShell registers its ``atexit_operations``, which keep it alive and run
    a full ``gc.collect()`` each at exit: hundreds of test shells held pytest at 100% of a
    core for minutes after its summary. A kernel has one shell, and pays this once.
    """
    if InteractiveShell.initialized():
        atexit.unregister(InteractiveShell.instance().atexit_operations)
    InteractiveShell.clear_instance()


@pytest.fixture
def run(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]):
    def run(code: str) -> Ran:
        capsys.readouterr()
        result = ip.run_cell(code, store_history=True)  # as a terminal does
        captured = capsys.readouterr()
        return Ran(result, captured.out, captured.err)

    return run


def is_title_body(body: dict[str, Any]) -> bool:
    return body["messages"][0].get("content") == TITLE_PROMPT


def asked(server: ScriptedServer) -> list[Any]:
    """Chat requests other than title requests."""
    return [r for r in server.chat_requests if not is_title_body({"messages": r.messages})]
