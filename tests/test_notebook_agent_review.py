"""Reviewing the notebook agent's work: a plan approved before any edit, chunks chosen in the
prompt widget, and *Undo this turn* below the turn and in the panel's footer.

A shell with a saved notebook the session names (the ``nb`` fixture) and the
scripted server; the widgets are driven as a click drives them.
"""

from __future__ import annotations

from typing import Any

from nbchat.jupyter.panel import _intents
from nbchat.testing import Reply
from notebook_helpers import THREE, saved, source
from shell_helpers import asked

CHANGED = ("import pandas as pd\nimport numpy as np\nA = 1\n"
           "df = pd.read_csv('sales.csv', parse_dates=['date'])\nB = 2\ndf.head()\n")
CHANGES = {"insert_cell", "edit_cell", "delete_cell", "move_cell", "execute_cell", "run_code"}
PLAN = {"steps": ["Load sales.csv", "Plot monthly revenue"], "why": "A small analysis."}


def offered(request: Any) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


def told(server: Any) -> str:
    return asked(server)[-1].messages[-1]["content"]


def magics_of(ip: Any) -> Any:
    return ip.magics_manager.registry["ChatMagics"]


def prompts_for(ip: Any, thread: int = 1) -> Any:
    from nbchat.jupyter.cell.prompts import show_tool_prompts

    chat = magics_of(ip).notebook_chat()
    return show_tool_prompts(chat, chat.pending_calls(thread))


# -- the plan mode ---------------------------------------------------------------------------


def test_plan_mode_offers_propose_plan_and_no_change_until_it_is_approved(run, nb, server):
    server.script(
        Reply(tool_calls=[("propose_plan", PLAN)], when="plan my"),
        Reply(tool_calls=[("insert_cell", {"source": "df = load()\n", "why": "Step 1."})],
              after_tool="propose_plan"),
        Reply("Step 1 proposed.", after_tool="insert_cell"),
    )
    ran = run("%chat --mode plan plan my analysis")
    assert ran.error is None, ran.err
    first = offered(asked(server)[0])
    assert "propose_plan" in first and "read_cells" in first and not CHANGES & first
    assert "1. Load sales.csv\n" in ran.out and "2. Plot monthly revenue" in ran.out
    assert saved(nb)[0]["source"] == THREE  # nothing changes in the plan mode
    ran = run("%chat --answer approve")
    assert ran.error is None, ran.err
    approved = [r for r in asked(server) if "propose_plan" in str(r.messages[-1])][-1]
    assert "The person approved the plan:\n1. Load sales.csv\n2. Plot monthly revenue" in \
        approved.messages[-1]["content"]
    after = offered(approved)
    assert {"insert_cell", "edit_cell", "execute_cell"} <= after and "propose_plan" not in after
    assert "Insert a new code cell" in ran.out  # the approved plan's first change still asks
    assert len(saved(nb)) == 2


def test_an_approved_plan_leaves_the_thread_in_ask_mode(ip, nb, server):
    server.script(Reply("Approved; starting.", after_tool="propose_plan"),
                  Reply(tool_calls=[("propose_plan", PLAN)], when="plan"))  # fmt: skip
    ip.run_cell("%chat --mode plan plan it")
    store = magics_of(ip).chat.store
    assert store.get(1).settings["mode"] == "plan"
    ip.run_cell("%chat --answer yes")
    assert store.get(1).settings["mode"] == "ask"


def test_a_rejected_plan_keeps_the_plan_mode_and_gives_the_model_the_reason(run, nb, server):
    server.script(
        Reply("I will plan again.", after_tool="propose_plan"),
        Reply(tool_calls=[("propose_plan", PLAN)], when="plan"),
    )
    run("%chat --mode plan plan it")
    ran = run("%chat --answer reject: plot weekly, not monthly")
    assert ran.error is None and "I will plan again." in ran.out
    result = told(server)
    assert "rejected the plan; the thread stays in the plan mode" in result
    assert "Their reason: plot weekly, not monthly" in result
    assert not CHANGES & offered(asked(server)[-1])
    assert "propose_plan" in offered(asked(server)[-1])


def test_a_plan_edited_in_the_answer_is_the_one_approved(run, nb, server):
    server.script(Reply("On it.", after_tool="propose_plan"),
                  Reply(tool_calls=[("propose_plan", PLAN)], when="plan"))  # fmt: skip
    run("%chat --mode plan plan it")
    ran = run("%chat --answer approve: 1. Load sales.csv only")
    assert ran.error is None, ran.err
    result = told(server)
    assert "approved the plan as they edited it:\n1. Load sales.csv only\n" in result
    assert "Plot monthly revenue" not in result


def test_a_wrong_answer_to_a_plan_says_how_to_answer_and_keeps_it_waiting(run, ip, nb, server):
    server.script(Reply(tool_calls=[("propose_plan", PLAN)], when="plan"))
    run("%chat --mode plan plan it")
    ran = run("%chat --answer maybe later")
    assert "is not an answer to a plan; answer approve" in ran.err + ran.out
    assert "Traceback" not in ran.err + ran.out
    assert [c.tool for c in magics_of(ip).notebook_chat().pending_calls(1)] == ["propose_plan"]


def test_the_plan_prompt_widget_approves_an_edited_plan(ip, nb, server):
    server.script(Reply("Following your plan.", after_tool="propose_plan"),
                  Reply(tool_calls=[("propose_plan", PLAN)], when="plan"))  # fmt: skip
    ip.run_cell("%chat --mode plan plan it")
    (prompt,) = prompts_for(ip).prompts
    names = [b.description for b in prompt.buttons]
    assert names == ["Approve", "Edit", "Reject", "Approve edited"]
    assert prompt.editor.layout.display == "none"
    prompt.buttons[1].click()  # Edit
    assert prompt.editor.layout.display == "" and prompt.editor.value.startswith("1. Load")
    prompt.editor.value = "1. Load sales.csv\n2. Plot weekly revenue"
    prompt.run_edited.click()
    assert prompt.is_answered and "approved the edited plan" in repr(prompt)
    assert "2. Plot weekly revenue" in told(server)
    assert magics_of(ip).chat.store.get(1).settings["mode"] == "ask"


def test_without_a_thread_the_tools_themselves_leave_the_plan_mode():
    from IPython.core.interactiveshell import InteractiveShell

    from nbchat.base.records import PendingCall, Prompt
    from nbchat.jupyter.notebook.tools import notebook_tools

    tools = {t.name: t for t in notebook_tools(InteractiveShell.instance(), mode=lambda: "plan")}
    assert tools["propose_plan"].is_offered() and not tools["edit_cell"].is_offered()
    plan = tools["propose_plan"]
    call = PendingCall(thread_id=0, turn=0, call_id="c", tool="propose_plan",
                       arguments=PLAN, prompt=Prompt.from_dict(plan.prompt(PLAN)))
    plan.get_tool_output(PLAN, plan.parse_answer(call, "approve"))
    assert tools["edit_cell"].is_offered() and not plan.is_offered()


# -- chunks in the prompt widget --------------------------------------------------------------


def test_the_prompt_widget_lands_exactly_the_chunks_left_on(ip, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c0", "source": CHANGED,
                                         "why": "Tidy."})], when="tidy"),
        Reply("Tidied.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent tidy the first cell")
    (prompt,) = prompts_for(ip).prompts
    assert [t.description for t in prompt.chunk_toggles] == ["chunk 1", "chunk 2", "chunk 3"]
    assert all(t.value for t in prompt.chunk_toggles)
    for toggle in (prompt.chunk_toggles[0], prompt.chunk_toggles[2]):
        toggle.value = False
    assert prompt.chunk_toggles[0].icon == ""
    prompt.buttons[0].click()  # Accept: the chunks still on
    assert prompt.is_answered and "accepted chunk 2" in repr(prompt)
    assert source(nb, "c0") == THREE.replace("'sales.csv'", "'sales.csv', parse_dates=['date']")
    assert "accepted chunk 2 of 3 and rejected 1, 3" in told(server)
    assert all(t.disabled for t in prompt.chunk_toggles)


def test_accept_with_no_chunk_on_says_so_and_lands_nothing(ip, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c0", "source": CHANGED,
                                         "why": "Tidy."})], when="tidy"),
        Reply("Tidied.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent tidy the first cell")
    (prompt,) = prompts_for(ip).prompts
    for toggle in prompt.chunk_toggles:
        toggle.value = False
    prompt.buttons[0].click()
    assert "no chunk is chosen" in prompt.error and not prompt.is_answered
    assert source(nb, "c0") == THREE
    prompt.reason_box.value = "not now"
    prompt.buttons[1].click()  # Reject, with the reason typed
    assert prompt.is_answered and source(nb, "c0") == THREE
    assert "Their reason: not now" in told(server)


def test_every_chunk_left_on_accepts_the_whole_edit(ip, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c0", "source": CHANGED,
                                         "why": "Tidy."})], when="tidy"),
        Reply("Tidied.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent tidy the first cell")
    (prompt,) = prompts_for(ip).prompts
    prompt.buttons[0].click()
    assert source(nb, "c0") == CHANGED and repr(prompt).endswith("→ accepted")


def test_a_one_chunk_proposal_keeps_plain_accept_and_reject(ip, nb, server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2\n", "why": "2."})],
              when="two"),
        Reply("Two.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent make it two")
    (prompt,) = prompts_for(ip).prompts
    assert prompt.chunk_toggles == () and [b.description for b in prompt.buttons] == \
        ["Accept", "Reject"]
    prompt.submit("reject")


# -- undo below the turn, and in the panel ---------------------------------------------------


def test_undo_below_a_resumed_turn_puts_its_cells_back(ip, nb, server):
    from nbchat.jupyter.notebook._undo_view import UndoButton

    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2\n", "why": "2."})],
              when="two"),
        Reply("Two.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent make it two")
    group = prompts_for(ip)
    assert not [w for w in group.followups.children if isinstance(w, UndoButton)]
    group.prompts[0].submit("accept")
    assert source(nb, "c1") == "x = 2\n"
    (undo,) = [w for w in group.followups.children if isinstance(w, UndoButton)]
    assert undo.turn == 0 and undo.button.description == "Undo this turn"
    undo.button.click()
    assert source(nb, "c1") == "x = 1\n"
    assert undo.button.disabled and "Turn 0&#x27;s changes to the notebook were undone" in \
        undo.status.value and repr(undo).startswith("Turn 0's changes")
    assert "Undo turn 0" in [t.query for t in magics_of(ip).chat.store.get(1).turns][-1]


def test_undo_below_a_turn_that_changed_nothing_is_not_offered(ip, nb, server):
    from nbchat.jupyter.notebook._undo_view import UndoButton

    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 2\n", "why": "2."})],
              when="two"),
        Reply("Kept.", after_tool="edit_cell"),
    )
    ip.run_cell("%chat --agent make it two")
    group = prompts_for(ip)
    group.prompts[0].submit("reject")
    assert not [w for w in group.followups.children if isinstance(w, UndoButton)]


def test_the_panel_footer_offers_undo_for_a_turn_that_changed_cells(ip, nb, server):
    from nbchat.jupyter.panel.widget import ChatPanel

    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": "x = 4\n", "why": "4."})],
              when="four"),
        Reply("Four.", after_tool="edit_cell"),
        Reply("Just words.", when="hello"),
    )
    magics = magics_of(ip)
    panel = ChatPanel(chat=magics.chat, background=False)
    panel.mode = "ask"
    panel.value = "make it four"
    panel.submit()
    ((prompt,),) = [group.prompts for group in panel.prompts]
    assert [m["undo"] for m in panel.messages] == [None]  # waiting: nothing landed yet
    prompt.submit("accept")
    assert source(nb, "c1") == "x = 4\n"
    panel.value = "hello"
    panel.submit()
    assert [m["undo"] for m in panel.messages] == [0, None]
    _intents.handle(panel, {"event": "undo", "value": 0})  # the footer's button
    assert source(nb, "c1") == "x = 1\n"
    assert "Turn 0's changes to the notebook were undone" in panel.status
    assert [m["undo"] for m in panel.messages][:2] == [None, None]
    _intents.handle(panel, {"event": "undo", "value": 0})
    assert "is undone already" in panel.status
    _intents.handle(panel, {"event": "undo", "value": True})  # not a turn: ignored
    _intents.handle(panel, {"event": "undo", "value": "0"})


def test_the_panel_leaves_the_plan_mode_once_its_plan_is_approved(ip, nb, server):
    from nbchat.jupyter.panel.widget import ChatPanel

    server.script(Reply("Starting.", after_tool="propose_plan"),
                  Reply(tool_calls=[("propose_plan", PLAN)], when="plan"))  # fmt: skip
    panel = ChatPanel(chat=magics_of(ip).chat, background=False)
    panel.mode = "plan"
    panel.value = "plan it"
    panel.submit()
    ((prompt,),) = [group.prompts for group in panel.prompts]
    prompt.buttons[0].click()  # Approve
    assert prompt.is_answered and panel.mode == "ask"
    assert "Starting." in panel.messages[-1]["html"]
    assert "→ <strong>approved</strong>" in panel.messages[-1]["html"]


# -- --fix as a proposal, --explain ------------------------------------------------------------

FAILING = 'sales = {"revenue": 10}\nsales["revenu"]\n'


def test_fix_proposes_the_corrected_cell_where_the_notebook_holds_it(run, nb, server):
    from notebook_helpers import notebook

    notebook(nb, THREE, FAILING)
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "why": "The key is revenue.",
                                         "source": FAILING.replace("revenu\"", "revenue\"")})],
              when="Fix cell c1"),
        Reply("Fixed the key.", after_tool="edit_cell"),
    )
    assert run(FAILING).result.error_in_exec is not None  # the KeyError, as the cell raised it
    ran = run("%chat --fix --agent")
    assert ran.error is None, ran.err
    sent = asked(server)[0]
    assert "Propose the corrected cell with edit_cell (cell_id 'c1')" in \
        sent.messages[-1]["content"]
    assert "KeyError" in str(sent.messages) and "edit_cell" in offered(sent)
    assert '      +sales["revenue"]\n' in ran.out  # the proposal, as a diff
    assert source(nb, "c1") == FAILING  # nothing lands without a yes
    assert run("%chat --answer accept").error is None
    assert source(nb, "c1") == 'sales = {"revenue": 10}\nsales["revenue"]\n'


def test_fix_without_the_agent_puts_the_code_below_as_before(run, nb, server):
    from notebook_helpers import notebook

    notebook(nb, THREE, FAILING)  # the notebook holds the cell, but the agent is off
    server.script(Reply("```python\nprint('fixed')\n```", when="Why does this fail"))
    run(FAILING)
    ran = run("%chat --fix")
    assert ran.error is None and "fixed" in ran.out
    assert "edit_cell" not in offered(asked(server)[0]) and source(nb, "c1") == FAILING


def test_fix_of_a_cell_no_notebook_holds_puts_the_code_below_as_before(run, nb, server):
    server.script(Reply("```python\nprint('fixed')\n```", when="Why does this fail"))
    run("1 / 0")
    ran = run("%chat --fix --agent")
    assert ran.error is None and "fixed" in ran.out
    assert "Fix cell" not in asked(server)[0].messages[-1]["content"]  # the code question


def test_explain_is_the_error_question(run, server):
    server.script(Reply("Division by zero.", when="got the error below"))
    run("1 / 0")
    ran = run("%chat --explain")
    assert ran.error is None and "Division by zero." in ran.out
    assert "ZeroDivisionError" in asked(server)[0].messages[-1]["content"]


def test_a_plans_hidden_characters_are_marked_where_it_is_drawn():
    from nbchat.context.plan import ProposePlan

    prompt = ProposePlan(lambda: "plan").prompt({"steps": ["Name it abc\u202edcba\u200b"]})
    assert "\u202e" not in prompt["markdown"] and "\\u202e" in prompt["markdown"]
    assert "\u200b" not in prompt["markdown"]
