"""What nbchat's other processes run inside a notebook's kernel: this module, nothing else.

The Jupyter Server extension calls :func:`variables_text` and
:func:`describe_text` for outside agents' reads and code suggestions, and
:func:`wake` when an agent's call waits for the notebook; the lab extension
calls :func:`open_from_lab` to open the chat panel beside it, and
:func:`help_with_error` for the Fix and Explain buttons under a traceback,
:func:`ask_in_cell` for the question typed in a cell's box (Ctrl/⌘+I). Each is sent as
the expression :func:`nbchat.base._across.kernel_call` builds, silently and
outside the notebook's history. Each imports only what it uses.
"""

from __future__ import annotations

from typing import Any

from ..base._across import KERNEL_CALLS

__all__ = list(KERNEL_CALLS)


def variables_text() -> str:
    """The notebook's variables, one a line, no values; nothing the notebook defined runs."""
    from .agents._kernel import variables_text as read

    return read()


def describe_text(name: str) -> str:
    """``name`` described as ``@name`` would be, running no code of the notebook's own."""
    from .agents._kernel import describe_text as describe

    return describe(name)


def wake(path: str = "", paths: list[str] | None = None) -> None:
    """An agent's call waits for ``path``; ``paths`` are all this kernel's notebooks."""
    from .agents._kernel import wake as show

    show(path, paths)


def open_from_lab(path: str = "") -> None:
    """Open the chat panel in JupyterLab's side area for the notebook at ``path``."""
    from .panel._side import open_from_lab as open_panel

    open_panel(path)  # the panel itself stays in the kernel


def help_with_error(action: str, path: str, cell_id: str, source: str,
                    error: dict[str, Any]) -> None:  # fmt: skip
    """Fix (a proposal) or Explain a cell's error, in the side panel, as the page asked."""
    from .notebook._cell_help import help_with_error as help_

    help_(action, path, cell_id, source, error)


def ask_in_cell(path: str, cell_id: str, source: str, selection: str, question: str) -> None:
    """Ask about a cell (or its selected lines) in the side panel; the answer, a proposal."""
    from .notebook._cell_help import ask_in_cell as ask

    ask(path, cell_id, source, selection, question)
