"""A model's thinking shows in JupyterLab collapsed above the answer, and opens on a click."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e

THINKING_CELL = """\
from nbchat.base.events import ReasoningDelta, TextDelta, TurnFinished, TurnStarted
from nbchat.jupyter.cell.render import render_turn

result = render_turn([
    TurnStarted(1, 0, "m"),
    ReasoningDelta("First I weigh the options."),
    TextDelta("The answer is plain."),
    TurnFinished(1, 0, "The answer is plain.", "complete", "m"),
], mode="final")
"""


def test_thinking_is_collapsed_above_the_answer(notebook):
    nb = notebook([THINKING_CELL])
    nb.run_cell(0)
    nb.wait_for_text(0, "The answer is plain.")
    output = nb.output(0)
    thinking = output.get_by_text("First I weigh the options.")
    summary = output.locator("details > summary")
    assert summary.inner_text() == "Thought"
    assert not thinking.is_visible()
    box = output.locator("details").bounding_box()
    answer = output.get_by_text("The answer is plain.").bounding_box()
    assert box is not None and answer is not None and box["y"] < answer["y"]
    nb.screenshot("1-collapsed")
    summary.click()
    thinking.wait_for(state="visible", timeout=10_000)
    nb.screenshot("2-opened")
