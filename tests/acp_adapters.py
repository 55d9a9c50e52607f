"""The real ACP adapters of Claude Code, Codex and Gemini CLI, offline against the scripted server.

:func:`launch` says how to start one (:class:`Launch`: command, args,
environment, working folder, throw-away home) in its *asking* mode, with the
scripted server as its model; :func:`start_adapter` starts it as its own
process group and ends the whole tree on the way out; :func:`write_file_replies`
scripts the model asking the adapter to write a file. Nothing here speaks ACP:
a test does, through the SDK or nbchat's own client. What follows was found
on Linux x64 with Node 20, ``agent-client-protocol`` 0.12.1 as the client.

Install
    ``.ci/run`` installs the three, one ``npm install`` at a time (two at once
    into one prefix break each other), into ``.venv/acp-agents``, and exports
    ``NBCHAT_TEST_ACP_AGENTS`` naming it (read at import: the autouse fixture
    clears ``NBCHAT_*``). With it set, a missing adapter fails the test; unset
    and not installed here, the test is skipped. 407 MB in all; 8 s from npm's
    cache.

    - ``@zed-industries/claude-agent-acp`` 0.23.1 (``claude-agent-acp``), on
      ``@anthropic-ai/claude-agent-sdk`` 0.2.83, which runs Claude Code 2.1.83's
      ``cli.js`` on the same Node.
    - ``@zed-industries/codex-acp`` 0.16.0 (``codex-acp``: a Node launcher that
      ``spawnSync``s the native binary of ``@zed-industries/codex-acp-linux-x64``).
    - ``@google/gemini-cli`` 0.61.0 (``gemini --acp``).

Offline, all three
    A fresh ``HOME`` (and each adapter's config folder inside it) per run, so
    no real login, key or setting leaks in, and only ``PATH``, ``HOME``,
    ``LANG`` and the variables below from this process. ``HTTPS_PROXY`` /
    ``HTTP_PROXY`` at ``http://127.0.0.1:9`` with ``NO_PROXY=127.0.0.1,localhost``:
    under ``strace -f -e connect`` a run (initialize, session/new, one prompt
    with a file write) then connects to the scripted server only, plus Claude's
    one connection to port 9 (the vendor look-up it makes whatever the
    variables say, sent to a dead port) and Codex's to the local nscd socket
    (user look-ups). No DNS, no other host.

Claude (``claude-agent-acp``, no arguments)
    ``ANTHROPIC_BASE_URL`` = the server's root, ``ANTHROPIC_API_KEY``,
    ``ANTHROPIC_MODEL`` and the ``ANTHROPIC_DEFAULT_{HAIKU,SONNET,OPUS}_MODEL``
    aliases all the scripted model (``session/new`` offers "sonnet[1m]",
    "opus[1m]", "haiku": a switch stays on the script), ``CLAUDE_CONFIG_DIR``
    in the home, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (no title
    request), ``DISABLE_AUTOUPDATER``, ``DISABLE_TELEMETRY``,
    ``DISABLE_ERROR_REPORTING``, ``CLAUDE_CODE_DISABLE_FAST_MODE``,
    ``MCP_CONNECTION_NONBLOCKING=0``. Mode ``default`` ("prompts for dangerous
    operations"; also ``acceptEdits``, ``plan``, ``dontAsk``; the bypass mode is
    not offered as root). A prompt is one streamed ``POST /v1/messages?beta=true``
    per model turn, thinking on: a scripted tool call needs ``reasoning=`` (else
    the follow-up is a 400). The built-in ``Write`` tool (``file_path``,
    ``content``) sends a ``tool_call`` (kind ``edit``, a diff), then
    ``session/request_permission`` with ``allow_always``/``allow``/``reject``
    (kinds ``allow_always``, ``allow_once``, ``reject_once``); a reject fails the
    call ("User refused permission to run tool") and the model is asked again.

Codex (``codex-acp``, no arguments)
    ``CODEX_HOME`` in the home holding ``config.toml``: ``model_provider`` a
    provider with ``base_url`` = root + ``/v1``, ``wire_api = "responses"``,
    ``env_key`` (its key sent as a bearer), no retries; the update check,
    analytics, feedback, OpenTelemetry, plugins and apps off (as
    ``codex_cli.OFFLINE``); ``approval_policy = "untrusted"`` with
    ``sandbox_mode = "read-only"``: every command that is not known to be
    read-only asks (``on-request`` would run commands in a bubblewrap sandbox,
    which is not shipped). The model must be one Codex knows (``gpt-5.4``):
    another puts "Model metadata for … not found" into the agent's *message*.
    ``session/new`` reports the model choice only, no modes. A prompt is one
    streamed ``POST /v1/responses`` per model turn; the tools offered are
    ``exec_command`` (``cmd``), ``write_stdin``, ``update_plan``, … (no
    ``apply_patch`` for these models), so a file is written by a command.
    Codex sends *no* ``tool_call`` before asking: the request's own
    ``toolCall`` (kind ``execute``, the command) is all there is; options
    ``approved``/``approved-execpolicy-amendment``/``abort``. Approved, the
    command ran and wrote in the working folder despite the read-only sandbox;
    aborted, the prompt ends at once with stop reason ``cancelled``, no second
    model request. It warns on stderr that a ``CODEX_HOME`` under /tmp gets no
    helper binaries (harmless).

Gemini (``gemini --acp``)
    ``GOOGLE_GEMINI_BASE_URL`` = the root, ``GEMINI_API_KEY`` (sent as
    ``x-goog-api-key``), ``GEMINI_CLI_NO_RELAUNCH=true`` (no second Node for a
    bigger heap); ``~/.gemini/settings.json`` choosing API-key auth, the model,
    and auto-update, its notification, usage statistics and telemetry off;
    the working folder trusted in ``~/.gemini/trustedFolders.json``. Mode
    ``default`` ("prompts for approval"; also ``autoEdit``, ``yolo``,
    ``plan``). A prompt is one ``POST /v1beta/models/MODEL:streamGenerateContent?alt=sse``
    per model turn, the model named (no routing or classifier calls, no
    ``countTokens``); tools are ``functionDeclarations`` with
    ``parametersJsonSchema``. ``write_file`` (``file_path``, ``content``) asks
    at once (no ``tool_call`` first: the request's ``toolCall``, kind ``edit``,
    a diff), options ``proceed_always``/``proceed_once``/``cancel``; refused,
    the model gets a ``functionResponse`` "was canceled by the user" and is
    asked again. Its chats land in ``~/.gemini/tmp`` (the throw-away home).

Every adapter
    No adapter exits when its stdin closes, and the SDK ends only the direct
    child: :func:`start_adapter` starts each in a new session and kills its
    process group, then any descendant that left it (Codex runs commands in a
    PTY, a session of their own), and fails if one outlives that. Its stderr
    is drained as it comes (an unread pipe can stall it) and the stdout
    reader's line limit is raised (ACP lines pass 64 KiB: Claude's
    ``available_commands``, a file's diff).

Timings (a test, spawn to teardown: initialize, session/new, one prompt of one
or two model requests, on a shared 2-core box): Claude 1.1–1.3 s, Codex
0.2–0.45 s, Gemini 0.9–1.2 s; up to 2.5 s (Claude) and 2.9 s (Gemini) while
the box was busy; with ``strace`` watching 1–2.2 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codex_cli import OFFLINE as CODEX_OFFLINE
from codex_cli import to_toml
from nbchat.testing import Reply

REPO = Path(__file__).resolve().parents[1]
# Read at import: the autouse fixture clears every NBCHAT_* variable for each test.
ACP_AGENTS = os.environ.get("NBCHAT_TEST_ACP_AGENTS", "")
ADAPTERS = ("claude", "codex", "gemini")
PACKAGES = {
    "claude": "@zed-industries/claude-agent-acp",
    "codex": "@zed-industries/codex-acp",
    "gemini": "@google/gemini-cli",
}
BINARIES = {"claude": "claude-agent-acp", "codex": "codex-acp", "gemini": "gemini"}
# The model each is configured with: Codex warns in the agent's text about one it does not know.
MODELS = {"claude": "nbchat-demo", "codex": "gpt-5.4", "gemini": "nbchat-demo"}
SERVED_MODELS = tuple(sorted(set(MODELS.values())))  # ScriptedServer(models=SERVED_MODELS)
API_KEY = "sk-scripted-acp"
CODEX_KEY_VARIABLE = "SCRIPTED_MODEL_API_KEY"
DEAD_PROXY = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}
CLAUDE_OFFLINE = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_FAST_MODE": "1",
    "MCP_CONNECTION_NONBLOCKING": "0",
}
STREAM_LIMIT = 16 * 1024 * 1024  # the stdout reader's line limit (asyncio's default: 64 KiB)


@dataclass(frozen=True)
class Launch:
    """How to start one adapter: ``command *args`` in ``cwd`` with exactly ``env``."""

    name: str  # "claude", "codex" or "gemini"
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    cwd: Path  # the folder to work in: session/new's ``cwd``, trusted where that matters
    home: Path  # the throw-away HOME: the adapter's config, state and logs
    model: str  # the model it asks the scripted server for


def install_line(name: str) -> str:
    """The command that installs adapter ``name`` where the tests look for it."""
    return f"npm install --no-audit --no-fund --prefix .venv/acp-agents {PACKAGES[name]}"


def adapter_binary(name: str) -> Path | None:
    """Adapter ``name``'s launcher under ``NBCHAT_TEST_ACP_AGENTS`` (else this checkout's
    ``.venv/acp-agents``), or None when it is not installed there."""
    prefix = Path(ACP_AGENTS) if ACP_AGENTS else REPO / ".venv" / "acp-agents"
    found = prefix / "node_modules" / ".bin" / BINARIES[name]
    return found if os.access(found, os.X_OK) else None


def require_adapter(name: str) -> Path:
    """The launcher; fails the test when ``NBCHAT_TEST_ACP_AGENTS`` is set (CI installs all
    three) and the adapter is missing; skips it when the variable is unset and it is not here."""
    binary = adapter_binary(name)
    if binary is not None:
        return binary
    if ACP_AGENTS:
        pytest.fail(f"NBCHAT_TEST_ACP_AGENTS={ACP_AGENTS} has no node_modules/.bin/"
                    f"{BINARIES[name]}; install it with: {install_line(name)}")  # fmt: skip
    pytest.skip(f"the {name} ACP adapter is not installed ({install_line(name)}, "
                "or run .ci/run, which also sets NBCHAT_TEST_ACP_AGENTS)")  # fmt: skip


def _folders(folder: Path) -> tuple[Path, Path]:
    home, work = folder / "home", folder / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    return home, work


def _environment(home: Path, **variables: str) -> dict[str, str]:
    path = os.environ.get("PATH", os.defpath)
    return {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", **DEAD_PROXY, **variables}


def claude_launch(server_root: str, folder: Path, *, model: str = MODELS["claude"]) -> Launch:
    """``claude-agent-acp`` in its ``default`` mode, the scripted server its Anthropic API."""
    binary = require_adapter("claude")
    home, work = _folders(folder)
    aliases = {f"ANTHROPIC_DEFAULT_{size}_MODEL": model for size in ("HAIKU", "SONNET", "OPUS")}
    env = _environment(home, CLAUDE_CONFIG_DIR=str(home / ".claude"),
                       ANTHROPIC_BASE_URL=server_root, ANTHROPIC_API_KEY=API_KEY,
                       ANTHROPIC_MODEL=model, **aliases, **CLAUDE_OFFLINE)  # fmt: skip
    return Launch("claude", str(binary), (), env, work, home, model)


def codex_config(server_root: str, model: str) -> dict[str, Any]:
    """Codex's ``config.toml`` for an ACP run, as data: ``untrusted`` asks before any
    command that is not read-only."""
    provider = {"name": "Scripted", "base_url": f"{server_root}/v1", "wire_api": "responses",
                "env_key": CODEX_KEY_VARIABLE, "request_max_retries": 0,
                "stream_max_retries": 0}  # fmt: skip
    return {"model": model, "model_provider": "scripted", "approval_policy": "untrusted",
            "sandbox_mode": "read-only", **CODEX_OFFLINE,
            "model_providers": {"scripted": provider}}  # fmt: skip


def codex_launch(server_root: str, folder: Path, *, model: str = MODELS["codex"]) -> Launch:
    """``codex-acp`` asking before every command, the scripted server its Responses API."""
    binary = require_adapter("codex")
    home, work = _folders(folder)
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    config = to_toml(codex_config(server_root, model))
    (codex_home / "config.toml").write_text(config, encoding="utf-8")
    env = _environment(home, CODEX_HOME=str(codex_home), **{CODEX_KEY_VARIABLE: API_KEY})
    return Launch("codex", str(binary), (), env, work, home, model)


def gemini_settings(model: str) -> dict[str, Any]:
    """Gemini CLI's ``~/.gemini/settings.json`` for an offline run."""
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": model},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
    }


def gemini_launch(server_root: str, folder: Path, *, model: str = MODELS["gemini"]) -> Launch:
    """``gemini --acp`` in its ``default`` mode, the scripted server its Gemini API."""
    binary = require_adapter("gemini")
    home, work = _folders(folder)
    config = home / ".gemini"
    config.mkdir(exist_ok=True)
    settings = json.dumps(gemini_settings(model))
    (config / "settings.json").write_text(settings, encoding="utf-8")
    trusted = json.dumps({str(work): "TRUST_FOLDER"})
    (config / "trustedFolders.json").write_text(trusted, encoding="utf-8")
    env = _environment(home, GOOGLE_GEMINI_BASE_URL=server_root, GEMINI_API_KEY=API_KEY,
                       GEMINI_CLI_NO_RELAUNCH="true")  # fmt: skip
    return Launch("gemini", str(binary), ("--acp",), env, work, home, model)


LAUNCHERS: dict[str, Callable[..., Launch]] = {
    "claude": claude_launch,
    "codex": codex_launch,
    "gemini": gemini_launch,
}


def launch(name: str, server_root: str, folder: Path, **options: Any) -> Launch:
    """How to start adapter ``name`` offline in its asking mode.

    ``server_root`` is the scripted server's root URL (``ScriptedServer.ollama_url``,
    ``http://127.0.0.1:PORT``; each adapter adds its API's path); ``folder`` an
    empty folder (a ``tmp_path``) to hold its ``home`` and ``work`` folders.
    Serve :data:`SERVED_MODELS` (or any model). Skips or fails the test when the
    adapter is not installed (:func:`require_adapter`).
    """
    return LAUNCHERS[name](server_root, folder, **options)


def write_file_replies(name: str, path: Path, text: str, then: str = "Done.") -> tuple[Reply, ...]:
    """The model's side of "write ``text`` to ``path``" for adapter ``name``: one tool call
    (its own file tool; for Codex a shell command, run in ``path``'s folder), then ``then``."""
    if name == "codex":
        command = f"printf %s {shlex.quote(text)} > {shlex.quote(path.name)}"
        call: tuple[str, dict[str, Any]] = ("exec_command", {"cmd": command,
                                                             "workdir": str(path.parent)})
    else:
        tool = {"claude": "Write", "gemini": "write_file"}[name]
        call = (tool, {"file_path": str(path), "content": text})
    # Claude Code thinks: the follow-up must carry the signed thinking block back.
    reasoning = "The person asked for this file." if name == "claude" else ""
    return (Reply(tool_calls=[call], reasoning=reasoning, times=1), Reply(then))


# -- owning the process tree ---------------------------------------------------------------


@dataclass
class Running:
    """A started adapter: its process (the leader of its own group) and its stderr so far."""

    launch: Launch
    process: asyncio.subprocess.Process
    stderr: list[bytes] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def stdin(self) -> asyncio.StreamWriter:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.process.stdout is not None
        return self.process.stdout

    @property
    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")


def live_processes() -> dict[int, tuple[int, int]]:
    """Every live process: pid → (parent pid, process group); zombies left out."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, parent, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if state not in ("Z", "X"):
            found[int(entry.name)] = (int(parent), int(group))
    return found


def process_tree(pid: int) -> set[int]:
    """``pid``'s live descendants and the live members of the group it leads."""
    table = live_processes()
    tree = {p for p, (_, group) in table.items() if group == pid}
    level = {pid}
    while level:
        level = {p for p, (parent, _) in table.items() if parent in level} - tree
        tree |= level
    return tree


def end_process_tree(pid: int, timeout: float = 10.0) -> set[int]:
    """Kill the group ``pid`` leads and every descendant that left it; what is still alive
    after ``timeout`` (nothing, normally)."""
    tree = process_tree(pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    for stray in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(stray, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = tree & set(live_processes()) | process_tree(pid)
        if not alive:
            return set()
        time.sleep(0.05)
    return alive


async def _drain(stream: asyncio.StreamReader, into: list[bytes]) -> None:
    while chunk := await stream.read(65536):
        into.append(chunk)


@contextlib.asynccontextmanager
async def start_adapter(spec: Launch) -> AsyncIterator[Running]:
    """Start the adapter as the leader of a new session; on the way out, however the block
    ends, kill its whole process tree and fail if any of it is left."""
    process = await asyncio.create_subprocess_exec(
        spec.command, *spec.args, env=spec.env, cwd=spec.cwd, start_new_session=True,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, limit=STREAM_LIMIT,
    )  # fmt: skip
    running = Running(spec, process)
    assert process.stderr is not None
    drain = asyncio.ensure_future(_drain(process.stderr, running.stderr))
    try:
        yield running
    finally:
        left = end_process_tree(process.pid)
        await process.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(drain, 5)
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drain
        if left:
            raise AssertionError(f"{sorted(left)} of {spec.name}'s process tree outlived it")
