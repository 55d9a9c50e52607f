"""An outside agent's cell change, made in a notebook's saved JSON when no page holds it.

The same ops the lab extension makes in a page's model (``insert``, ``edit``,
and the outputs of ``execute``), on an nbformat 4 dict, with the same checks
and the same replies: ``{"ok": True, "cell_id": ...}`` or ``{"ok": False,
"error": ...}``. Reading and writing the file is the caller's: this module
only changes the dict it is given.
"""

from __future__ import annotations

import uuid
from typing import Any

Reply = dict[str, Any]


class CellError(Exception):
    """A change that cannot be made to this notebook; its message says why."""


def insert(notebook: dict[str, Any], index: object, source: str, cell_type: str,
           metadata: dict[str, Any], cell_id: str | None = None) -> Reply:  # fmt: skip
    """Insert a cell (not run) at ``index`` (None: at the end), with ``cell_id`` if given."""
    cells = _cells(notebook)
    if cell_id is not None and any(c.get("id") == cell_id for c in cells if isinstance(c, dict)):
        raise CellError(f"a cell with id {cell_id!r} is already in the notebook")
    at = len(cells) if index is None else index
    if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= len(cells):
        raise CellError(f"index {at!r} is not a cell position from 0 to {len(cells)}")
    if cell_type not in ("code", "markdown"):
        raise CellError(f"cell_type {cell_type!r} is not code or markdown")
    _with_ids(notebook)
    cell: dict[str, Any] = {"id": cell_id or _new_id(cells), "cell_type": cell_type,
                            "metadata": dict(metadata), "source": source}  # fmt: skip
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    cells.insert(at, cell)
    return {"ok": True, "cell_id": cell["id"], "index": at}


def edit(notebook: dict[str, Any], cell_id: object, source: str,
         metadata: dict[str, Any]) -> Reply:  # fmt: skip
    """Set the cell's source; ``metadata`` is merged into its own."""
    cell = find(notebook, cell_id)
    cell["source"] = source
    cell.setdefault("metadata", {}).update(metadata)
    return {"ok": True, "cell_id": cell_id}


def delete(notebook: dict[str, Any], cell_id: object) -> Reply:
    """Remove the cell."""
    cell = find(notebook, cell_id)
    _cells(notebook).remove(cell)
    return {"ok": True, "cell_id": cell_id}


def move(notebook: dict[str, Any], cell_id: object, index: object) -> Reply:
    """Move the cell to ``index`` (its position once moved)."""
    cells = _cells(notebook)
    cell = find(notebook, cell_id)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(cells):
        raise CellError(f"index {index!r} is not a cell position from 0 to {len(cells) - 1}")
    cells.remove(cell)
    cells.insert(index, cell)
    return {"ok": True, "cell_id": cell_id, "index": index}


def check_source(notebook: dict[str, Any], cell_id: object, expected: object) -> None:
    """CellError unless the cell holds exactly ``expected`` (None: anything)."""
    if expected is None:
        return
    if source_of(find(notebook, cell_id)) != expected:
        raise CellError(f"cell {cell_id!r} changed since the change was accepted; nothing was "
                        "changed")  # fmt: skip


def source_of(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    source = cell.get("source")
    return "".join(source) if isinstance(source, list) else str(source or "")


def set_outputs(notebook: dict[str, Any], cell_id: object, outputs: list[dict[str, Any]],
                execution_count: int | None) -> None:  # fmt: skip
    """Keep a run's outputs in the cell, as a page would save them."""
    cell = find(notebook, cell_id)
    if cell.get("cell_type") == "code":
        cell["outputs"] = outputs
        cell["execution_count"] = execution_count


def find(notebook: dict[str, Any], cell_id: object) -> dict[str, Any]:
    """The cell with this id; CellError naming the id if there is none."""
    if not isinstance(cell_id, str):
        raise CellError("cell_id must be a string")
    for cell in _cells(notebook):
        if isinstance(cell, dict) and cell.get("id") == cell_id:
            return cell
    raise CellError(f"no cell with id {cell_id[:40]!r} in the saved notebook")


def _cells(notebook: dict[str, Any]) -> list[Any]:
    cells = notebook.get("cells")
    if not isinstance(cells, list) or notebook.get("nbformat") != 4:
        raise CellError("the saved file is not an nbformat 4 notebook")
    return cells


def _with_ids(notebook: dict[str, Any]) -> None:
    """Cell ids need nbformat 4.5: give every cell one (a page saving it would too)."""
    cells = _cells(notebook)
    for cell in cells:
        if isinstance(cell, dict) and not cell.get("id"):
            cell["id"] = _new_id(cells)
    if int(notebook.get("nbformat_minor") or 0) < 5:
        notebook["nbformat_minor"] = 5


def _new_id(cells: list[Any]) -> str:
    taken = {cell.get("id") for cell in cells if isinstance(cell, dict)}
    while (made := uuid.uuid4().hex[:8]) in taken:
        pass
    return made
