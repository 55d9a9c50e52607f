"""The tutorials run offline: their kernels get the demo model and a fresh store.

Kernels inherit this process's environment when nbval starts them (fixtures do
not run for nbval's items), so it is set before each notebook's kernel starts:
every notebook begins with an empty store, as it does for a new user.
"""

from __future__ import annotations

import os
import tempfile

import pytest

TUTORIAL_ENV = {
    "NBCHAT_BASE_URL": "demo",
    "NBCHAT_USER": "tutorial",
    "NBCHAT_LOCAL_MODEL": "off",
}
_started: set[str] = set()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    notebook = str(item.path)
    if item.path.suffix == ".ipynb" and notebook not in _started:
        _started.add(notebook)
        os.environ.update(TUTORIAL_ENV)
        os.environ["NBCHAT_STORE"] = tempfile.mkdtemp(prefix="nbchat-tutorial-")
        os.environ["NBCHAT_AGENT_TOKENS"] = tempfile.mkdtemp(prefix="nbchat-tutorial-tokens-")
        # The MCP tutorial adds a server to the user's mcp.json: here, a throwaway one.
        os.environ["JUPYTER_CONFIG_DIR"] = tempfile.mkdtemp(prefix="nbchat-tutorial-config-")
