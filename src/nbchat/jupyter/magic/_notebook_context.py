"""The notebook as context for ``%chat``: ``@notebook``, ``@cell N``, ``@cells A-B``, and the
``ChatMagics.notebook_context`` setting that attaches ``@notebook`` to every question.

The cells come from the page's live copy (the notebook open in JupyterLab on
this kernel), else the session's saved file, or ``ChatMagics.notebook``; read
from a file, the context says it is the file as last saved. With no
notebook at all, one line says so and nothing is attached.
"""

from __future__ import annotations

from typing import Any

from ...base._notices import notify
from ...context._notebook_mentions import NotebookMention, find_notebook_mentions
from .._loaded import loaded_in

__all__ = ["NOTEBOOK_BUDGET", "notebook_context"]

NOTEBOOK_BUDGET = 8000  # tokens of the notebook's cells, unless --context-budget says
CHARS_PER_TOKEN = 4


def notebook_context(shell: Any, question: str, opts: Any = None) -> list[Any]:
    """The cells the question mentions (or every cell, with the setting on), as context items;
    :class:`~nbchat.base.errors.InputError` for a range written wrong or past the end."""
    loaded = loaded_in(shell) if shell is not None else None
    always = bool(getattr(loaded, "notebook_context", False))
    if "@" not in question and not always:
        return []
    mentions = find_notebook_mentions(question)  # InputError: a range written wrong
    if always and not any(m.first is None for m in mentions):
        mentions = (NotebookMention(None, None, 0, 0),)  # the whole notebook covers the rest
    elif any(m.first is None for m in mentions):
        mentions = tuple(m for m in mentions if m.first is None)
    if not mentions:
        return []
    from ...context.cell_tools import CannotEdit
    from ...context.notebook import notebook_items
    from ..notebook._cells import LiveNotebook

    live = LiveNotebook(file=str(getattr(loaded, "notebook", "") or ""))
    live.attach()  # the page's live cells, for the questions after this one
    try:
        notebook = live.notebook()
    except CannotEdit as error:
        notify(f"@notebook: no notebook to attach here ({error}); open it in JupyterLab, or "
               "name its file with %config ChatMagics.notebook")  # fmt: skip
        return []
    where = live.where()
    if where.startswith("the saved notebook"):
        where += " as last saved, without unsaved changes"
    budget = opts.context_budget if getattr(opts, "context_budget", None) else NOTEBOOK_BUDGET
    chars = int(budget) * CHARS_PER_TOKEN
    items: list[Any] = []
    for m in mentions:  # InputError: a cell past the notebook's end
        items += notebook_items(notebook, where, m.first, m.last, chars=chars, label=m.label)
    return items
