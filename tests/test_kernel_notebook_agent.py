"""The notebook agent in real kernels: a proposal under nbclient, answered in a later cell,
and the page's answer over the ``nbchat.notebook`` comm, exactly once.

The kernel's notebook is a saved file its session names (``JPY_SESSION_NAME``),
as a Jupyter server sets it; no JupyterLab page holds it, so the changes go to
the file. The text a cell saves is what nbval compares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_helpers import kernel_env, run_notebook
from nbchat import Chat
from nbchat.testing import Reply

pytestmark = pytest.mark.kernel

SOURCE = "total = 0\nfor x in [1, 2, 3]:\n    total += x\nprint(total)\n"
PROPOSED = "total = sum([1, 2, 3])\nprint(total)\n"


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "work.ipynb"
    cell = {"id": "loop", "cell_type": "code", "metadata": {}, "source": SOURCE,
            "outputs": [], "execution_count": None}
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": [cell]}))  # fmt: skip
    return path


@pytest.fixture
def env(scripted_server, tmp_path, saved):
    return kernel_env(
        tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url, NBCHAT_MODEL="scripted-small",
        NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER="ana", JPY_SESSION_NAME=str(saved),
    )


def texts(cell) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                   for o in cell.outputs)  # fmt: skip


def test_under_nbclient_the_proposal_prints_as_a_diff_and_a_later_cell_answers(
    scripted_server, env, saved, tmp_path
):
    scripted_server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "loop", "source": PROPOSED,
                                         "why": "Shorter."})], when="shorter"),
        Reply("It is one line now.", after_tool="edit_cell"),
    )
    notebook = run_notebook(
        ["%load_ext nbchat", "%chat --agent make the loop shorter",
         "%chat --answer accept", "%chat --undo"],
        env, cwd=tmp_path,
    )
    _, asked, answered, undone = notebook.cells
    shown = texts(asked)
    assert "Edit cell `loop` (position 0)." in shown
    assert "      -for x in [1, 2, 3]:\n" in shown and "      +total = sum([1, 2, 3])\n" in shown
    assert "It is one line now." in texts(answered)
    assert "Turn 0's changes to the notebook were undone." in texts(undone)
    cell = json.loads(saved.read_text())["cells"][0]
    assert "".join(cell["source"]) == SOURCE  # undone: the cell as it was
    chat = Chat(base_url=scripted_server.url, store=env["NBCHAT_STORE"], user="ana")
    thread = chat.store.get(1)
    assert thread.turns[0].answered[0].answer["chunks"] == [1]
    assert thread.turns[-1].query == "Undo turn 0"


def test_two_answers_from_the_page_land_the_change_once(scripted_server, env, saved, tmp_path):
    scripted_server.script(
        Reply(tool_calls=[("insert_cell", {"source": "print('hi')\n", "why": "Greet.",
                                           "index": 0})], when="greet"),
        Reply("Added.", after_tool="insert_cell"),
    )
    answer = ("from nbchat.jupyter.notebook import _page_proposals as p\n"
              "from nbchat.jupyter.notebook._lab_bridge import _HOOKS\n"
              "call = p.waiting(__import__('nbchat.jupyter._loaded', fromlist=['x'])"
              ".chat_of(get_ipython()))[0]\n"
              "for _ in range(2):\n"
              "    for hook in _HOOKS['answer']:\n"
              "        hook({'thread': call['thread'], 'call_id': call['call_id'], "
              "'value': 'accept'})\n")
    run_notebook(["%load_ext nbchat", "%chat --agent greet me", answer], env, cwd=tmp_path)
    cells = json.loads(saved.read_text())["cells"]
    assert [c["source"] for c in cells] == ["print('hi')\n", SOURCE]
    assert cells[0]["metadata"]["nbchat"]["thread"] == 1

