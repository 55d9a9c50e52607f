"""What nbchat's other processes run inside a notebook's kernel: this module, nothing else.

The Jupyter Server extension calls :func:`variables_text` and
:func:`describe_text` for outside agents' reads and code suggestions, and
:func:`wake` when an agent's call waits for the notebook; the lab extension
calls :func:`open_from_lab` to open the chat panel beside it. Each is sent as
the expression :func:`nbchat.base._across.kernel_call` builds, silently and
outside the notebook's history. Each imports only what it uses.
"""

from __future__ import annotations

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

    open_panel(path)
