"""Where this kernel's notebook is served: nbchat's MCP endpoint, and the notebook's path there.

Read from the Jupyter servers running on this machine (their runtime files)
and the session name Jupyter gives the kernel (``JPY_SESSION_NAME``); nothing
when the kernel was started otherwise (nbclient, a terminal).
"""

from __future__ import annotations

import os
from typing import Any

from ...base._across import MCP_ROUTE


def endpoint_url() -> str:
    """The MCP endpoint of the Jupyter server this kernel's notebook is served by, if known."""
    servers = _servers()
    found = _server_of_notebook(servers)
    if found is not None:
        return str(found.get("url", "")).rstrip("/") + "/" + MCP_ROUTE
    if len(servers) == 1:
        return str(servers[0].get("url", "")).rstrip("/") + "/" + MCP_ROUTE
    return ""


def notebook_scope() -> str | None:
    """This notebook's path under its server's root (what a token for it may touch)."""
    found = _server_of_notebook(_servers())
    if found is None:
        return None
    root = str(found.get("root_dir", "")).rstrip("/")
    return os.environ.get("JPY_SESSION_NAME", "")[len(root) + 1:]


def _servers() -> list[dict[str, Any]]:
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return []
    return list(list_running_servers())


def _server_of_notebook(servers: list[dict[str, Any]]) -> dict[str, Any] | None:
    session = os.environ.get("JPY_SESSION_NAME", "")
    for server in servers:
        root = str(server.get("root_dir", "")).rstrip("/")
        if session and root and session.startswith(root + "/"):
            return server
    return None
