"""Budgets in a real kernel: the line that stops a question, the yes, the cap that holds, and
what a kernel spent, which its restart keeps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernel_helpers import Kernel, kernel_env, module_kernel
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import asked

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as started:
        yield started


@pytest.fixture(scope="module")
def kernel(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with module_kernel(
        tmp_path_factory, server, "%load_ext nbchat\n%config ChatMagics.builtin_tools = False",
        NBCHAT_PRICES='{"scripted-small": [100, 400]}', NBCHAT_MAX_KERNEL_BUDGET="0.5",
        NBCHAT_HARD_BUDGET="1",
    ) as started:
        yield started


def test_over_budget_stops_with_one_line_then_the_flag_sends(kernel, server):
    server.script(Reply("Sent."))
    kernel.ok("%config ChatMagics.budget = 0.001")
    before = len(asked(server))
    stopped = kernel.run("%chat --max-tokens 5 Hello there", interactive=False)
    assert len(asked(server)) == before  # nothing was sent
    assert "Traceback" not in stopped.text()
    assert "would cost ≈ $" in stopped.text() and "--over-budget" in stopped.text()
    sent = kernel.ok("%chat --over-budget --max-tokens 5 Hello there", interactive=False)
    assert "Sent." in sent.text() and len(asked(server)) == before + 1


def test_the_administrators_hard_cap_cannot_be_lifted_from_the_notebook(kernel, server):
    kernel.ok("%config ChatMagics.budget = 1000.0\n%config ChatMagics.kernel_budget = 1000.0\n"
              "%config ChatMagics.prices = {'scripted-small': [0, 0]}\nimport os\n"
              "for name in ('NBCHAT_MAX_KERNEL_BUDGET', 'NBCHAT_HARD_BUDGET', 'NBCHAT_PRICES'):\n"
              "    os.environ.pop(name)")  # fmt: skip
    before = len(asked(server))
    run = kernel.run("%chat --over-budget --max-tokens 2000 Tell me everything",
                     interactive=False)  # fmt: skip
    assert "NBCHAT_MAX_KERNEL_BUDGET" in run.text() and "hard limit" in run.text()
    assert len(asked(server)) == before


def test_what_a_kernel_spent_survives_its_restart_and_a_new_kernel_starts_at_zero(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    server = scripted_server  # its own: the module's server answers "Sent." first
    env = kernel_env(tmp_path / "kernel", NBCHAT_BASE_URL=server.url, NBCHAT_USER="kim",
                     NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_MODEL="scripted-small",
                     NBCHAT_PRICES='{"scripted-small": [100, 400]}')  # fmt: skip
    setup = "%load_ext nbchat\n%config ChatMagics.builtin_tools = False"
    server.script(Reply("word " * 500))  # 500 tokens out: $0.20 spent
    with Kernel(env, cwd=tmp_path) as kernel:
        kernel.ok(setup)
        kernel.ok("%chat --max-tokens 5 Spend a little", interactive=False)
        kernel.restart()
        kernel.ok(f"{setup}\n%config ChatMagics.kernel_budget = 0.1")
        before = len(asked(server))
        refused = kernel.run("%chat --max-tokens 5 And again", interactive=False)
        assert "crosses your budget (ChatMagics.kernel_budget" in refused.text()
        assert "with $0.20 spent in this kernel" in refused.text()
        assert len(asked(server)) == before  # the restart did not forget what was spent
    with Kernel(env, cwd=tmp_path) as fresh:  # another kernel: its own spending, from $0
        fresh.ok(f"{setup}\n%config ChatMagics.kernel_budget = 0.1")
        fresh.ok("%chat --max-tokens 5 And again", interactive=False)
        assert len(asked(server)) == before + 1
