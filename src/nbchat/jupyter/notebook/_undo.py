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

import copy
from collections.abc import Callable
from typing import Any

from ...agents.cells import CellError, source_of
from ...base.errors import InputError
from .._loaded import loaded_in
from ._cells import LiveNotebook, apply_change

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


def undo_turn(store: Any, cells: LiveNotebook, thread_id: int, turn: int | None = None, *,
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
    working = copy.deepcopy(cells.notebook())  # each change decided on what the last left
    restored, kept, changes = [], [], []
    for entry in reversed(entries):
        live = {str(c.get("id")): c for c in working["cells"] if isinstance(c, dict)}
        change, why = _undo_one(live, entry, force)
        if change is not None:
            try:
                apply_change(working, change)
            except CellError as error:
                change, why = None, f"{entry.get('cell_id')} ({error})"
        if change is not None:
            changes.append((change, str(entry.get("cell_id"))))
        elif why is not None:
            kept.append(why)
    for (_, cell_id), reply in zip(changes, cells.change_all([c for c, _ in changes]),
                                   strict=True):  # fmt: skip
        if reply.get("ok"):
            restored.append(cell_id)
        else:
            kept.append(f"{cell_id} ({reply.get('error') or 'not changed'})")
    summary = _summary(turn, restored, kept)
    settings[UNDONE] = sorted({*settings.get(UNDONE, []), turn})
    store.update_thread(thread_id, settings=settings)
    store.append_response(thread_id, f"Undo turn {turn}", summary)
    return summary


def undo_here(shell: Any, store: Any, thread_id: int, turn: int | None = None, *,
              force: bool = False) -> str:  # fmt: skip
    """:func:`undo_turn` on the notebook the magics of ``shell`` change (``ChatMagics.notebook``,
    else the page's, else the session's file)."""
    file = str(getattr(loaded_in(shell), "notebook", "") or "") if shell is not None else ""
    return undo_turn(store, LiveNotebook(file=file), thread_id, turn, force=force)


def _undo_one(live: dict[str, dict[str, Any]], entry: dict[str, Any],
              force: bool) -> tuple[dict[str, Any] | None, str | None]:  # fmt: skip
    """The change that undoes ``entry`` on the cells ``live`` (by id), or why it is kept;
    (None, None) when there is nothing to undo (a run's outputs stay)."""
    op, cell_id = entry.get("op"), str(entry.get("cell_id"))
    before = entry.get("before") or {}
    cell = live.get(cell_id)
    if op in ("execute", "outputs"):
        return None, None
    if op == "delete":
        if cell is not None:
            return None, f"{cell_id} (it is back already)"
        return {"op": "insert", "cell_id": cell_id, "index": before.get("index"),
                "source": before.get("source", ""), "cell_type": before.get("cell_type")}, None
    if cell is None:
        return None, f"{cell_id} (it is no longer in the notebook)"
    now = source_of(cell)
    if op in ("insert", "edit") and now != entry.get("source") and not force:
        return None, f"{cell_id} (you changed it since; %chat --undo {{turn}} --force puts it back)"
    undone = {"insert": {"op": "delete"},
              "edit": {"op": "edit", "source": before.get("source", "")},
              "move": {"op": "move", "index": before.get("index")}}.get(str(op))
    if undone is None:
        return None, f"{cell_id} (an unknown change {op!r})"
    return {**undone, "cell_id": cell_id, "expected": now}, None


def _summary(turn: int, restored: list[str], kept: list[str]) -> str:
    lines = [f"Turn {turn}'s changes to the notebook were undone."]
    if restored:
        lines.append(f"Put back: {', '.join(restored)}.")
    if kept:
        lines.append("Kept as they are: " + "; ".join(k.replace("{turn}", str(turn))
                                                       for k in kept) + ".")  # fmt: skip
    return " ".join(lines)
