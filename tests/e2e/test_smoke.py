"""JupyterLab in Chromium runs a cell, and a widget callback updates its cell's output."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.e2e

PRINT_CELL = """\
import os, sys
print("hello from the kernel")
print("prefix:", sys.prefix)
print("ipythondir:", os.environ["IPYTHONDIR"])
"""

# The pattern the tool prompts use: the cell returns, the click resumes the work,
# and the callback writes into a display handle the cell created.
BUTTON_CELL = """\
import ipywidgets as widgets
from IPython.display import Markdown, display

handle = display(Markdown("waiting for an answer"), display_id=True)
button = widgets.Button(description="Answer")

def _on_button_click(_):
    handle.update(Markdown("answered by a click"))

button.on_click(_on_button_click)
display(button)
"""


def test_kernel_prints_and_widget_click_updates_display(notebook, jupyterlab):
    nb = notebook([PRINT_CELL, BUTTON_CELL])
    nb.screenshot("1-opened")

    nb.run_cell(0)
    nb.wait_for_text(0, "hello from the kernel")
    # The kernel runs in this venv, with the server's isolated environment.
    nb.wait_for_text(0, f"prefix: {sys.prefix}")
    nb.wait_for_text(0, f"ipythondir: {jupyterlab.root_dir.parent / 'ipython'}")
    nb.screenshot("2-printed")

    nb.run_cell(1)
    nb.wait_for_text(1, "waiting for an answer")
    button = nb.output(1).get_by_role("button", name="Answer")
    button.wait_for(timeout=30_000)
    nb.screenshot("3-widget-shown")

    button.click()
    nb.wait_for_text(1, "answered by a click")
    assert "waiting for an answer" not in nb.output(1).inner_text()
    nb.screenshot("4-clicked")
