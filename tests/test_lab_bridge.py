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


class Recording:
    """The comm to a page: what the kernel sends it, and the page's messages to the kernel."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, data: dict) -> None:
        self.sent.append(data)


def page_says(bridge: NotebookBridge, data: dict) -> None:
    bridge._on_msg({"content": {"data": data}})


def attached() -> tuple[NotebookBridge, Recording]:
    bridge, comm = NotebookBridge("work.ipynb"), Recording()
    bridge._comm = comm
    page_says(bridge, {"op": "hello", "path": "work.ipynb", "client": "page-1"})
    cells = {"a": {"id": "a", "cell_type": "code", "source": "x = 1\n", "metadata": {}},
             "b": {"id": "b", "cell_type": "code", "source": "y = 2  # not saved\n",
                   "metadata": {}}}
    page_says(bridge, {"op": "cells", "client": "page-1", "order": ["a", "b"], "cells": cells})
    return bridge, comm


def test_reads_come_from_the_pages_live_copy_and_changes_go_to_the_page_strictly():
    from nbchat.jupyter.notebook._cells import LiveNotebook

    bridge, comm = attached()
    live = LiveNotebook(bridge=lambda: bridge)
    assert [(c.id, c.source) for c in live.cells()] == [("a", "x = 1\n"),
                                                         ("b", "y = 2  # not saved\n")]
    reply = live.change({"op": "edit", "cell_id": "b", "source": "y = 3\n",
                         "expected": "y = 2  # not saved\n", "metadata": {}})
    assert reply["ok"]
    (sent,) = comm.sent
    assert (sent["op"], sent["strict"], sent["expected"], sent["client"]) == \
        ("edit", True, "y = 2  # not saved\n", "page-1")
    assert live.cells()[1].source == "y = 3\n"  # the copy follows before the page's next word
    stale = live.change({"op": "delete", "cell_id": "a", "expected": "x = 0\n"})
    assert not stale["ok"] and "changed since" in stale["error"] and len(comm.sent) == 1


def test_another_pages_copy_is_not_taken():
    bridge, _ = attached()
    page_says(bridge, {"op": "cells", "client": "page-2", "order": ["z"], "cells": {"z": {}}})
    assert [c["id"] for c in bridge.mirror()["cells"]] == ["a", "b"]
