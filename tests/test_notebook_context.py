"""The notebook as context in a fresh InteractiveShell: mentions, errors, figures, running code."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from nbchat.base.errors import InputError, InvalidToolAnswer
from nbchat.context.run_code import CodeDecision, RunCode
from nbchat.jupyter.notebook.tools import Notebook, RunResult, notebook_tools
from shell_helpers import close_shell

matplotlib.use("Agg")


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.chdir(tmp_path)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    close_shell()


def cell(ip: InteractiveShell, code: str):
    return ip.run_cell(code, store_history=True)


def test_mentions_attach_described_objects_and_report_unknown_names(ip):
    ip.user_ns["df"] = pd.DataFrame({"price": [1.0, 2.0, 3.0]})
    ip.user_ns["weights"] = np.ones((2, 3))
    attached = Notebook(ip).attach("Compare @df.price with @weights; and @missing? mail a@b.io")
    assert [item.summary for item in attached.items] == [
        "df.price (Series 3 (float64))",
        "weights (ndarray 2×3 float64)",
    ]
    assert attached.unresolved == ("@missing",)


def test_in_and_out_mentions_and_the_llm_formatter(ip):
    cell(ip, "x = 21")
    cell(ip, "x * 2")
    notebook = Notebook(ip)
    assert notebook.describe("In[1]").text == "builtins.str: 'x = 21'"
    assert notebook.describe("@Out[2]").text == "builtins.int: 42"
    llm = ip.display_formatter.formatters  # register a text/llm+plain formatter, as chatlab does
    from IPython.core.formatters import BaseFormatter

    class LLMFormatter(BaseFormatter):
        format_type = "text/llm+plain"

    llm["text/llm+plain"] = LLMFormatter(parent=ip.display_formatter)
    llm["text/llm+plain"].for_type(int, lambda n: f"the number {n}")
    assert notebook.describe("x").text == "the number 21"
    with pytest.raises(InputError, match="'nope' is not defined in this notebook"):
        notebook.describe("nope")


def test_the_last_error_comes_with_its_cell(ip):
    notebook = Notebook(ip)
    assert notebook.last_error() is None
    cell(ip, "values = {'a': 1}")
    cell(ip, "def total(d):\n    return d['b'] + 1\n\ntotal(values)")
    item = notebook.last_error()
    assert item is not None and item.summary == "last_error (KeyError)"
    assert item.text.startswith("KeyError: 'b'\n\ntraceback:\n")
    assert "return d['b'] + 1" in item.text
    assert item.text.endswith(
        "the cell that raised it (In[2]):\n```python\n"
        "def total(d):\n    return d['b'] + 1\n\ntotal(values)\n```"
    )


def test_the_last_figure_is_the_open_one_else_the_newest_in_a_variable(ip):
    notebook = Notebook(ip)
    cell(ip, "import matplotlib.pyplot as plt\nfig1, ax1 = plt.subplots()\nfig2 = plt.figure()")
    assert notebook.last_figure() is ip.user_ns["fig2"]
    cell(ip, "plt.close('all')")
    assert notebook.last_figure() is ip.user_ns["fig2"]
    cell(ip, "del fig2")
    assert notebook.last_figure() is ip.user_ns["fig1"]


def test_list_variables_and_read_cell(ip):
    cell(ip, "import numpy as np\ndf_rows = [1, 2, 3]\narr = np.zeros((4, 5))\n_private = 1")
    notebook = Notebook(ip)
    assert notebook.list_variables() == "df_rows: list of 3\narr: ndarray 4×5"
    assert notebook.read_cell(1).startswith("import numpy as np")
    assert notebook.read_cell(-1) == notebook.read_cell(1)
    with pytest.raises(InputError, match="there is no cell 9; cells run so far: 1 to 1"):
        notebook.read_cell(9)


def test_running_code_captures_output_result_and_errors_without_touching_the_session(ip):
    cell(ip, "n = 2")
    count = ip.execution_count
    notebook = Notebook(ip)
    ran = notebook.run("print('hi')\nimport sys; print('oops', file=sys.stderr)\nm = n * 3\nm + 1")
    assert ran == RunResult(
        "print('hi')\nimport sys; print('oops', file=sys.stderr)\nm = n * 3\nm + 1",
        stdout="hi\n",
        stderr="oops\n",
        result="7",
    )
    assert ip.user_ns["m"] == 6  # ran in the user's namespace
    assert ip.execution_count == count and "_" not in ip.user_ns or ip.user_ns["_"] != 7
    failed = notebook.run("x = 1\n1 / 0")
    assert failed.error is not None and failed.error.endswith("ZeroDivisionError: division by zero")
    assert "1 / 0" in failed.error  # IPython's compiler keeps the source for tracebacks
    assert failed.error.startswith('Traceback (most recent call last):\n  File "<ipython-input')
    assert "_notebook.py" not in failed.error
    assert notebook.run("def f(:").error.endswith("SyntaxError: invalid syntax")


def test_magics_and_shell_lines_run_as_in_a_cell(ip):
    ran = Notebook(ip).run("%time x = 40 + 2\nfiles = !echo hello\nfiles[0], x")
    assert ran.result == "('hello', 42)"
    assert "Wall time" in ran.stdout


def test_run_output_is_cut_to_its_budget_keeping_head_and_tail():
    result = RunResult("print", stdout="".join(f"line {i}\n" for i in range(5000)))
    text = result.as_text(budget=100)
    assert text.startswith("stdout:\nline 0\n") and text.endswith("line 4999")
    assert "characters left out" in text and len(text) < 500
    assert RunResult("x = 1").as_text() == (
        "The code ran and printed nothing; its last line has no value."
    )


# -- run_code, the client tool ------------------------------------------------------------
@pytest.fixture
def runs():
    return []


@pytest.fixture
def run_code(runs):
    def runner(code: str) -> str:
        runs.append(code)
        return f"ran {len(runs)}"

    return RunCode(runner, namespace={"df": pd.DataFrame({"a": [1, 2]})})


ARGS = {"code": "df.describe()", "why": "To see the columns."}


def test_the_prompt_gives_the_question_its_risks_and_three_choices_but_no_copy_of_the_code(
    run_code,
):
    assert run_code.prompt(ARGS) == {  # what is shown and run is the call's own arguments
        "kind": "code",
        "question": "To see the columns.",
        "options": ["Run", "Edit", "Reject"],
        "risks": [],
    }
    assert run_code.prompt({"code": "import os"})["risks"] == ["imports os"]


@pytest.mark.parametrize(
    ("response", "decision"),
    [
        ("run", CodeDecision("run", "df.describe()")),
        (" Yes ", CodeDecision("run", "df.describe()")),
        (True, CodeDecision("run", "df.describe()")),
        ("reject", CodeDecision("reject")),
        (False, CodeDecision("reject")),
        ("reject: too slow on my data", CodeDecision("reject", reason="too slow on my data")),
        ("edit: df.head()", CodeDecision("edit", "df.head()")),
        ("edit:\ndf.head()\n", CodeDecision("edit", "df.head()")),
        ({"action": "edit", "code": "df.describe()"}, CodeDecision("run", "df.describe()")),
        ({"action": "reject", "reason": "no"}, CodeDecision("reject", reason="no")),
    ],
)
def test_answers_run_edit_or_reject(run_code, response, decision):
    assert run_code.parse_response(ARGS, response) == decision


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ("maybe", "'maybe' is not an answer here; answer run, reject"),
        ("edit:   ", "the edited code is empty"),
        ({"action": "launch"}, "unknown action 'launch'"),
        (3, "answer run, reject"),
        ("run: something", "'run' takes nothing after it"),
    ],
)
def test_bad_answers_are_told_to_the_person(run_code, response, message):
    with pytest.raises(InvalidToolAnswer, match=message):
        run_code.parse_response(ARGS, response)


def test_the_code_runs_only_on_run_or_edit_and_the_model_is_told(run_code, runs):
    rejected = run_code.get_tool_output(ARGS, run_code.parse_response(ARGS, "reject: not now"))
    assert runs == []
    assert rejected == (
        "<answer>\nThe user rejected running the code; it did not run. Their reason: not now\n"
        "</answer>\n<instructions>\nDo not try to run this code again. Answer without running "
        "it, or ask the user what they would like instead.\n</instructions>"
    )
    ran = run_code.get_tool_output(ARGS, run_code.parse_response(ARGS, "run"))
    assert runs == ["df.describe()"]
    assert ran.startswith("<answer>\nran 1\n</answer>")
    edited = run_code.get_tool_output(ARGS, run_code.parse_response(ARGS, "edit: df.head(2)"))
    assert runs == ["df.describe()", "df.head(2)"]
    assert edited.startswith(
        "<answer>\nThe user edited the code before running it; this is what ran:\n"
        "```python\ndf.head(2)\n```\nran 2\n</answer>"
    )


def test_the_policy_answers_by_itself_only_where_it_may(runs, monkeypatch):
    def runner(code: str) -> str:
        return ""

    assert RunCode(runner).auto_response({"code": "1 + 1"}) is None
    assert RunCode(runner, approval="risky").auto_response({"code": "1 + 1"}) == "run"
    assert RunCode(runner, approval="risky").auto_response({"code": "import os"}) is None
    assert RunCode(runner, approval="never-ask").auto_response({"code": "import os"}) == "run"
    monkeypatch.setenv("NBCHAT_MAX_APPROVAL", "always")
    assert RunCode(runner, approval="never-ask").auto_response({"code": "1 + 1"}) is None


def test_notebook_tools_read_the_notebook_and_run_through_the_shell(ip):
    cell(ip, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})")
    tools = {t.name: t for t in notebook_tools(ip)}
    assert list(tools) == ["read_cells", "list_variables", "describe_variable", "read_cell",
                           "last_error", "insert_cell", "edit_cell", "delete_cell", "move_cell",
                           "execute_cell", "run_code", "propose_plan"]  # fmt: skip
    assert tools["list_variables"].run("{}") == "df: DataFrame 2×1"
    described = tools["describe_variable"].run('{"name": "df.a"}')
    assert described.startswith("pandas Series 'a': 2 values")
    assert tools["read_cell"].run('{"number": 1}').startswith("import pandas as pd")
    assert tools["last_error"].run("{}") == "No exception has happened in this session."
    run_code = tools["run_code"]
    output = run_code.output({"code": "df.a.sum()"}, CodeDecision("run", "df.a.sum()"))
    assert output == "result:\nnp.int64(3)"
