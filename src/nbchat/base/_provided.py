"""Where this kernel's Jupyter server announces the endpoints the administrator provides.

nbchat's Jupyter Server extension writes what it provides —
names, wire formats, models, never a key — with a token of its own to
``<jupyter runtime dir>/nbchat-server-<pid>.json`` (readable by the user
only). A kernel finds its server by ``JPY_PARENT_PID`` and reaches a
provided endpoint through the server's proxy route, sending that token: the
administrator's key stays in the server and reaches no kernel.
:func:`nbchat.base.connections.provided` reads it as connections.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["PROXY_ROUTE", "announcement", "announcement_path"]

PROXY_ROUTE = "nbchat/provided/"
ENV_KERNEL_PARENT = "JPY_PARENT_PID"


def announcement_path(pid: int | None = None) -> Path:
    """Where the server of process ``pid`` (this kernel's parent) announces what it provides."""
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir()) / f"nbchat-server-{pid or os.getpid()}.json"


def announcement() -> dict[str, Any] | None:
    """What this kernel's server announced, as written; None outside such a server."""
    parent = os.environ.get(ENV_KERNEL_PARENT, "").strip()
    if not parent.isdigit():
        return None
    try:
        data = json.loads(announcement_path(int(parent)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no such server, or it is writing: nothing provided
    if not isinstance(data, dict) or not isinstance(data.get("proxy"), str):
        return None
    return data
