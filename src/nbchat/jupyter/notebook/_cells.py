"""The kernel's notebook as the cell tools see it: the page's live cells, else the saved file.

:class:`LiveNotebook` is the :class:`~nbchat.context.cell_tools.NotebookCells`
of nbchat's own model. Where a JupyterLab page with nbchat's extension holds
the notebook, the page keeps the kernel's copy of its cells up to date
(``cells`` messages on the ``nbchat.notebook`` comm, see
:mod:`._lab_bridge`), reads come from that copy and changes go to the page,
which refuses one whose cell no longer holds the text the person accepted.
Otherwise the notebook is the saved file the server's session names
(``JPY_SESSION_NAME``), changed whole and atomically (:mod:`._file`); a file
named outright (``ChatMagics.notebook``) is always the file, page or not. With
neither, the tools say in one line that they cannot edit, and nothing is
queued.

Every change that lands is kept with its turn in the thread's settings
(``checkpoints``), so that the turn can be undone (:mod:`._undo`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

from ...agents import cells as nbcells
from ...context.cell_tools import CannotEdit, Cell
from . import _file
from ._lab_bridge import NotebookBridge

PAGE_WAIT = 10.0  # seconds a change made off the main thread waits for the page's reply
NO_NOTEBOOK = (
    "this kernel has no notebook to edit: no JupyterLab page with nbchat's extension holds "
    "it and no saved notebook file is known; nothing was queued"
)


def session_file() -> str | None:
    """The saved notebook of this kernel's session, when the server named one that exists."""
    named = os.environ.get("JPY_SESSION_NAME", "")
    return named if named.endswith(".ipynb") and os.path.isfile(named) else None


class LiveNotebook:
    """This kernel's notebook: read and changed where it lives (the page, else the file)."""

    def __init__(self, runner: Callable[[str], Any] | None = None,
                 bridge: Callable[[], NotebookBridge | None] | None = None,
                 on_run: Callable[[Any], None] | None = None, file: str = "") -> None:  # fmt: skip
        self.runner = runner  # runs a cell's source as run_code does (a RunResult)
        self._bridge = (lambda: None) if file else (bridge or NotebookBridge.for_kernel)
        self.on_run = on_run
        self.file = os.path.abspath(file) if file else ""  # a notebook file named outright

    def attach(self) -> None:
        """Open the line to the page now, so that its cells arrive before the first question."""
        bridge = self._bridge()
        if bridge is not None:
            bridge.open()

    def identity(self) -> str:
        """The notebook's file: the one named, else the server's session's ("" when none)."""
        return self.file or os.environ.get("JPY_SESSION_NAME", "")

    def _file(self) -> str | None:
        if self.file:
            return self.file if os.path.isfile(self.file) else None
        return session_file()

    # -- reading --------------------------------------------------------------------
    def where(self) -> str:
        """Where the cells are read from, in words."""
        if self._mirror() is not None:
            return "the notebook open in JupyterLab"
        file = self._file()
        return f"the saved notebook {os.path.basename(file)}" if file else "no notebook"

    def notebook(self) -> dict[str, Any]:
        """The notebook as an nbformat dict: the page's live copy, else the saved file."""
        mirror = self._mirror()
        if mirror is not None:
            return mirror
        file = self._file()
        if file is None:
            raise CannotEdit(f"there is no notebook {self.file!r}; nothing was queued"
                             if self.file else NO_NOTEBOOK)  # fmt: skip
        try:
            with open(file, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError) as error:
            raise CannotEdit(f"the saved notebook {file!r} cannot be read "
                             f"({type(error).__name__}); nothing was queued") from None  # fmt: skip
        if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
            raise CannotEdit(f"{file!r} is not an nbformat 4 notebook; nothing was queued")
        return data

    def cells(self) -> list[Cell]:
        found = []
        for index, cell in enumerate(self.notebook()["cells"]):
            if isinstance(cell, dict):
                found.append(Cell(str(cell.get("id") or ""), str(cell.get("cell_type") or "code"),
                                  nbcells.source_of(cell), index))  # fmt: skip
        return found

    def _mirror(self) -> dict[str, Any] | None:
        bridge = self._bridge()
        return bridge.mirror() if bridge is not None else None

    # -- changing -------------------------------------------------------------------
    def change(self, change: dict[str, Any]) -> dict[str, Any]:
        """Make ``change`` where the notebook lives; the reply (``ok``, ``error``, ``in_file``)."""
        bridge = self._bridge()
        if bridge is not None and bridge.mirror() is not None:
            try:
                bridge.apply_to_mirror(lambda nb: apply_change(nb, change))
            except nbcells.CellError as error:
                return {"ok": False, "error": str(error)}
            return _sent(bridge, change)
        file = self._file()
        if file is None:
            return {"ok": False, "error": NO_NOTEBOOK}
        return _file.change_file(file, lambda nb: apply_change(nb, change))

    def change_all(self, changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Make ``changes`` in order, at once (one write of the file); each one's reply."""
        bridge = self._bridge()
        replies: list[dict[str, Any]] = []

        def each(notebook: dict[str, Any]) -> dict[str, Any]:
            replies.clear()
            for change in changes:
                try:
                    replies.append(apply_change(notebook, change))
                except nbcells.CellError as error:
                    replies.append({"ok": False, "error": str(error)})
            return {"ok": True}

        if bridge is not None and bridge.mirror() is not None:
            bridge.apply_to_mirror(each)
            sent = [_sent(bridge, change) if reply.get("ok") else reply
                    for change, reply in zip(changes, list(replies), strict=True)]  # fmt: skip
            return sent
        file = self._file()
        if file is None:
            return [{"ok": False, "error": NO_NOTEBOOK} for _ in changes]
        done = _file.change_file(file, each)
        return replies if done.get("ok") else [done for _ in changes]

    def run(self, cell_id: str, source: str) -> str:
        """Run the cell's source here, as ``run_code`` runs code; its outputs kept in the cell."""
        if self.runner is None:
            return "This notebook cannot run cells here."
        ran = self.runner(source)
        if self.on_run is not None:
            self.on_run(ran)
        outputs = _file.outputs_of(ran)
        self.change({"op": "outputs", "cell_id": cell_id, "outputs": outputs})
        return ran.as_text()


def apply_change(notebook: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """``change`` made on an nbformat dict (the page's copy, or the saved file)."""
    op, cell_id = change.get("op"), change.get("cell_id")
    metadata = dict(change.get("metadata") or {})
    if op == "insert":
        return nbcells.insert(notebook, change.get("index"), str(change.get("source", "")),
                              str(change.get("cell_type") or "code"), metadata,
                              cell_id=cell_id)  # fmt: skip
    nbcells.check_source(notebook, cell_id, change.get("expected"))
    if op == "edit":
        return nbcells.edit(notebook, cell_id, str(change.get("source", "")), metadata)
    if op == "delete":
        return nbcells.delete(notebook, cell_id)
    if op == "move":
        reply = nbcells.move(notebook, cell_id, change.get("index"))
        nbcells.find(notebook, cell_id).setdefault("metadata", {}).update(metadata)
        return reply
    if op in ("outputs", "execute"):
        nbcells.set_outputs(notebook, cell_id, list(change.get("outputs") or []), None)
        return {"ok": True, "cell_id": cell_id}
    raise nbcells.CellError(f"unknown change {op!r}")


def _sent(bridge: NotebookBridge, change: dict[str, Any]) -> dict[str, Any]:
    """Send the change to the page; on nbchat's own threads (the panel's answers), wait for
    its reply."""
    replied = threading.Event()
    reply: dict[str, Any] = {}

    def done(answer: dict[str, Any]) -> None:
        reply.update(answer)
        replied.set()

    bridge.request({**change, "strict": True}, done)
    if not threading.current_thread().name.startswith("nbchat-"):
        # The page's reply reaches this kernel only once the running cell (or the widget
        # callback, on whichever thread the kernel runs it) ends; nbchat's own threads wait.
        return {"ok": True, "cell_id": change.get("cell_id"), "sent": True}
    if not replied.wait(PAGE_WAIT):
        return {"ok": True, "cell_id": change.get("cell_id"), "sent": True}
    return reply
