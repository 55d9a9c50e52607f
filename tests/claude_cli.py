"""The real Claude Code CLI, run offline against the scripted server, with MCP servers.

``run_claude`` runs ``claude -p`` once in a throwaway home: the scripted
server is its model, the MCP servers given are the only ones it loads, and
nothing else is reached. What follows was found with
``@anthropic-ai/claude-code`` 2.1.197 on Linux x64.

Install
    ``npm install --no-audit --no-fund --prefix .venv/agent-clis
    @anthropic-ai/claude-code`` (``.ci/run`` does). The native binary comes
    from npm too, as the optional dependency
    ``@anthropic-ai/claude-code-linux-x64`` (245 MB); the postinstall
    (``install.cjs``) links it over ``bin/claude.exe``, downloading nothing.
    npm 11 warns that the postinstall is "not yet covered by allowScripts"
    but runs it; with ``--ignore-scripts`` ``bin/claude.exe`` stays a stub.
    ``NBCHAT_TEST_AGENT_CLIS`` names that prefix (``.ci/run`` exports it).
    Two ``npm install`` runs into one prefix at once break each other
    (``spawn sh ENOENT``): run them one after the other.

Command (``claude --version`` alone takes 0.1 s)::

    claude -p PROMPT --model nbchat-demo --tools "" --output-format json
        --mcp-config CONFIG.json --strict-mcp-config --no-session-persistence
        --allowedTools mcp__SERVER__TOOL --debug-file DEBUG.log

    HOME=TMP CLAUDE_CONFIG_DIR=TMP/.claude  (cwd TMP: no CLAUDE.md, no project settings)
    ANTHROPIC_BASE_URL=http://127.0.0.1:PORT  ANTHROPIC_API_KEY=…  (sent as ``x-api-key``)
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1  DISABLE_AUTOUPDATER=1  MCP_CONNECTION_NONBLOCKING=0

``CONFIG.json`` is ``{"mcpServers": {NAME: ENTRY}}``, an entry either
``{"type": "http", "url": …, "headers": {"Authorization": "Bearer …"}}`` or
``{"command": …, "args": […], "env": {…}}`` (stdio). No login, no onboarding:
with ``-p`` and an API key none is asked for. stdin is closed (an idle open
pipe did not hold ``-p`` up either).

Traffic
    Under ``strace`` a run connects to the scripted server only. Without
    ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` it also looks up
    ``api.anthropic.com`` and first asks the model for a session title (a
    request with no tools, a "Generate a concise, sentence-case title" system
    prompt and ``output_config.format`` a JSON schema), which a script
    without ``when=`` would answer by mistake. With it, a run sends only
    ``POST /v1/messages?beta=true``, streamed: one per model turn. No
    ``/v1/messages/count_tokens``, no ``GET /v1/models`` (``--model`` is not
    checked), no haiku call.

The requests
    ``thinking: {"type": "adaptive"}``, ``max_tokens`` 32000, betas in
    ``anthropic-beta``; the system prompt is a list of blocks; the user's
    prompt is the last text block of the first user message, after a
    ``<system-reminder>`` block. MCP servers' ``instructions`` come as a
    mid-conversation ``{"role": "system"}`` message right after that user
    message (the scripted server accepts one there, as the API does). So the
    *last* message of the first request is that system message: a
    ``Reply(when="…")`` looking for the prompt does not match; script the
    first reply with ``times=1`` or a callable ``when``.
    ``--tools ""`` leaves out the 24 built-in tools (and the "agent types"
    system message the Agent tool brings), so ``tools`` holds the MCP tools
    alone.

Tool names
    ``mcp__<server>__<tool>``, e.g. ``mcp__nbtest__write_note``.

Thinking
    With thinking on, the scripted server (as the API) wants the assistant
    turn of a tool loop back with its signed thinking block first; a scripted
    tool call without ``reasoning=`` gets a 400 on the follow-up. Give the
    tool-calling reply ``reasoning="…"``, or pass
    ``env={"MAX_THINKING_TOKENS": "0"}``, which drops ``thinking``.

Permissions
    ``--allowedTools mcp__server__tool`` (or ``mcp__server`` for all its
    tools) lets the call run unattended. Without it the call is denied, even
    for a tool with ``readOnlyHint``, and so it is under ``--permission-mode``
    ``dontAsk``, ``acceptEdits`` and ``auto``: the follow-up's ``tool_result`` is
    ``is_error`` with "Claude requested permissions to use …", the run ends
    0, and ``permission_denials`` in the JSON lists it.
    ``bypassPermissions`` (and ``--dangerously-skip-permissions``) refuse to
    start as root unless ``IS_SANDBOX=1``.

Results
    The follow-up request's last message is a user turn of one
    ``tool_result`` block: ``tool_use_id`` the scripted call's id, content the
    MCP result as text (a structured result as JSON,
    ``{"result":"wrote 5 characters"}``).

Gotchas
    An MCP server that fails to connect is dropped and the run still ends 0:
    check that its tool is in the ``tools`` of the request the scripted
    server received, never the exit code. A wrong bearer token is such a
    failure: one POST, a 401, "Server rejected the configured Authorization
    header" in the debug log (no OAuth discovery when ``headers`` has
    ``Authorization``), no tools, and a scripted call to the missing tool
    still gets its follow-up request (an error result). ``--output-format json`` gives one
    object: ``result`` (the final text), ``is_error``, ``num_turns``,
    ``permission_denials``.

Timings (a run with one tool call, two model requests): 0.85 s with the HTTP
stand-in already listening; 1.5 s over stdio, 0.7 to 0.9 s of it the Python
MCP server starting; 0.6 s with no MCP server. Up to twice that on a loaded
machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# Read at import: the autouse fixture clears every NBCHAT_* variable for each test.
AGENT_CLIS = os.environ.get("NBCHAT_TEST_AGENT_CLIS", "")
MODEL = "nbchat-demo"
API_KEY = "sk-ant-claude-cli-test"
NOT_INSTALLED = (
    "Claude Code is not installed: set NBCHAT_TEST_AGENT_CLIS to the npm prefix .ci/run "
    "installs @anthropic-ai/claude-code into (.venv/agent-clis)"
)
_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no title request, no api.anthropic.com
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "MCP_CONNECTION_NONBLOCKING": "0",  # wait for the MCP servers before the first request
}


@dataclass(frozen=True)
class CompletedRun:
    """One ``claude -p`` run: what it printed, how it ended, how long it took."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    debug_log: str  # Claude Code's --debug-file: MCP connections, tool calls, API errors

    @property
    def result(self) -> dict[str, Any]:
        """The ``--output-format json`` object (``result``, ``is_error``, ``num_turns``, …)."""
        return json.loads(self.stdout)

    @property
    def text(self) -> str:
        """The final answer's text."""
        return str(self.result.get("result", ""))


def claude_binary() -> Path | None:
    """The ``claude`` executable: under ``NBCHAT_TEST_AGENT_CLIS``, this checkout's
    ``.venv/agent-clis``, or on PATH; None when there is none."""
    folders = [Path(AGENT_CLIS)] if AGENT_CLIS else [REPO / ".venv" / "agent-clis"]
    for folder in folders:
        for candidate in (folder / "node_modules" / ".bin" / "claude", folder / ".bin" / "claude"):
            if os.access(candidate, os.X_OK):
                return candidate
    if AGENT_CLIS:
        return None  # asked for that install: another claude will not do
    found = shutil.which("claude")
    return Path(found) if found else None


def claude_available() -> bool:
    """Whether the Claude Code CLI can be run."""
    return claude_binary() is not None


def require_claude() -> Path:
    """The binary; skip the test when Claude Code is not installed and nobody asked for it,
    fail when ``NBCHAT_TEST_AGENT_CLIS`` (or ``CI=true``) says it should be."""
    binary = claude_binary()
    if binary is not None:
        return binary
    if AGENT_CLIS:
        pytest.fail(f"NBCHAT_TEST_AGENT_CLIS={AGENT_CLIS} holds no node_modules/.bin/claude")
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {NOT_INSTALLED}")
    pytest.skip(NOT_INSTALLED)


def run_claude(
    prompt: str,
    *,
    model_url: str,
    mcp_servers: Mapping[str, Mapping[str, Any]],
    allowed_tools: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 90.0,
    model: str = MODEL,
    api_key: str = API_KEY,
) -> CompletedRun:
    """Run ``claude -p prompt`` once, offline, in a fresh home, and wait for it.

    Parameters
    ----------
    model_url
        The scripted server's Anthropic URL (``ScriptedServer.anthropic_url``).
    mcp_servers
        ``mcpServers`` entries by name, in Claude Code's shape (see the module
        docstring); they are the only MCP servers it loads.
    allowed_tools
        Tool names it may call without asking (``mcp__server__tool``).
    env
        Variables added to the minimal environment the CLI gets (nothing of
        this process's own, so no real key or config leaks in).
    """
    binary = require_claude()
    with tempfile.TemporaryDirectory(prefix="nbchat-claude-") as folder:
        home = Path(folder)
        config = home / "mcp.json"
        config.write_text(json.dumps({"mcpServers": dict(mcp_servers)}), encoding="utf-8")
        debug = home / "debug.log"
        args = [
            str(binary), "-p", prompt, "--model", model,
            "--tools", "",  # no built-in tools: the request offers the MCP tools alone
            "--output-format", "json", "--no-session-persistence",
            "--mcp-config", str(config), "--strict-mcp-config", "--debug-file", str(debug),
        ]  # fmt: skip
        allowed = list(allowed_tools)
        if allowed:
            args += ["--allowedTools", ",".join(allowed)]
        variables = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": api_key,
            # Were a side request to ask for the small fast model, it would get one the
            # scripted server knows rather than a 404.
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
            **_OFFLINE,
            **(env or {}),
        }
        started = time.monotonic()
        stdout, stderr, code = _run(args, variables, home, timeout)
        seconds = time.monotonic() - started
        log = debug.read_text(encoding="utf-8", errors="replace") if debug.exists() else ""
    return CompletedRun(args, code, stdout, stderr, seconds, log)


def _run(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[str, str, int]:
    """Run in its own process group, so a timeout also ends the MCP servers it started."""
    process = subprocess.Popen(
        args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"claude -p did not end within {timeout} s\nstdout: {stdout}\nstderr: {stderr}"
        ) from None
    return stdout, stderr, process.returncode
