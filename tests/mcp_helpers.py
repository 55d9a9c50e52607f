"""MCP servers for the tests: the SDK-based one in nbchat.testing, and the npm reference servers.

The npm servers need ``NBCHAT_TEST_MCP_NODE_MODULES``, the ``node_modules``
folder ``.ci/run`` installs them into. Without it their tests skip with one
reason; under ``CI=true`` they fail instead, so CI never passes without them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
# Read at import: the autouse fixture clears every NBCHAT_* variable for each test.
NODE_MODULES = os.environ.get("NBCHAT_TEST_MCP_NODE_MODULES", "")
NO_NPM = (
    "no npm MCP servers: set NBCHAT_TEST_MCP_NODE_MODULES "
    "(.ci/run installs @modelcontextprotocol/server-everything and server-filesystem)"
)


def server_entry(**entry: Any) -> dict[str, Any]:
    """A stdio entry for ``python -m nbchat.testing.mcp_server`` (this worktree's nbchat)."""
    args = ["-m", "nbchat.testing.mcp_server", *entry.pop("extra_args", [])]
    env = {"PYTHONPATH": SRC, **entry.pop("env", {})}
    return {"command": sys.executable, "args": args, "env": env, **entry}


def write_config(folder: Path, servers: dict[str, Any], **extra: Any) -> Path:
    """Write ``folder/nbchat/mcp.json`` with these servers."""
    path = folder / "nbchat" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers, **extra}), encoding="utf-8")
    return path


def npm_server(package: str, *args: str) -> dict[str, Any]:
    """A stdio entry for an npm reference server installed by .ci/run."""
    if not NODE_MODULES:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {NO_NPM}")
        pytest.skip(NO_NPM)
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    folder = Path(NODE_MODULES) / "@modelcontextprotocol" / package
    assert (folder / "package.json").is_file(), f"{folder} is missing; rerun .ci/run"
    (main,) = json.loads((folder / "package.json").read_text())["bin"].values()
    return {"command": node, "args": [str(folder / main), *args]}
