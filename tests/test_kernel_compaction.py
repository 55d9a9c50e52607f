"""Compaction through the magic in a real kernel: --compact, the note, --show, --preview."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernel_helpers import Kernel, module_kernel
from nbchat.engine._compaction import SUMMARY_REQUEST
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import asked

pytestmark = pytest.mark.kernel

SUMMARY = "They counted to two hundred."


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(context_size=2000) as started:
        started.script(Reply(SUMMARY, when=SUMMARY_REQUEST), Reply("Noted."))
        yield started


@pytest.fixture(scope="module")
def kernel(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    setup = "%load_ext nbchat\n%config ChatMagics.builtin_tools = False\n%chat -n Start"
    with module_kernel(tmp_path_factory, server, setup) as started:
        started.ok("magics = get_ipython().magics_manager.registry['ChatMagics']\n"
                   "for n in range(200):\n"
                   "    magics.chat.append_response(magics.thread_id, f'Count {n} please.', "
                   "f'Counted {n}. ' + 'Yes. ' * 5)")  # fmt: skip
        yield started


def summaries(server: ScriptedServer) -> int:
    return sum(r.messages[-1].get("content") == SUMMARY_REQUEST for r in asked(server))


def test_compact_then_ask_sends_the_summary_and_show_keeps_every_turn(kernel, server):
    kernel.ok("%chat --window summarize")
    compact = kernel.ok("%chat --compact", interactive=False)
    assert "go as a summary" in compact.text() and summaries(server) >= 1
    made = summaries(server)
    preview = kernel.ok("%chat --preview And now?", interactive=False)
    assert "summary of earlier turns" in preview.text() and "a summary stands for" in (
        preview.text())  # fmt: skip
    answer = kernel.ok("%chat And now?", interactive=False)
    assert "Noted." in answer.text() and "sent as a summary" in answer.text()
    assert summaries(server) == made
    shown = kernel.ok("%chat --show", interactive=False).text()
    assert all(f"Count {n} please." in shown for n in (0, 1, 100, 199))
    assert "sent in their place" in shown and SUMMARY in shown
