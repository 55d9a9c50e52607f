"""What a ``%chat`` question takes from the notebook besides its words.

The ``@name`` descriptions and the last figure (``--figure``), the last
exception with its cell (``--fix``) or its traceback (``--error``), the
``{name}`` values put into the text, the project instructions
(``ChatMagics.instructions``), and the answer's code put into the next cell
(``--code``). Each reads the shell it is given and nothing else.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from ...base import markup
from ...base._notices import notify
from ...base._secrets import cut_scrubbed
from ...context._interpolate import interpolate, resolve

ERROR_PROMPT = (
    "I ran code in a Jupyter notebook and got the error below. Explain briefly what went "
    "wrong and how to fix it.\n\n{traceback}"
)
MAX_TRACEBACK_CHARS = 8000
FIX_QUESTION = "Why does this fail, and how do I fix it?"
FIX_REQUEST = "Give the whole corrected cell as one ```python code block."
_FENCE = re.compile(r"^```[^\n`]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def context_budget(opts: Any, default: int) -> int:
    """The tokens each description may take: ``--context-budget``, else ``default``."""
    budget = opts.context_budget if opts.context_budget is not None else default
    if budget < 1:
        raise UsageError(f"--context-budget is a number of tokens above 0, got {budget}")
    return int(budget)


def attached_context(shell: Any, question: str, opts: Any, default_budget: int) -> list[Any]:
    """The objects the question mentions with ``@name``, the cells it mentions (``@notebook``,
    ``@cell N``, ``@cells A-B``), and the last figure (--figure)."""
    from ._notebook_context import notebook_context

    cells = notebook_context(shell, question, opts)
    if shell is None or ("@" not in question and not opts.figure):
        return cells  # nothing mentioned: the notebook's tools are not even imported
    from ...context import describe
    from ..notebook.tools import Notebook

    budget = context_budget(opts, default_budget)
    notebook = Notebook(shell)
    attached = notebook.attach(question, budget)
    if attached.unresolved:
        notify(f"not defined here, no context attached: {', '.join(attached.unresolved)}")
    items = [*attached.items, *cells]
    if opts.figure:
        figure = notebook.last_figure()
        if figure is None:
            raise UsageError("no figure to attach: draw one first (matplotlib), then --figure")
        items.append(describe(figure, "figure", budget=budget, formatter=notebook.formatter))
    return items


def fix_context(shell: Any, opts: Any, default_budget: int) -> Any:
    """The last exception with its failing cell, as context for ``--fix``."""
    from ..notebook.tools import Notebook

    error = Notebook(shell).last_error(context_budget(opts, default_budget)) if shell else None
    if error is None:
        raise UsageError(
            "no exception in this session yet; run the failing cell, then %chat --fix"
        )
    return error


def fix_question(text: str) -> str:
    """The ``--fix`` question: the person's words (or the default) and the request for code."""
    return f"{text or FIX_QUESTION}\n\n{FIX_REQUEST}"


def error_question(shell: Any, text: str, opts: Any) -> str:
    """The ``--error`` question: the last exception's traceback, then the person's words."""
    error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if error is None:
        raise UsageError("no exception in this session yet; run the failing cell, "
                         "then %chat --error")
    tb = getattr(sys, "last_traceback", None) or error.__traceback__
    lines = "".join(traceback.format_exception(type(error), error, tb)).rstrip()
    question = ERROR_PROMPT.format(traceback=markup.fence(
        cut_scrubbed(lines, lambda whole: whole[-MAX_TRACEBACK_CHARS:])))
    if text:
        question += "\n\n" + (text if opts.no_interpolate else interpolated(shell, text))
    return question


def interpolated(shell: Any, text: str) -> str:
    """``text`` with its ``{name}`` replaced by the notebook's values; a note names the rest."""
    done = interpolate(text, shell.user_ns if shell is not None else {})
    if done.unresolved:
        names = ", ".join(done.unresolved)
        notify(f"not defined here, sent as typed: {names} "
               f"(--no-interpolate sends all braces as typed)")
    return done.text


def code_to_next_cell(shell: Any, text: str) -> None:
    """Put the first code block of ``text`` into a new cell below (``--code``).

    Characters that draw nothing or reorder the text go in as their escapes,
    and a note names them: the cell holds what the editor draws.
    """
    match = _FENCE.search(text)
    if match is None:
        notify("the answer has no code block; no cell added")
    elif shell is not None:
        code = match.group(1).rstrip("\n")
        warning = markup.hidden_summary(code, lead="The answer's code holds",
                                        escaped=True)
        if warning:
            notify(f"{markup.MARK_PROBLEM} {warning}")
        shell.set_next_input(markup.escape_hidden(code), replace=False)


def project_instructions(setting: str | None) -> Any:
    """The project instructions for this question, when the person opted in."""
    from ...base.config import ENV_INSTRUCTIONS

    setting = setting or os.environ.get(ENV_INSTRUCTIONS, "").strip().lower()
    if setting != "auto":
        return None
    from ...context.instructions import find_instructions

    notebook = os.environ.get("JPY_SESSION_NAME", "")
    folder = Path(notebook).parent if os.path.isabs(notebook) else Path.cwd()
    return find_instructions(folder)


def user_history(shell: Any, name: str, system: str | None) -> Any:
    """The ChatHistory the notebook's variable ``name`` holds (for ``-H``); ``system`` on a copy."""
    from ...engine.history import ChatHistory

    found, value = resolve(name, shell.user_ns if shell is not None else {})
    if not found:
        raise UsageError(f"-H {name}: no such variable in this notebook; "
                         f"make one with {name} = nbchat.ChatHistory()")
    if not isinstance(value, ChatHistory):
        raise UsageError(f"-H {name}: {name} is a {type(value).__name__}, not a "
                         f"ChatHistory; see chat.history(thread_id) or nbchat.ChatHistory()")
    if system is not None:
        value = value.copy()
        value.system = system
    return value
