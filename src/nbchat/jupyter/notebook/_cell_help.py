"""Help where the person is: *Fix* and *Explain* under a cell's error, and a question asked in
the cell (Ctrl/⌘+I); each goes to the side panel as a turn of its thread.

The lab extension draws the two buttons under a traceback (in the page only,
never in the saved notebook) and, on a click, runs :func:`help_with_error`
silently in the kernel with the cell's id, source and error as the page holds
them. *Explain* asks in the side panel's thread, without the notebook tools,
with the cell and its traceback as context. *Fix* asks the notebook agent, in
the thread's mode (``ask`` unless it is in ``plan`` or ``accept-edits``), to
propose the corrected cell with ``edit_cell`` (or the earlier cell the cause is
in), with the cell, the traceback and the variables the cell names as context,
as ``%chat --fix`` has them: the change is a proposal that waits for a yes.
Where no page can help, ``%chat --fix`` and ``%chat --explain`` do the same.

:func:`ask_in_cell` is the one-line box on a cell: the person's question about
the cell (or the lines selected in it), asked of the notebook agent with the
cell as context, answered by a proposal on that cell alone.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from typing import Any

from ...base._secrets import cut_scrubbed
from ...base.content import ContextItem, fit
from ...base.errors import InputError
from ...base.markup import fence
from ...context.cell_tools import MODES
from ...context.notebook import output_text

__all__ = ["ACTIONS", "ask_in_cell", "cell_question", "error_context", "fix_question",
           "help_with_error"]

ACTIONS = ("fix", "explain")
EXPLAIN = "Explain briefly what went wrong in this cell and how to fix it."
MAX_VARIABLES = 3
MAX_QUESTION = 4000  # characters of a question typed in a cell's box
BUDGET = 2000  # tokens of the error and its cell


def fix_question(cell_id: str) -> str:
    """The Fix question: a proposal on the failing cell (or the earlier one the cause is in)."""
    return (f"Fix cell {cell_id}: it raised the error in the context. Propose the corrected "
            f"cell with edit_cell (cell_id {cell_id!r}); if the cause is in an earlier cell, "
            "propose the change there instead. Read the notebook first if you need to; do "
            "not run anything.")  # fmt: skip


def error_context(cell_id: str, source: str, error: dict[str, Any]) -> ContextItem:
    """The error as the page shows it and the cell's source, scrubbed, then bounded."""
    lines = [str(line) for line in error.get("traceback") or []]
    shown = output_text({"output_type": "error", "ename": str(error.get("ename", "")),
                         "evalue": str(error.get("evalue", "")), "traceback": lines})  # fmt: skip
    text = f"{shown}\n\nthe cell that raised it (cell {cell_id}):\n{fence(source, 'python')}"
    return ContextItem("error", str(error.get("ename") or "Error")[:80],
                       cut_scrubbed(text, lambda whole: fit(whole, BUDGET)))  # fmt: skip


def named_variables(source: str, namespace: dict[str, Any]) -> list[str]:
    """The data the cell names (no module, function or class), in order, at most a few."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = sorted((node.lineno, node.col_offset, node.id) for node in ast.walk(tree)
                   if isinstance(node, ast.Name))  # fmt: skip
    names: list[str] = []
    for _, _, name in found:
        if name in names or name not in namespace or name.startswith("_") or \
                hasattr(builtins, name):  # fmt: skip
            continue
        value = namespace[name]
        if not (inspect.ismodule(value) or callable(value)):
            names.append(name)
    return names[:MAX_VARIABLES]


def cell_question(question: str, cell_id: str, selection: str) -> str:
    """The question asked in a cell's box: answered by a proposal on that cell only."""
    part = "the selected lines of the cell (in the context) and only them" if selection else \
        "the cell"  # fmt: skip
    return (f"{question}\n\nThis is about cell {cell_id}. Answer by proposing the change with "
            f"edit_cell (cell_id {cell_id!r}), changing {part}; keep the rest of the cell as "
            "it is, and change no other cell. Do not run anything.")  # fmt: skip


def cell_context(cell_id: str, source: str, selection: str) -> ContextItem:
    """The cell's source (and the selection in it), scrubbed, then bounded."""
    text = f"cell {cell_id}:\n{fence(source, 'python')}"
    if selection:
        text += f"\n\nthe selected lines:\n{fence(selection, 'python')}"
    return ContextItem("cell", cell_id[:80], cut_scrubbed(text, lambda whole: fit(whole, BUDGET)))


def ask_in_cell(path: str, cell_id: str, source: str, selection: str, question: str) -> None:
    """Ask ``question`` about the cell in the side panel; the answer, a proposal on the cell."""
    if not all(isinstance(v, str) for v in (cell_id, source, selection, question)):
        raise InputError("the cell's question came without its cell, source or selection")
    question = " ".join(question.split())[:MAX_QUESTION]
    if not question:
        raise InputError("the question is empty; type what the cell should do, then Enter")
    panel = _side_panel(path)
    panel.ask(cell_question(question, cell_id, selection),
              context=[cell_context(cell_id, source, selection)], mode=_agent_mode(panel))


def _side_panel(path: str) -> Any:
    from IPython import get_ipython

    from .._loaded import chat_of
    from ..panel._side import open_from_lab

    chat_of(get_ipython())  # loads the magics, whose settings the panel asks with
    return open_from_lab(path, focus=False)  # the keyboard stays with the cell


def _agent_mode(panel: Any) -> str:
    """The panel's notebook-agent mode, else the thread's, else ``ask``."""
    saved = None if panel.thread_id is None else \
        (panel.chat.store.get(panel.thread_id).settings or {}).get("mode")  # fmt: skip
    return str(panel.mode if panel.mode in MODES else saved if saved in MODES else "ask")


def help_with_error(action: str, path: str, cell_id: str, source: str,
                    error: dict[str, Any]) -> None:  # fmt: skip
    """Explain the cell's error, or propose its fix, in the side panel (as the page asked)."""
    if action not in ACTIONS:
        raise InputError(f"{action!r} is not one of {', '.join(ACTIONS)}")
    if not isinstance(error, dict) or not isinstance(source, str):
        raise InputError("the cell's error did not come with its source and traceback")
    from IPython import get_ipython

    from .tools import Notebook

    panel = _side_panel(path)
    context = [error_context(cell_id, source, error)]
    if action == "explain":
        panel.ask(EXPLAIN, context=context, mode="chat")
        return
    reader = Notebook(get_ipython())
    namespace = reader.shell.user_ns
    context += [reader.describe(name) for name in named_variables(source, namespace)]
    panel.ask(fix_question(cell_id), context=context, mode=_agent_mode(panel))
