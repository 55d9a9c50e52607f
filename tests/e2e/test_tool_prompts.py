"""Client-tool prompts in real JupyterLab: the cell returns, a click resumes the turn."""

from __future__ import annotations

import pytest

from nbchat.testing import Reply

pytestmark = pytest.mark.e2e

# The session's JupyterLab started with whatever environment the first test
# gave it: point this kernel at this test's scripted server and store.
SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""


def _cells(server, tmp_path, question):
    return [SETUP.format(url=server.url, store=str(tmp_path / "store")), f"%%chat\n{question}"]


def test_click_an_option_resumes_the_turn_below_the_prompt(notebook, scripted_server, tmp_path):
    scripted_server.script(
        Reply(
            "",
            when="colour for the logo",
            tool_calls=[("choose", {"question": "Which colour?", "options": ["red", "green"]})],
        ),
        Reply("Green it is: calm and fresh.", after_tool="choose", delay=0.05),
    )
    nb = notebook(_cells(scripted_server, tmp_path, "Pick a colour for the logo"))
    nb.run_cell(0)
    nb.run_cell(1)  # returns: the kernel is idle while the prompt waits
    out = nb.output(1)
    nb.wait_for_text(1, "Which colour?")
    green = out.get_by_role("button", name="green")
    green.wait_for(timeout=30_000)
    nb.screenshot("1-prompt")

    green.click()
    nb.wait_for_text(1, "Green it is: calm and fresh.")
    nb.wait_for_text(1, "✓ green")
    assert green.is_disabled()
    assert out.get_by_role("button", name="red").is_disabled()
    # The answer streams below the prompt, in the display reserved in the cell.
    text = out.inner_text()
    assert text.index("Which colour?") < text.index("Green it is")
    nb.screenshot("2-answered")
    requests = scripted_server.chat_requests
    assert requests[1].messages[-1]["content"].startswith("<answer>\ngreen\n</answer>")


def test_rejected_free_text_shows_the_error_then_a_valid_answer_resumes(
    notebook, scripted_server, tmp_path
):
    scripted_server.script(
        Reply(
            "Let me ask first.",
            when="greet me",
            tool_calls=[("ask_user", {"question": "What is your name?", "placeholder": "Ana"})],
        ),
        Reply("Nice to meet you, Ada!", after_tool="ask_user", delay=0.05),
    )
    nb = notebook(_cells(scripted_server, tmp_path, "Please greet me by name"))
    nb.run_cell(0)
    nb.run_cell(1)
    out = nb.output(1)
    nb.wait_for_text(1, "What is your name?")
    submit = out.get_by_role("button", name="Submit")
    submit.wait_for(timeout=30_000)
    nb.screenshot("1-prompt")

    submit.click()  # an empty answer: ask_user refuses it
    nb.wait_for_text(1, "the answer is empty")
    assert not submit.is_disabled()
    nb.screenshot("2-rejected")
    before = len(scripted_server.chat_requests)

    box = out.locator("textarea")
    box.fill("Ada")
    submit.click()
    nb.wait_for_text(1, "Nice to meet you, Ada!")
    assert "the answer is empty" not in out.inner_text()
    assert submit.is_disabled() and box.is_disabled()
    nb.screenshot("3-answered")
    assert len(scripted_server.chat_requests) > before
