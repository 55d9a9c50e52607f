"""Fix and Explain under a cell's error: what the kernel makes of the page's error, and the
questions it asks in the side panel (in a real kernel, with the scripted model).

The buttons themselves are the lab extension's (e2e/test_review_in_lab.py draws them).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kernel_helpers import kernel_env, run_notebook
from nbchat import Chat
from nbchat.jupyter.notebook._cell_help import error_context, fix_question, named_variables
from nbchat.testing import Reply

SECRET = "sk-proj-Planted0123456789abcdef"
TYPO = 'df["revenu"].sum()\n'
ERROR = {"ename": "KeyError", "evalue": "'revenu'",
         "traceback": ["\x1b[0;31mKeyError\x1b[0m Traceback (most recent call last)",
                       f"\x1b[0;32m----> 1\x1b[0m df[\x1b[38;5;124m\"revenu\"\x1b[39m]  # {SECRET}",
                       "\x1b[0;31mKeyError\x1b[0m: 'revenu'"]}  # fmt: skip


@pytest.fixture(autouse=True)
def key_in_use(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)  # a secret this process knows


def test_the_error_is_read_as_text_scrubbed_and_with_its_cell():
    item = error_context("typo", TYPO, ERROR)
    assert item.name == "error" and item.kind == "KeyError"
    assert "KeyError: 'revenu'" in item.text and "\x1b" not in item.text
    assert SECRET not in item.text
    assert 'the cell that raised it (cell typo):\n```python\ndf["revenu"].sum()' in item.text


def test_a_long_traceback_is_bounded_and_a_secret_at_the_cut_never_shows():
    for at in range(0, 400, 7):
        lines = ["x" * at + SECRET + "y" * 40_000]
        item = error_context("c", "1/0\n", {"ename": "E", "evalue": "", "traceback": lines})
        assert len(item.text) < 20_000 and "Planted0123" not in item.text


def test_the_variables_a_cell_names_are_its_data_only():
    import math

    namespace = {"df": object(), "threshold": 3, "math": math, "helper": lambda: 1,
                 "_hidden": 1, "sum": sum, "rate": 0.5, "extra": 1}  # fmt: skip
    source = "import math\ndf[threshold] + math.pi + helper() + sum([rate, extra]) + _hidden\n"
    assert named_variables(source, namespace) == ["df", "threshold", "rate"]
    assert named_variables("def broken(:\n", namespace) == []


@pytest.mark.parametrize("text", ['say "hi"', "back\\slash", "line\nbreak\u2028sep", "\x1b[31m",
                                  "\ud800 lone", "}{)(", "\u202eevil"])  # fmt: skip
def test_the_pages_json_arguments_are_the_same_values_in_python(text):
    assert ast.literal_eval(json.dumps(text)) == text  # what errors.ts sends is what arrives
    error = {"ename": text, "evalue": text, "traceback": [text, text]}
    assert ast.literal_eval(json.dumps(error)) == error


def test_the_fix_question_names_the_cell_and_asks_for_a_proposal_only():
    question = fix_question("typo")
    assert "edit_cell (cell_id 'typo')" in question and "do not run anything" in question


# -- in a real kernel ----------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "sales.ipynb"
    cells = [{"id": "load", "cell_type": "code", "metadata": {}, "outputs": [],
              "source": "import pandas as pd\ndf = pd.DataFrame({'revenue': [1, 2]})\n",
              "execution_count": 1},
             {"id": "typo", "cell_type": "code", "metadata": {}, "outputs": [], "source": TYPO,
              "execution_count": 2}]  # fmt: skip
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": cells}))  # fmt: skip
    return path


def call(action: str, path: Path) -> str:
    return (f"__import__('nbchat.jupyter.kernel_api', fromlist=['_']).help_with_error("
            f"{action!r}, {str(path)!r}, 'typo', {TYPO!r}, {ERROR!r})")


@pytest.mark.kernel
def test_fix_proposes_the_corrected_cell_and_explain_answers_in_the_panel(
    scripted_server, tmp_path, saved
):
    scripted_server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "typo", "source": 'df["revenue"].sum()\n',
                                         "why": "The column is revenue."})], when="Fix cell"),
        Reply("The column is called revenue, not revenu.", when="Explain briefly"),
    )
    env = kernel_env(tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url,
                     NBCHAT_MODEL="scripted-small", NBCHAT_STORE=str(tmp_path / "store"),
                     NBCHAT_USER="ana", JPY_SESSION_NAME=str(saved),
                     OPENAI_API_KEY=SECRET)  # fmt: skip
    before = saved.read_bytes()
    run_notebook(["%load_ext nbchat", "import pandas as pd\ndf = pd.DataFrame({'revenue': [1]})",
                  call("fix", saved)], env, cwd=tmp_path)  # fmt: skip
    fixing = [r for r in scripted_server.chat_requests if "Fix cell typo" in json.dumps(r.body)]
    assert fixing, "the fix question reached the model"
    sent = json.dumps(fixing[0].body)
    assert "KeyError: 'revenu'" in sent and SECRET not in sent and "\\u001b" not in sent
    assert "edit_cell" in [t["function"]["name"] for t in fixing[0].body["tools"]]
    assert "DataFrame" in sent  # the variable the cell names, described
    chat = Chat(base_url=scripted_server.url, store=env["NBCHAT_STORE"], user="ana")
    (waiting,) = chat.pending_calls(None)
    assert waiting.tool == "edit_cell" and waiting.prompt.extra["cell_id"] == "typo"
    assert saved.read_bytes() == before  # a proposal: nothing lands without a yes
    run_notebook(["%load_ext nbchat", call("explain", saved)], env, cwd=tmp_path)
    explaining = [r for r in scripted_server.chat_requests
                  if "Explain briefly" in json.dumps(r.body)]  # fmt: skip
    assert explaining and "edit_cell" not in json.dumps(explaining[0].body.get("tools", []))
    assert "KeyError: 'revenu'" in json.dumps(explaining[0].body)
    answers = [t.answer for thread in chat.threads()
               for t in chat.store.get(thread.id).turns]  # fmt: skip
    assert "The column is called revenue, not revenu." in answers


@pytest.mark.kernel
def test_a_question_asked_in_a_cell_is_answered_by_a_proposal_on_that_cell(
    scripted_server, tmp_path, saved
):
    scripted_server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "typo", "why": "A function.", "source":
                                         "def total(df):\n    return df['revenue'].sum()\n"})],
              when="make this a function"),
    )  # fmt: skip
    env = kernel_env(tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url,
                     NBCHAT_MODEL="scripted-small", NBCHAT_STORE=str(tmp_path / "store"),
                     NBCHAT_USER="ana", JPY_SESSION_NAME=str(saved))  # fmt: skip
    before = saved.read_bytes()
    asking = ("__import__('nbchat.jupyter.kernel_api', fromlist=['_']).ask_in_cell("
              f"{str(saved)!r}, 'typo', {TYPO!r}, 'df[\"revenu\"]', 'make this a function')")
    empty = ("__import__('nbchat.jupyter.kernel_api', fromlist=['_']).ask_in_cell("
             f"{str(saved)!r}, 'typo', {TYPO!r}, '', '   ')")
    notebook = run_notebook(["%load_ext nbchat", asking, empty], env, cwd=tmp_path,
                            allow_errors=True)  # fmt: skip
    assert "the question is empty" in json.dumps(notebook.cells[2].outputs)
    (request,) = [r for r in scripted_server.chat_requests
                  if "make this a function" in json.dumps(r.body)]  # fmt: skip
    question = request.body["messages"][-1]["content"]
    assert "This is about cell typo" in question and "the selected lines" in question
    assert 'df[\\"revenu\\"]' in json.dumps(question) and "edit_cell" in json.dumps(request.body)
    chat = Chat(base_url=scripted_server.url, store=env["NBCHAT_STORE"], user="ana")
    (waiting,) = chat.pending_calls(None)
    assert waiting.tool == "edit_cell" and waiting.prompt.extra["cell_id"] == "typo"
    assert saved.read_bytes() == before
    thread = chat.store.get(waiting.thread_id)
    assert thread.settings["mode"] == "ask" and thread.turns[-1].query.startswith(
        "make this a function")
