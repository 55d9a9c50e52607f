"""run_code in real JupyterLab: the code shown highlighted, Run / Edit / Reject, then the answer."""

from __future__ import annotations

import re

import pytest

from nbchat.testing import Reply

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
prices = [10.0, 12.5, 9.5]
"""
CODE = "mean = sum(prices) / len(prices)\nmean"


def _script(server, then: str) -> None:
    server.script(
        Reply("", when="average price",
              tool_calls=[("run_code", {"code": CODE, "why": "To compute the average."})]),
        Reply(then, after_tool="run_code", delay=0.05),
    )


def _cells(server, tmp_path):
    setup = SETUP.format(url=server.url, store=str(tmp_path / "store"))
    return [setup, "%chat --agent What is the average price?", "print(globals().get('mean'))"]


def test_edit_then_run_runs_the_edited_code(notebook, scripted_server, tmp_path):
    _script(scripted_server, "The median is 10.0.")
    nb = notebook(_cells(scripted_server, tmp_path))
    nb.run_cell(0)
    nb.run_cell(1)  # returns: nothing runs before the answer
    out = nb.output(1)
    nb.wait_for_text(1, "To compute the average.")
    run = out.get_by_role("button", name=re.compile(r"Run$"))
    run.wait_for(timeout=30_000)
    assert "sum(prices) / len(prices)" in out.inner_text()
    nb.screenshot("1-code-prompt")

    out.get_by_role("button", name=re.compile(r"^\s*Edit\s*$")).click()
    editor = out.locator("textarea")
    editor.wait_for(timeout=10_000)
    editor.fill("median = sorted(prices)[1]\nmedian")
    nb.screenshot("2-editing")
    out.get_by_role("button", name=re.compile(r"Run edited")).click()
    nb.wait_for_text(1, "The median is 10.0.")
    nb.wait_for_text(1, "► ran your edited code (2 lines)")  # folded, then its value
    shown = out.inner_text()
    assert "10.0" in shown.split("► ran your edited code (2 lines)", 1)[1]
    assert "result:" not in shown and "chars" not in shown  # not the text for the model
    assert run.is_disabled() and editor.is_disabled()
    nb.screenshot("3-ran-edited")
    told = [r.messages[-1]["content"] for r in scripted_server.chat_requests
            if r.messages[-1]["role"] == "tool"]
    assert told[-1].startswith(
        "<answer>\nThe user edited the code before running it; this is what ran:\n"
        "```python\nmedian = sorted(prices)[1]\nmedian\n```\nresult:\n10.0\n</answer>"
    )


def test_reject_with_a_reason_runs_nothing(notebook, scripted_server, tmp_path):
    _script(scripted_server, "Understood, I will not run it.")
    nb = notebook(_cells(scripted_server, tmp_path))
    nb.run_cell(0)
    nb.run_cell(1)
    out = nb.output(1)
    nb.wait_for_text(1, "To compute the average.")
    reject = out.get_by_role("button", name=re.compile(r"Reject"))
    reject.wait_for(timeout=30_000)
    out.get_by_placeholder("why not (optional)").fill("I only wanted the formula")
    reject.click()
    nb.wait_for_text(1, "Understood, I will not run it.")
    nb.wait_for_text(1, "rejected: I only wanted the formula")
    nb.screenshot("1-rejected")
    nb.run_cell(2)
    nb.wait_for_text(2, "None")  # the code never ran: no `mean` in the namespace
    told = [r.messages[-1]["content"] for r in scripted_server.chat_requests
            if r.messages[-1]["role"] == "tool"]
    assert told[-1].startswith(
        "<answer>\nThe user rejected running the code; it did not run. Their reason: "
        "I only wanted the formula\n</answer>"
    )
