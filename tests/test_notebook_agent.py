"""The notebook agent in a shell with a saved notebook and no page: proposals, answers, undo.

The notebook is the saved file the session names (``JPY_SESSION_NAME``), as in
a kernel a Jupyter server started with no JupyterLab page holding it. The
proposals print as unified diffs; ``%chat --answer`` answers them.
"""

from __future__ import annotations

import json
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from nbchat.jupyter.magic.magics import load
from nbchat.testing import Reply
from notebook_helpers import THREE, notebook, saved, source
from shell_helpers import asked, close_shell

CHANGED = ("import pandas as pd\nimport numpy as np\nA = 1\n"
           "df = pd.read_csv('sales.csv', parse_dates=['date'])\nB = 2\ndf.head()\n")


def last_tool_result(server: Any) -> str:
    return asked(server)[-1].messages[-1]["content"]


def test_the_model_reads_the_notebook_with_the_tools_outside_agents_have(run, nb, server):
    server.script(
        Reply(tool_calls=[("read_cells", {})], when="what is in"),
        Reply("Two cells.", after_tool="read_cells"),
    )
    ran = run("%chat --agent what is in my notebook?")
    assert ran.error is None and "Two cells." in ran.out
    offered = [t["function"]["name"] for t in asked(server)[0].body["tools"]]
    assert offered[-11:] == ["read_cells", "list_variables", "describe_variable", "read_cell",
                       "last_error", "insert_cell", "edit_cell", "delete_cell", "move_cell",
                       "execute_cell", "run_code"]  # fmt: skip
    read = last_tool_result(server)
    assert "2 cells in the saved notebook analysis.ipynb." in read
    assert "c0" in read and "pd.read_csv('sales.csv')" in read


def test_an_edit_is_a_diff_and_accepting_one_chunk_lands_exactly_that_chunk(run, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c0", "source": CHANGED,
                                         "why": "Show the head."})], when="tidy"),
        Reply("Done.", after_tool="edit_cell"),
    )
    ran = run("%chat --agent tidy the first cell")
    assert ran.error is None
    first = "      @@ -1,2 +1,3 @@ chunk 1\n       import pandas as pd\n      +import numpy as np\n"
    assert first in ran.out
    assert "chunk 3" in ran.out and "      -print(df)\n      +df.head()\n" in ran.out
    assert source(nb, "c0") == THREE  # nothing lands before the answer
    ran = run("%chat --answer accept 2")
    assert ran.error is None and "Done." in ran.out
    assert source(nb, "c0") == THREE.replace("'sales.csv'", "'sales.csv', parse_dates=['date']")
    told = last_tool_result(server)
    assert "accepted chunk 2 of 3 and rejected 1, 3" in told
    meta = next(c for c in saved(nb) if c["id"] == "c0")["metadata"]["nbchat"]
    assert meta["thread"] == 1 and meta["turn"] == 0 and meta["call"]


def test_reject_leaves_the_cell_byte_for_byte(run, nb, server):
    before = nb.read_bytes()
    server.script(
        Reply(tool_calls=[("delete_cell", {"cell_id": "c1", "why": "Unused."})], when="clean"),
        Reply("Kept it.", after_tool="delete_cell"),
    )
    run("%chat --agent clean up")
    ran = run("%chat --answer reject: I need it")
    assert ran.error is None and "Kept it." in ran.out
    assert nb.read_bytes() == before
    assert "rejected this delete_cell; nothing was changed. Their reason: I need it" in \
        last_tool_result(server)


def test_a_proposal_on_a_cell_changed_since_is_shown_again_on_its_new_text(run, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2\n",
                                         "why": "Two."})], when="two"),
        Reply("Now two.", after_tool="edit_cell"),
    )
    run("%chat --agent make x two")
    data = json.loads(nb.read_text())
    data["cells"][1]["source"] = "x = 1  # mine\n"
    nb.write_text(json.dumps(data))
    ran = run("%chat --answer accept")
    assert "changed since this change was proposed; nothing was changed" in ran.err + ran.out
    assert source(nb, "c1") == "x = 1  # mine\n"
    assert "      -x = 1  # mine\n      +x = 2\n" in ran.err  # the proposal, on the new text
    ran = run("%chat --answer accept")
    assert ran.error is None and source(nb, "c1") == "x = 2\n"


def test_insert_and_undo_put_the_notebook_back(run, nb, server):
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": "df.plot()\n", "why": "Plot.", "index": 1}),
                          ("edit_cell", {"cell_id": "c1", "source": "x = 3\n", "why": "3."}),
                          ("move_cell", {"cell_id": "c0", "index": 2, "why": "Later."})],
              when="plot"),
        Reply("Plotted.", after_tool="move_cell"),
        Reply("Plotted.", after_tool="edit_cell"),
        Reply("Plotted.", after_tool="insert_cell"),
    )
    original = [(c["id"], c["source"]) for c in saved(nb)]
    run("%chat --agent plot it")
    ran = run("%chat --answer accept")  # every waiting proposal of the turn
    assert ran.error is None, ran.err
    assert [c["source"] for c in saved(nb)] == ["df.plot()\n", "x = 3\n", THREE]
    ran = run("%chat --undo")
    assert ran.error is None and "Turn 0's changes to the notebook were undone." in ran.out
    assert [(c["id"], c["source"]) for c in saved(nb)] == original
    ran = run("%chat --undo 0")
    assert "is undone already" in ran.err + ran.out
    assert "Undo turn 0" in run("%chat --show").out


def test_undo_keeps_a_cell_changed_since_unless_forced(run, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 5\n", "why": "5."})],
              when="five"),
        Reply("Five.", after_tool="edit_cell"),
    )
    run("%chat --agent make it five")
    run("%chat --answer accept")
    data = json.loads(nb.read_text())
    data["cells"][1]["source"] = "x = 6\n"
    nb.write_text(json.dumps(data))
    ran = run("%chat --undo")
    assert "Kept as they are: c1 (you changed it since" in ran.out
    assert source(nb, "c1") == "x = 6\n"


def test_plan_mode_offers_no_tool_that_changes_the_notebook(run, nb, server):
    server.script(Reply("1. Load\n2. Plot", when="plan"))
    ran = run("%chat --mode plan plan my analysis")
    assert ran.error is None and "plan mode" in ran.out
    offered = [t["function"]["name"] for t in asked(server)[-1].body["tools"]]
    assert "read_cells" in offered and "last_error" in offered
    assert not {"insert_cell", "edit_cell", "delete_cell", "move_cell",
                "execute_cell", "run_code"} & set(offered)  # fmt: skip
    server.script(Reply(tool_calls=[("insert_cell", {"source": "1", "why": "Step 1."})],
                        when="go ahead"), Reply("Done.", after_tool="insert_cell"))  # fmt: skip
    ran = run("%chat --mode ask Go ahead with steps 1 and 2")  # approving the plan
    assert ran.error is None and "Insert a new code cell" in ran.out


def test_accept_edits_lands_changes_and_still_asks_to_run(run, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 9\n", "why": "9."}),
                          ("execute_cell", {"cell_id": "c1", "why": "Run it."})], when="nine"),
        Reply("Nine.", after_tool="execute_cell"),
    )
    ran = run("%chat --mode accept-edits make it nine")
    assert ran.error is None
    assert source(nb, "c1") == "x = 9\n"  # landed without asking
    assert "Run cell `c1`" in ran.out  # the run waits
    ran = run("%chat --answer run")
    assert ran.error is None and "Nine." in ran.out


def test_the_administrators_cap_turns_accept_edits_into_ask(run, nb, server, monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "always")
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 9\n", "why": "9."})],
              when="nine"),
        Reply("Nine.", after_tool="edit_cell"),
    )
    ran = run("%chat --mode accept-edits make it nine")
    assert "it acts as ask" in ran.out
    assert source(nb, "c1") == "x = 1\n"  # it asks


def test_without_a_notebook_the_tool_says_it_cannot_edit(run, server, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": "1", "why": "One."})], when="add"),
        Reply("I cannot.", after_tool="insert_cell"),
    )
    ran = run("%chat --agent add a cell")
    assert ran.error is None and "I cannot." in ran.out
    told = last_tool_result(server)
    assert "no notebook to edit" in told and "nothing was queued" in told


def test_hidden_characters_are_escaped_in_the_diff(run, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = '\u202e1'\u200b\n",
                                         "why": "Odd."})], when="odd"),
    )
    ran = run("%chat --agent make it odd")
    assert "      +x = '\\u202e1'\\u200b\n" in ran.out
    assert "\u202e" not in ran.out and "\u200b" not in ran.out


def test_a_restart_between_proposal_and_answer_loses_nothing(run, ip, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 7\n", "why": "7."})],
              when="seven"),
        Reply("Seven.", after_tool="edit_cell"),
    )
    assert run("%chat --agent make it seven").error is None
    ip.magics_manager.registry["ChatMagics"].chats.plain().wait_for_titles(10)
    close_shell()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    fresh = InteractiveShell.instance(config=config)
    load(fresh)
    result = fresh.run_cell("%chat -t 1 --answer accept", store_history=True)
    assert result.error_in_exec is None and source(nb, "c1") == "x = 7\n"
    again = fresh.run_cell("%chat -t 1 --answer accept", store_history=True)
    assert again.error_in_exec is not None and source(nb, "c1") == "x = 7\n"  # answered once


def test_a_stale_proposal_in_its_prompt_widget_is_drawn_again_on_the_new_text(ip, nb, server):
    from nbchat.jupyter.cell.prompts import pending_prompts, show_tool_prompts

    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2\n",
                                         "why": "Two."})], when="two"),
        Reply("Now two.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent make x two")
    chat = ip.magics_manager.registry["ChatMagics"].notebook_chat()
    show_tool_prompts(chat, chat.pending_calls(1))
    (prompt,) = pending_prompts(1)
    data = json.loads(nb.read_text())
    data["cells"][1]["source"] = "x = 1  # mine\n"
    nb.write_text(json.dumps(data))
    prompt.submit("accept")
    assert "changed since this change was proposed" in prompt.error
    assert prompt.call.prompt.extra["base"] == "x = 1  # mine\n"
    assert not prompt.is_answered and source(nb, "c1") == "x = 1  # mine\n"
    prompt.submit("reject")  # no prompt left waiting in this process for other tests


def test_a_notebook_named_outright_is_the_one_changed(run, tmp_path, server, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    other = tmp_path / "other.ipynb"
    notebook(other, "a = 1\n")
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": "b = 2\n", "why": "B."})], when="add b"),
        Reply("Added.", after_tool="insert_cell"),
    )
    run("%config ChatMagics.notebook = 'other.ipynb'")
    run("%chat --agent add b")
    assert run("%chat --answer accept").error is None
    assert [c["source"] for c in saved(other)] == ["a = 1\n", "b = 2\n"]


def test_the_panel_asks_in_the_mode_picked_and_its_prompt_lands_the_change(ip, nb, server):
    from nbchat.jupyter.panel.widget import ChatPanel

    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 4\n", "why": "4."})],
              when="four"),
        Reply("Four.", after_tool="edit_cell"),
        Reply("Plain."),
    )
    magics = ip.magics_manager.registry["ChatMagics"]
    panel = ChatPanel(chat=magics.chat, background=False)
    panel.mode = "ask"
    panel.value = "make it four"
    panel.submit()
    offered = [t["function"]["name"] for t in asked(server)[-1].body["tools"]]
    assert "edit_cell" in offered
    ((prompt,),) = [group.prompts for group in panel.prompts]
    assert source(nb, "c1") == "x = 1\n"
    prompt.submit("accept")
    assert source(nb, "c1") == "x = 4\n"
    thread = magics.chat.store.get(panel.thread_id)
    assert thread.settings["mode"] == "ask"
    panel.mode = "plan"
    panel.value = "what next?"
    panel.submit()
    offered = [t["function"]["name"] for t in asked(server)[-1].body["tools"]]
    assert "read_cells" in offered and "edit_cell" not in offered and "run_code" not in offered
    panel.mode = "chat"
    panel.value = "just chat"
    panel.submit()
    assert "read_cells" not in [t["function"]["name"]
                                for t in asked(server)[-1].body.get("tools", [])]
