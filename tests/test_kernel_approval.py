"""The administrator's cap in a real kernel: code in the kernel cannot lift it.

The kernel starts with ``NBCHAT_MAX_APPROVAL=risky``. Cells then do what
model code reaching the shell could do (drop the variable, set the magics'
``approval`` to ``never-ask``), and the model asks to run ``os.system``: it
must wait for a yes, and nothing may run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_helpers import Kernel, kernel_env
from nbchat import Chat
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel

LIFT = """\
import os
os.environ.pop("NBCHAT_MAX_APPROVAL")
exit._ip.magics_manager.registry["ChatMagics"].approval = "never-ask"
"""
TOUCH = "os.system('touch planted')"


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


@pytest.fixture
def kernel(scripted_server: ScriptedServer, tmp_path: Path, cwd: Path) -> Iterator[Kernel]:
    env = kernel_env(
        tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url, NBCHAT_MODEL="scripted-small",
        NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER="ana", NBCHAT_MAX_APPROVAL="risky",
    )
    with Kernel(env, cwd=cwd) as started:
        started.ok("%load_ext nbchat\nimport os")
        yield started


@pytest.fixture
def store_chat(scripted_server: ScriptedServer, tmp_path: Path) -> Chat:
    return Chat(base_url=scripted_server.url, store=tmp_path / "store", user="ana")


def test_code_that_lifts_the_cap_cannot_open_it(kernel, scripted_server, store_chat, cwd):
    scripted_server.script(
        Reply(tool_calls=[("run_code", {"code": TOUCH})], when="plant", times=1),
        Reply("Done.", after_tool="run_code"),
    )
    kernel.ok(LIFT)  # as if the person had run it, or said yes to it
    setting = kernel.ok("print(exit._ip.magics_manager.registry['ChatMagics'].approval,"
                        " os.environ.get('NBCHAT_MAX_APPROVAL'))")
    assert setting.stdout == "never-ask None\n"

    asked = kernel.ok("%chat --agent plant a file", interactive=False)

    assert "run_code" in asked.text()
    assert [call.tool for call in store_chat.pending_calls()] == ["run_code"]
    assert not (cwd / "planted").exists()


def test_the_model_cannot_lift_the_cap_either(kernel, scripted_server, store_chat, cwd):
    scripted_server.script(
        Reply(tool_calls=[("run_code", {"code": LIFT.replace("import os\n", "")})],
              when="lift", times=1),
        Reply("Lifted.", after_tool="run_code"),
    )
    kernel.ok("%config ChatMagics.approval = 'risky'")

    kernel.ok("%chat --agent lift the cap", interactive=False)

    assert [call.tool for call in store_chat.pending_calls()] == ["run_code"]
    setting = kernel.ok("print(exit._ip.magics_manager.registry['ChatMagics'].approval,"
                        " os.environ.get('NBCHAT_MAX_APPROVAL'))")
    assert setting.stdout == "risky risky\n"
