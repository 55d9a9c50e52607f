"""``%chat`` with notebook context in a fresh InteractiveShell: what reaches the server."""

from __future__ import annotations

from typing import Any

import matplotlib
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

from markup_helpers import body
from nbchat.context import CONTEXT_NOTE
from nbchat.jupyter.magic.magics import load
from nbchat.testing import Reply
from shell_helpers import asked, close_shell
from wire_helpers import content_parts

matplotlib.use("Agg")


def parts(request: Any) -> list[dict[str, Any]]:
    return content_parts(request.messages[-1]["content"])


def test_a_mention_attaches_the_object_apart_from_the_question(run, server):
    run("import pandas as pd\ndf = pd.DataFrame({'price': [1.0, None, 3.0]})")
    ran = run("%chat Which columns of @df have nulls, and what is {df.shape}?")
    assert ran.error is None
    assert ran.out.splitlines()[0] == "context: df (DataFrame 3×1)"
    sent = parts(asked(server)[-1])
    assert sent[0] == {
        "type": "text",
        "text": "Which columns of @df have nulls, and what is (3, 1)?",
    }
    assert sent[1] == {"type": "text", "text": CONTEXT_NOTE}
    assert sent[2]["text"].startswith('<context name="df" kind="DataFrame 3×1">\npandas DataFrame')
    assert "  price: float64, 1 null" in sent[2]["text"]
    assert len(sent) == 3


def test_unknown_mentions_are_one_note_and_the_question_goes_as_typed(run, server):
    ran = run("%chat What about @nothing_here and ana@example.com?")
    assert ran.error is None
    # A note, not an error: nothing on stderr, which Jupyter paints red.
    assert ran.err == ""
    assert ran.out.splitlines()[0] == "nbchat: not defined here, no context attached: @nothing_here"
    assert asked(server)[-1].messages[-1]["content"] == (
        "What about @nothing_here and ana@example.com?"
    )


def test_the_context_budget_bounds_each_description(run, server):
    run("import pandas as pd\nvalues = pd.DataFrame({f'col{i}': [i] for i in range(30)})")
    run("%chat --context-budget 20 Summarise @values")
    text = parts(asked(server)[-1])[2]["text"]
    assert text.endswith("to fit 20 tokens)\n</context>")
    ran = run("%chat --context-budget 0 Summarise @values")
    assert type(ran.error) is UsageError
    assert str(ran.error) == "--context-budget is a number of tokens above 0, got 0"


def test_figure_attaches_the_last_figure_as_an_image(run, server):
    ran = run("%chat --figure What does it show?")
    assert str(ran.error) == "no figure to attach: draw one first (matplotlib), then --figure"
    run(
        "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 3, 2])\n"
        "ax.set_title('Sales')"
    )
    ran = run("%chat --figure What does it show?")
    assert ran.out.splitlines()[0] == "context: figure (Figure 1 axes)"
    request = asked(server)[-1]
    assert len(request.images) == 1 and request.images[0].startswith(b"\x89PNG")
    assert [p["type"] for p in parts(request)] == ["text", "text", "text", "image_url"]
    assert "title 'Sales'" in parts(request)[2]["text"]


def test_fix_sends_the_error_and_its_cell_and_puts_the_code_below(run, ip, server):
    server.script(Reply("Use .get:\n\n```python\nprices.get('eur', 0)\n```\n", when="fix it"))
    ran = run("%chat --fix")
    assert (
        str(ran.error) == "no exception in this session yet; run the failing cell, then %chat --fix"
    )
    run("prices = {'usd': 1}")
    run("prices['eur']")
    ran = run("%chat --fix")
    assert ran.error is None
    assert ran.out.splitlines()[0] == "context: last_error (KeyError)"
    sent = parts(asked(server)[-1])
    assert sent[0]["text"] == (
        "Why does this fail, and how do I fix it?\n\n"
        "Give the whole corrected cell as one ```python code block."
    )
    assert "the cell that raised it (In[3]):\n```python\nprices['eur']\n```" in sent[2]["text"]
    assert ip.rl_next_input == "prices.get('eur', 0)"


def test_agent_runs_code_only_after_the_answer_and_the_model_reads_it(run, ip, server):
    server.script(
        Reply(tool_calls=[("run_code", {"code": "total = sum(xs)\ntotal"})], when="sum"),
        Reply("The sum is 6.", after_tool="run_code"),
    )
    run("xs = [1, 2, 3]")
    ran = run("%chat --agent What is the sum of xs?")
    assert ran.error is None and "total" not in ip.user_ns
    offered = [t["function"]["name"] for t in asked(server)[-1].body["tools"]]
    assert offered[-11:] == ["read_cells", "list_variables", "describe_variable", "read_cell",
                             "last_error", "insert_cell", "edit_cell", "delete_cell",
                             "move_cell", "execute_cell", "run_code"]  # fmt: skip
    ran = run("%chat --answer run")
    assert ran.error is None and ip.user_ns["total"] == 6
    assert asked(server)[-1].messages[-1]["content"].startswith("<answer>\nresult:\n6\n</answer>")
    assert "The sum is 6." in ran.out
    # The cell shows what ran, then its value; not the text written for the model.
    assert "► ran the code (2 lines):\ntotal = sum(xs)\ntotal\nvalue:\n6\n" in ran.out
    run("%chat What next?")
    offered = [t["function"]["name"] for t in asked(server)[-1].body.get("tools", [])]
    assert "run_code" not in offered and "list_variables" not in offered


def test_the_agent_setting_and_the_approval_policy(run, ip, server):
    server.script(
        Reply(tool_calls=[("run_code", {"code": "len(xs)"})], when="how many"),
        Reply("Three.", after_tool="run_code"),
    )
    run("xs = [1, 2, 3]")
    run("%config ChatMagics.agent = True\n%config ChatMagics.approval = 'risky'")
    ran = run("%chat how many xs?")
    assert ran.error is None and "Three." in ran.out  # harmless code ran without asking
    assert asked(server)[-1].messages[-1]["content"].startswith("<answer>\nresult:\n3\n</answer>")


def test_show_lists_the_context_of_each_question(run, ip, server):
    run("n = 41")
    run("%chat What is @n plus one?")
    ran = run("%chat --show")  # a terminal prints the text/plain
    assert "\n\nYou: What is @n plus one?\n\ncontext: n (int)\n\n" in ran.out
    with capture_output() as cap:
        ip.run_cell("%chat --show")
    (shown,) = cap.outputs
    assert (
        '<p><strong>You:</strong> What is @n plus one?</p>\n<p class="nbchat-dim">context: n '
        "(int)</p>\n"
    ) in body(shown.data["text/html"])


def test_an_answer_after_a_restart_still_runs_the_code(run, ip, server, tmp_path):
    server.script(
        Reply(tool_calls=[("run_code", {"code": "xs = [1, 2]\nlen(xs)"})], when="count"),
        Reply("Two.", after_tool="run_code"),
    )
    assert run("%chat --agent count the xs").error is None
    ip.magics_manager.registry["ChatMagics"].chats.plain().wait_for_titles(10)
    close_shell()  # a new kernel: nothing of the old session is left
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    fresh = InteractiveShell.instance(config=config)
    load(fresh)
    result = fresh.run_cell("%chat -t 1 --answer run", store_history=True)
    assert result.error_in_exec is None and fresh.user_ns["xs"] == [1, 2]
    assert asked(server)[-1].messages[-1]["content"].startswith("<answer>\nresult:\n2\n</answer>")
