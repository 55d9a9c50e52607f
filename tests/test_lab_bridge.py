"""The kernel side of the lab extension, outside a kernel (in one: e2e/test_lab_extension.py)."""

from __future__ import annotations

import pytest

from nbchat.base.errors import NbchatError
from nbchat.jupyter.notebook._lab_bridge import NotebookBridge
from nbchat.jupyter.panel._side import open_from_lab


def test_there_is_no_bridge_outside_a_kernel():
    assert NotebookBridge.for_kernel() is None


def test_open_from_lab_outside_a_kernel_says_why():
    with pytest.raises(NbchatError, match="^the chat panel cannot open: the side area needs a "
                                          "Jupyter kernel$"):
        open_from_lab("x.ipynb")
