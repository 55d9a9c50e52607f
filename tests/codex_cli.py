"""The real Codex CLI (``@openai/codex``), run offline against the scripted server and MCP servers.

``.ci/run`` installs it with ``npm install --prefix .venv/agent-clis @openai/codex``
(a Node launcher plus a native musl binary in ``@openai/codex-linux-x64``) and
exports ``NBCHAT_TEST_AGENT_CLIS`` (read at import: the autouse fixture clears
``NBCHAT_*``). :func:`run_codex` writes a fresh ``CODEX_HOME/config.toml`` and
runs ``codex exec`` once; ``python tests/codex_cli.py --token T --log FILE``
is the stand-in Streamable HTTP MCP server the tests put behind a bearer token.

What was found, with codex-cli 0.171.0:

- **Command.** ``codex exec --skip-git-repo-check --ephemeral --strict-config
  --color never -C WORKDIR PROMPT`` with ``stdin`` at /dev/null (a stdin that
  is not a terminal is read and appended to the prompt: "Reading additional
  input from stdin..."). ``--strict-config`` makes an
  unknown key an error, so a renamed key fails loudly instead of being
  ignored. Exit code 0 even when a tool call failed; the final message is
  stdout, the transcript (``mcp: demo/add started`` / ``(completed)``) stderr.
- **Model.** ``model_provider = "scripted"`` with ``[model_providers.scripted]``
  ``base_url = "<server>/v1"``, ``wire_api = "responses"``, ``env_key`` (the
  variable holding the key, sent as ``Authorization: Bearer``),
  ``request_max_retries = 0``, ``stream_max_retries = 0``. No login is needed
  with ``env_key``. Every request streams (``stream: true``, ``store: false``)
  and carries the whole conversation as ``input`` (no
  ``previous_response_id``); the last user message is the prompt, so
  ``Reply(when=...)`` matches it. A second request follows each tool call.
- **Offline.** Without more, a run resolves ``api.github.com``,
  ``chatgpt.com`` and ``ab.chatgpt.com`` and runs ``git ls-remote`` on a
  plugin repository (seen with strace). These keys stop all of it (strace then
  shows loopback only): ``check_for_update_on_startup = false``,
  ``[analytics] enabled = false``, ``[feedback] enabled = false``,
  ``[otel] exporter = "none"``, ``[features] plugins = false, apps = false,
  remote_plugin = false``.
- **Approvals.** ``approval_policy = "never"`` alone runs read-only MCP tools
  (``readOnlyHint``) but fails any other with "MCP tool call requires
  approval, but approval policy is never" (sent to the model as the tool's
  output). Per server, ``default_tools_approval_mode = "approve"`` runs its
  tools unattended (per tool: ``tools = {T = {approval_mode = "approve"}}``
  in the server's table; both tried), so
  shell commands stay in the ``read-only`` sandbox;
  ``--dangerously-bypass-approvals-and-sandbox`` works too but drops the
  sandbox for everything.
- **MCP servers.** ``[mcp_servers.NAME]`` with ``command``/``args``/``env``
  (stdio: Codex passes the child almost no environment, so ``PYTHONPATH`` goes
  in ``env``) or ``url`` with ``bearer_token_env_var`` (Streamable HTTP: the
  header is ``Authorization: Bearer <value>``); ``required = true`` makes a
  server that cannot start fail the run (exit 1) before any model request.
- **Tool names.** Codex offers a server's tools to the model as a Responses
  ``namespace`` tool named ``mcp__NAME`` holding plain function tools
  (``add``); the model's ``function_call`` item must carry
  ``"namespace": "mcp__NAME", "name": "add"`` (a bare ``mcp__NAME__add`` is
  "unsupported call"). The scripted server does that for a
  ``Reply(tool_calls=[("mcp__NAME__add", ...)])`` when the request has that
  namespace. The result comes back as a ``function_call_output`` whose output
  is text, ``"Wall time: 0.0035 seconds\\nOutput:\\n{\\"result\\":5}"`` (a
  structured result as JSON).
- **Gotchas.** A ``CODEX_HOME`` under ``/tmp`` warns that helper binaries are
  not linked (harmless); an unknown model warns "Model metadata ... not found"
  (harmless); Codex writes sqlite state, skills and shell snapshots into
  ``CODEX_HOME`` even with ``--ephemeral``, so each run gets a fresh one.
  Two ``npm install`` into the same prefix at once (Claude Code's and this)
  remove each other's packages: install them one after the other.
- **Timings.** A run with one MCP tool call (two model requests) takes about
  0.3 s over HTTP (the server already up) and 0.95 s over stdio, most of it
  the Python server's start; a refused token ends a run in 0.2 s. With
  strace watching, about 4 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SRC = str(REPO / "src")
AGENT_CLIS = os.environ.get("NBCHAT_TEST_AGENT_CLIS", "")
MODEL_KEY_VARIABLE = "SCRIPTED_MODEL_API_KEY"
MODEL_KEY = "sk-scripted-codex"
NO_CODEX = (
    "the Codex CLI is not installed: set NBCHAT_TEST_AGENT_CLIS to the npm prefix .ci/run "
    "installs @openai/codex into (.venv/agent-clis), or put codex on PATH"
)
# Keeps a run on loopback: no update check, telemetry, plugin or app sync.
OFFLINE = {
    "check_for_update_on_startup": False,
    "analytics": {"enabled": False},
    "feedback": {"enabled": False},
    "otel": {"exporter": "none"},
    "features": {"plugins": False, "apps": False, "remote_plugin": False},
}
# Every MCP server: wait for it, and run its tools without asking.
SERVER_DEFAULTS = {
    "required": True,
    "startup_timeout_sec": 30,
    "tool_timeout_sec": 30,
    "default_tools_approval_mode": "approve",
}


@dataclass(frozen=True)
class CompletedRun:
    """One ``codex exec`` run: what it printed, its exit code, how long it took."""

    stdout: str
    stderr: str
    returncode: int
    seconds: float
    home: Path  # its CODEX_HOME, config.toml inside


def codex_binary() -> str | None:
    """The ``codex`` launcher: under ``NBCHAT_TEST_AGENT_CLIS`` (the npm prefix or its
    ``node_modules``), else this checkout's ``.venv/agent-clis``, else on PATH."""
    prefix = Path(AGENT_CLIS) if AGENT_CLIS else REPO / ".venv" / "agent-clis"
    for found in (prefix / "node_modules" / ".bin" / "codex", prefix / ".bin" / "codex"):
        if found.exists():
            return str(found)
    return shutil.which("codex")


def codex_available() -> bool:
    return codex_binary() is not None


def codex_config(
    model_url: str, mcp_servers: Mapping[str, Mapping[str, Any]], model: str
) -> dict[str, Any]:
    """The config.toml of a run, as data."""
    provider = {
        "name": "Scripted",
        "base_url": model_url,
        "wire_api": "responses",
        "env_key": MODEL_KEY_VARIABLE,
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }
    return {
        "model": model,
        "model_provider": "scripted",
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        **OFFLINE,
        "model_providers": {"scripted": provider},
        "mcp_servers": {name: {**SERVER_DEFAULTS, **entry} for name, entry in mcp_servers.items()},
    }


def run_codex(
    prompt: str,
    *,
    model_url: str,
    mcp_servers: Mapping[str, Mapping[str, Any]],
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    model: str = "nbchat-demo",
    args: Sequence[str] = (),
    home: Path | None = None,
) -> CompletedRun:
    """Run ``codex exec prompt`` once, in a fresh CODEX_HOME, against ``model_url``.

    ``mcp_servers`` maps a name to Codex's own keys for it (``command``,
    ``args``, ``env``; or ``url``, ``bearer_token_env_var``); each also gets
    :data:`SERVER_DEFAULTS`. ``env`` is added to the few variables the run
    gets (PATH, HOME, CODEX_HOME and the model's key), e.g. the bearer token.
    ``home`` is the CODEX_HOME to create (a pytest ``tmp_path`` folder, say;
    default: a new temporary folder, left for the caller to read).
    """
    binary = codex_binary()
    if binary is None:
        raise RuntimeError(NO_CODEX)
    home = home or Path(tempfile.mkdtemp(prefix="nbchat-codex-home-"))
    work = home / "work"
    work.mkdir(parents=True)
    config = codex_config(model_url, mcp_servers, model)
    (home / "config.toml").write_text(to_toml(config), encoding="utf-8")
    run_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home),
        MODEL_KEY_VARIABLE: MODEL_KEY,
        **(env or {}),
    }
    command = [binary, "exec", "--skip-git-repo-check", "--ephemeral", "--strict-config",
               "--color", "never", "-C", str(work), *args, prompt]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, env=run_env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip
    return CompletedRun(done.stdout, done.stderr, done.returncode, time.monotonic() - started, home)


def to_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """``data`` as TOML: mappings two levels down as tables, deeper ones (a server's ``env``)
    inline. Small on purpose: the config above is all it writes."""
    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, Mapping) and prefix.count(".") < 2:
            tables.append(to_toml(value, f"{prefix}{_key(key)}."))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    head = f"[{prefix[:-1]}]\n" if prefix and lines else ""
    body = head + "".join(f"{line}\n" for line in lines)
    return "\n".join(part for part in [body, *tables] if part)


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(_value(v) for v in value) + "]"


# -- the stand-in Streamable HTTP MCP server ---------------------------------------------


class HttpMcpServer:
    """``python tests/codex_cli.py`` in a subprocess: an MCP server behind a bearer token.

    Each HTTP request it gets is a line of :attr:`log` (``authorization``,
    ``status``, the JSON-RPC ``method`` and ``params``), read by :meth:`requests`.
    """

    def __init__(self, token: str, folder: Path) -> None:
        self.token = token
        self.log = folder / "http-mcp.jsonl"
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--token", token, "--log", str(self.log)],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC},
        )  # fmt: skip
        assert self.process.stdout is not None
        port = self.process.stdout.readline().strip()
        if not port.isdigit():
            self.close()
            raise RuntimeError(f"the stand-in MCP server did not start (said {port!r})")
        self.url = f"http://127.0.0.1:{port}/mcp"

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> HttpMcpServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _bearer_only(app: Any, token: str, log: Path) -> Any:
    """An ASGI wrapper: 401 unless ``Authorization: Bearer <token>``; every request logged."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        authorization = headers.get("authorization")
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            rpc = json.loads(body) if body else {}
        except ValueError:
            rpc = {}
        allowed = authorization == f"Bearer {token}"
        entry = {"http": scope["method"], "authorization": authorization,
                 "status": 200 if allowed else 401,
                 "method": rpc.get("method") if isinstance(rpc, dict) else None,
                 "params": rpc.get("params") if isinstance(rpc, dict) else None}  # fmt: skip
        with log.open("a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")
        if not allowed:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"www-authenticate", b"Bearer"),
                                    (b"content-type", b"application/json")]})  # fmt: skip
            return await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return wrapped


def serve(token: str, log: Path) -> None:
    """Serve the stand-in on a free loopback port, printed first on stdout."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server: Any = MCPServer("stand-in", instructions="A stand-in for nbchat's MCP server.",
                            log_level="WARNING")  # fmt: skip

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    app = server.streamable_http_app(stateless_http=True, json_response=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(_bearer_only(app, token, log), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python tests/codex_cli.py")
    parser.add_argument("--token", required=True)
    parser.add_argument("--log", required=True, type=Path)
    options = parser.parse_args()
    serve(options.token, options.log)
