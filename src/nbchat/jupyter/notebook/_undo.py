"""Checkpoints and undo: what a turn changed in the notebook, kept with it, and put back.

Each change that lands (an accepted or automatically landed proposal) is kept
in its thread's settings under ``checkpoints``, by turn: the op, the cell, what
it held before and what landed. :func:`undo_turn` puts a turn's cells back,
newest change first. A cell the person changed since the turn is named and
kept as it is, unless they say ``force``; an executed cell's outputs stay.
The undo is itself a turn of the thread (the model reads what was undone) and
is kept in ``undone``, so a turn is undone once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...base.errors import InputError
from ...context.cell_tools import NotebookCells

CHECKPOINTS = "checkpoints"
UNDONE = "undone"


def recorder(store: Any) -> Callable[[dict[str, Any]], None]:
    """``on_change`` for the cell tools: keep each landed change with its turn."""

    def record(change: dict[str, Any]) -> None:
        provenance = (change.get("metadata") or {}).get("nbchat") or {}
        thread, turn = provenance.get("thread"), provenance.get("turn")
        if not isinstance(thread, int) or not isinstance(turn, int) or not thread:
            return  # a Chat without a thread (LLM): nothing to undo it from
        entry = {key: change.get(key) for key in ("op", "cell_id", "source", "index",
                                                  "cell_type", "before", "at")}  # fmt: skip
        entry["call"] = provenance.get("call")
        settings = dict(store.get(thread).settings or {})
        points = dict(settings.get(CHECKPOINTS) or {})
        points[str(turn)] = [*points.get(str(turn), []), entry]
        store.update_thread(thread, settings={**settings, CHECKPOINTS: points})

    return record


def changed_turns(settings: dict[str, Any]) -> list[int]:
    """The turns that changed the notebook and are not undone, oldest first."""
    undone = set(settings.get(UNDONE) or [])
    points = settings.get(CHECKPOINTS) or {}
    return sorted(int(turn) for turn, entries in points.items()
                  if entries and int(turn) not in undone)  # fmt: skip


def undo_turn(store: Any, cells: NotebookCells, thread_id: int, turn: int | None = None, *,
              force: bool = False) -> str:  # fmt: skip
    """Put back the cells turn ``turn`` (None: the last that changed any) changed; what it did."""
    thread = store.get(thread_id)
    settings = dict(thread.settings or {})
    turns = changed_turns(settings)
    if turn is None:
        if not turns:
            raise InputError(f"no turn of thread {thread_id} changed the notebook, or every one "
                             "is undone already; nothing to undo")  # fmt: skip
        turn = turns[-1]
    if turn not in turns:
        done = turn in set(settings.get(UNDONE) or [])
        raise InputError(f"turn {turn} of thread {thread_id} " + (
            "is undone already" if done else "changed no cell of the notebook") +
            f"; the turns that can be undone: {', '.join(map(str, turns)) or 'none'}")  # fmt: skip
    if any(t.pending for t in thread.turns):
        raise InputError("proposals of this thread wait for an answer; accept or reject them "
                         "first (%chat --answer reject), then undo")  # fmt: skip
    entries = list(settings[CHECKPOINTS][str(turn)])
    restored, kept = [], []
    for entry in reversed(entries):
        outcome = _undo_one(cells, entry, force)
        (restored if outcome is None else kept).append(outcome or str(entry.get("cell_id")))
    summary = _summary(turn, restored, kept)
    settings[UNDONE] = sorted({*settings.get(UNDONE, []), turn})
    store.update_thread(thread_id, settings=settings)
    store.append_response(thread_id, f"Undo turn {turn}", summary)
    return summary


def _undo_one(cells: NotebookCells, entry: dict[str, Any], force: bool) -> str | None:
    """Undo one change; None if done, else why the cell was kept."""
    live = {cell.id: cell for cell in cells.cells()}
    op, cell_id = entry.get("op"), str(entry.get("cell_id"))
    before = entry.get("before") or {}
    current = live.get(cell_id)
    if op == "execute" or op == "outputs":
        return None  # outputs stay; the source was not changed
    if op == "delete":
        if current is not None:
            return f"{cell_id} (it is back already)"
        change = {"op": "insert", "cell_id": cell_id, "index": before.get("index"),
                  "source": before.get("source", ""), "cell_type": before.get("cell_type")}
        return _made(cells, change, cell_id)
    if current is None:
        return f"{cell_id} (it is no longer in the notebook)"
    if op in ("insert", "edit") and current.source != entry.get("source") and not force:
        return f"{cell_id} (you changed it since; %chat --undo {{turn}} --force puts it back)"
    if op == "insert":
        return _made(cells, {"op": "delete", "cell_id": cell_id, "expected": current.source},
                     cell_id)  # fmt: skip
    if op == "edit":
        return _made(cells, {"op": "edit", "cell_id": cell_id, "source": before.get("source", ""),
                             "expected": current.source}, cell_id)  # fmt: skip
    if op == "move":
        return _made(cells, {"op": "move", "cell_id": cell_id, "index": before.get("index"),
                             "expected": current.source}, cell_id)  # fmt: skip
    return f"{cell_id} (an unknown change {op!r})"


def _made(cells: NotebookCells, change: dict[str, Any], cell_id: str) -> str | None:
    reply = cells.change(change)
    return None if reply.get("ok") else f"{cell_id} ({reply.get('error') or 'not changed'})"


def _summary(turn: int, restored: list[str], kept: list[str]) -> str:
    lines = [f"Turn {turn}'s changes to the notebook were undone."]
    if restored:
        lines.append(f"Put back: {', '.join(restored)}.")
    if kept:
        lines.append("Kept as they are: " + "; ".join(k.replace("{turn}", str(turn))
                                                       for k in kept) + ".")  # fmt: skip
    return " ".join(lines)
