"""The panel's side area in real kernels: opened where JupyterLab's is, the cell elsewhere."""

from __future__ import annotations

import pytest

from kernel_helpers import Kernel, kernel_env
from nbchat.testing import Reply

pytestmark = pytest.mark.kernel

NOTE = "nbchat: the chat panel is open in JupyterLab's right side area."
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def env(scripted_server, tmp_path):
    return kernel_env(
        tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url, NBCHAT_MODEL="scripted-small",
        NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER="ana", VSCODE_PID=None,
    )


def test_the_side_panel_opens_once_per_kernel_and_shows_a_note_in_the_cell(env):
    with Kernel(env) as kernel:
        kernel.ok("%load_ext nbchat")
        first = kernel.ok("%chat --panel --side")
        again = kernel.ok(
            "import nbchat\np = nbchat.panel(side=True)\n"
            "print(p.area, p is nbchat.panel(side=True), type(p).__name__)"
        )
    assert [o["data"] for o in first.outputs] == [{"text/plain": NOTE}]
    assert again.stdout == "side True ChatPanel\n"


def test_outside_jupyterlab_the_panel_opens_in_the_cell_with_a_note(env):
    with Kernel({**env, "VSCODE_PID": "4242"}) as kernel:
        kernel.ok("%load_ext nbchat")
        run = kernel.ok("%chat --panel --side")
    assert run.stdout == (
        "nbchat: only JupyterLab has a side area; the panel is shown here instead.\n"
    )
    (shown,) = [o for o in run.outputs if o["output_type"] == "display_data"]
    assert WIDGET in shown["data"]


def test_a_panel_shows_what_a_cell_asked_as_soon_as_the_cell_is_done(env, scripted_server):
    scripted_server.script(Reply("Four.", when="2+2"))
    with Kernel(env) as kernel:
        kernel.ok("%load_ext nbchat\nfrom nbchat.jupyter.panel.widget import ChatPanel\n"
                  "p = ChatPanel()")
        kernel.ok("%chat What is 2+2?")
        shown = kernel.ok("print(p.thread_id, 'Four.' in p.conversation.text)")
    assert shown.stdout == "1 True\n"  # no poll, no refresh: the cell's end was enough
