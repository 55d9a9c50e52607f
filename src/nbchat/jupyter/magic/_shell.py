"""What the magic reads of, or leaves on, the IPython shell it runs in.

Whether the running cell ends with a bare ``%chat`` (whose value IPython would
echo), the environment a Chat was built from, and dropping an API key from
``%config`` once the cell that set it has run.
"""

from __future__ import annotations

import ast
import os
from typing import Any


def forget_config_key(shell: Any) -> None:
    """Drop ``ChatMagics.api_key`` from every configurable's config once the cell has run.

    ``%config`` merges the whole statement into each configurable after this
    class has refused it, so the copies can only be removed afterwards.
    """
    if shell is None:
        return

    def forget(*_: Any) -> None:
        for owner in (shell, *shell.configurables):
            section = owner.config.get("ChatMagics")
            if section is not None:
                section.pop("api_key", None)
        shell.events.unregister("post_run_cell", forget)

    shell.events.register("post_run_cell", forget)


def echoed(shell: Any) -> bool:
    """Whether the running cell ends with a bare %chat, whose value IPython would echo."""
    running = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    info = getattr(running, "info", None)
    if info is None or info.silent or not isinstance(info.raw_cell, str):
        return False
    try:
        tree = ast.parse(shell.transform_cell(info.raw_cell))
    except (SyntaxError, ValueError):
        return False
    last = tree.body[-1] if tree.body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
        return False
    call = last.value
    return (
        isinstance(call.func, ast.Attribute)
        and call.func.attr in ("run_line_magic", "run_cell_magic")
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and call.args[0].value == "chat"
    )


def environment() -> tuple[tuple[str, str], ...]:
    """The environment variables a Chat reads, to notice ``%env`` changes, and the connections
    file's and kept keys' stamps, to notice an endpoint connected meanwhile."""
    from ...base.connections import stamp

    names = ("OPENAI_API_KEY", "JUPYTERHUB_USER")
    return (*sorted((k, v) for k, v in os.environ.items() if k.startswith("NBCHAT_")
                    or k in names), ("connections", stamp()))  # fmt: skip
