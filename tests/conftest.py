"""Every test gets its own store and a clean nbchat environment."""

from __future__ import annotations

import os

import pytest

from notebook_helpers import nb  # noqa: F401  (a saved notebook the session names)
from shell_helpers import ip, run, server  # noqa: F401  (fixtures for the magics tests)

pytest_plugins = ["store_backends"]  # the store fixtures for both backends

_CLEARED = (
    "OPENAI_API_KEY", "JUPYTERHUB_USER", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN", "GEMINI_API_KEY", "OPENAI_API_VERSION",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _isolated_environment(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
):
    before = dict(os.environ)  # a test may set variables itself (%env does): all go at the end
    for var in list(os.environ):
        if var.startswith("NBCHAT_") or var in _CLEARED:
            monkeypatch.delenv(var)
    monkeypatch.setenv("NBCHAT_STORE", str(tmp_path_factory.mktemp("store")))
    monkeypatch.setenv("NBCHAT_USER", "tester")
    monkeypatch.setenv("NBCHAT_AGENT_TOKENS", str(tmp_path_factory.mktemp("agent-tokens")))
    # MCP servers come from mcp.json files only: none of the machine's, unless a test writes one.
    config = tmp_path_factory.mktemp("jupyter-config")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    monkeypatch.setenv("NBCHAT_MCP_ADMIN_CONFIG", str(config / "admin-mcp.json"))
    monkeypatch.setenv("NBCHAT_ACP_ADMIN_CONFIG", str(config / "admin-agents.json"))
    # Keys go to a file of the test's own, never to the machine's keyring.
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path_factory.mktemp("jupyter-data")))
    monkeypatch.setenv("NBCHAT_KEYS", "file")
    yield
    for var in set(os.environ) - set(before):
        del os.environ[var]
    os.environ.update(before)
