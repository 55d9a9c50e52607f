"""Which MCP servers may start: the user's and the administrator's ``mcp.json``, nothing else.

Servers are read from two files only, in the ``mcpServers`` shape Claude
Desktop, Cursor and notebook-intelligence use:

- the user's, ``<jupyter config dir>/nbchat/mcp.json``;
- the administrator's, ``nbchat/mcp.json`` beside the system Jupyter config
  (``/etc/jupyter`` and ``/usr/local/etc/jupyter`` on Linux), or the file
  ``NBCHAT_MCP_ADMIN_CONFIG`` names.

Never from a notebook, its metadata or the working directory: opening a
notebook must not start a process. The administrator's file may also say
``"mcp": "off"`` and ``"allow": [patterns]``; ``NBCHAT_MCP=off`` and
``NBCHAT_MCP_ALLOW`` (comma-separated) say the same from the environment. A
server runs only if its command line (command and arguments, joined by
spaces) or URL matches a pattern of every allowlist given (``fnmatch``
patterns). An administrator's server of the same name wins over the user's.

A server entry::

    {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
     "env": {"TOKEN": "${MY_TOKEN}"}, "approve": "read-only", "timeout": 30}
    {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${MY_TOKEN}"}}

``${NAME}`` in ``env`` and ``headers`` values is the environment variable
``NAME``, so a token need not be written in the file. ``approve`` is
``"always"`` (the default: every call asks), ``"read-only"`` (tools the
server marks ``readOnlyHint`` run at once: you trust its hints) or
``"never-ask"``; ``NBCHAT_MAX_APPROVAL`` caps it as it caps ``run_code``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ..base._secrets import remember
from ..base.config import ENV_MCP, ENV_MCP_ADMIN_CONFIG, ENV_MCP_ALLOW
from ..base.errors import ConfigError
from ..base.policy import effective_approval

Approve = Literal["always", "read-only", "never-ask"]
APPROVES: tuple[Approve, ...] = get_args(Approve)  # strictest first
DEFAULT_TIMEOUT = 60.0
CONFIG_NAME = "mcp.json"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": it ends the name
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OFF = ("off", "0", "false", "no")
_SECRET_HEADER = re.compile(r"authorization|key|token|secret|cookie", re.IGNORECASE)
# The approval policies of run_code, in the same order: read-only is run_code's "risky".
_AS_POLICY: dict[Approve, str] = {
    "always": "always", "read-only": "risky", "never-ask": "never-ask"
}


@dataclass(frozen=True)
class ServerConfig:
    """One configured MCP server: how to reach it and when its tools ask."""

    name: str
    source: str  # the file it came from
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()  # variables not passed on (an agent's entry: "NAME": null)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    approve: Approve = "always"
    timeout: float = DEFAULT_TIMEOUT

    def __repr__(self) -> str:
        return f"ServerConfig({self.name!r}, {self.target!r}, approve={self.approve!r})"

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url else "stdio"

    @property
    def target(self) -> str:
        """What the allowlist matches: the command line, or the URL."""
        return self.url or " ".join([self.command, *self.args])

    @property
    def effective_approve(self) -> Approve:
        """``approve`` under the administrator's ``NBCHAT_MAX_APPROVAL`` cap."""
        policy = effective_approval(_AS_POLICY[self.approve])
        return next(name for name, same in _AS_POLICY.items() if same == policy)


@dataclass(frozen=True)
class McpConfig:
    """Every server the files configure, those the allowlists refuse, and whether MCP is on."""

    servers: Mapping[str, ServerConfig] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)  # name: why
    enabled: bool = True
    off_by: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.servers) if self.enabled else ()


@dataclass(frozen=True)
class ConfigFiles:
    """Which files and variables configure one kind of server (MCP servers, ACP agents)."""

    name: str  # the file's name, user's and administrator's alike
    key: str  # the object of servers by name in it
    switch: str  # the administrator's key (and the environment's variable) that says "off"
    env_switch: str
    env_allow: str
    env_admin: str
    urls: bool = True  # whether a server may be a URL (HTTP) rather than a command


MCP_FILES = ConfigFiles(CONFIG_NAME, "mcpServers", "mcp", ENV_MCP, ENV_MCP_ALLOW,
                        ENV_MCP_ADMIN_CONFIG)  # fmt: skip


def user_config_path(files: ConfigFiles = MCP_FILES) -> Path:
    """The user's ``mcp.json``: under the Jupyter config dir (``JUPYTER_CONFIG_DIR``)."""
    from jupyter_core.paths import jupyter_config_dir

    return Path(jupyter_config_dir()) / "nbchat" / files.name


def admin_config_paths(files: ConfigFiles = MCP_FILES) -> list[Path]:
    """Where the administrator's ``mcp.json`` may be, first found wins."""
    named = os.environ.get(files.env_admin, "").strip()
    if named:
        return [Path(named)]
    from jupyter_core.paths import SYSTEM_CONFIG_PATH

    return [Path(folder) / "nbchat" / files.name for folder in SYSTEM_CONFIG_PATH]


_cache: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}


def load_config(files: ConfigFiles = MCP_FILES) -> McpConfig:
    """The servers that may start now (files are read again when they change)."""
    admin_path = next((path for path in admin_config_paths(files) if path.is_file()), None)
    admin = _read(admin_path, files) if admin_path is not None else {}
    user_path = user_config_path(files)
    user = _read(user_path, files) if user_path.is_file() else {}
    off_by = ""
    if os.environ.get(files.env_switch, "").strip().lower() in _OFF:
        off_by = f"{files.env_switch}={os.environ[files.env_switch].strip()}"
    elif str(admin.get(files.switch, "on")).strip().lower() in _OFF:
        off_by = f"the administrator's {admin_path}"
    allowlists = _allowlists(admin, admin_path, files)
    servers: dict[str, ServerConfig] = {}
    refused: dict[str, str] = {}
    for path, data in ((user_path, user), (admin_path, admin)):  # the administrator's last: wins
        for name, entry in _entries(data, path, files).items():
            server = _server(name, entry, path, files)
            servers.pop(name, None)
            refused.pop(name, None)
            denied = [where for where, patterns in allowlists if not _allowed(server, patterns)]
            if denied:
                refused[name] = f"{server.target!r} is not allowed by {denied[0]}"
            else:
                servers[name] = server
    return McpConfig(servers, refused, not off_by, off_by)


def refusal(target: str, files: ConfigFiles = MCP_FILES) -> str:
    """Why the allowlists refuse ``target`` (a command line or a URL); "" when they allow it."""
    admin_path = next((path for path in admin_config_paths(files) if path.is_file()), None)
    admin = _read(admin_path, files) if admin_path is not None else {}
    for where, patterns in _allowlists(admin, admin_path, files):
        if not any(fnmatch.fnmatchcase(target, pattern) for pattern in patterns):
            return f"{target!r} is not allowed by {where}"
    return ""


def _read(path: Path, files: ConfigFiles) -> dict[str, Any]:
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object with \"{files.key}\"; fix it")
    _cache[path] = (stamp, data)
    return data


def _entries(data: Mapping[str, Any], path: Path | None, files: ConfigFiles) -> dict[str, Any]:
    servers = data.get(files.key, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"\"{files.key}\" in {path} must be an object of servers by name")
    return servers


def _allowlists(
    admin: Mapping[str, Any], admin_path: Path | None, files: ConfigFiles
) -> list[tuple[str, list[str]]]:
    lists: list[tuple[str, list[str]]] = []
    env = os.environ.get(files.env_allow, "").strip()
    if env:
        lists.append((files.env_allow, [p.strip() for p in env.split(",") if p.strip()]))
    if "allow" in admin:
        patterns = admin["allow"]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ConfigError(f"\"allow\" in {admin_path} must be a list of patterns")
        lists.append((f"the allowlist of {admin_path}", list(patterns)))
    return lists


def _allowed(server: ServerConfig, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(server.target, pattern) for pattern in patterns)


def _server(name: object, entry: object, path: Path | None, files: ConfigFiles) -> ServerConfig:
    where = f"server {name!r} in {path}"
    if not isinstance(name, str) or not _SERVER_NAME.match(name) or len(name) > 30:
        raise ConfigError(
            f"{where}: a server name is 1 to 30 letters, digits, '-' or single '_'; rename it"
        )
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be an object with \"command\" or \"url\"")
    command, url = entry.get("command", ""), entry.get("url", "")
    if not files.urls and (url or not command):
        raise ConfigError(f"{where} needs a \"command\" (its program, spoken to over stdio)")
    if not isinstance(command, str) or not isinstance(url, str) or bool(command) == bool(url):
        raise ConfigError(f"{where} needs a \"command\" (stdio) or a \"url\" (HTTP), one of them")
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}: the url must start with http:// or https://")
    approve = entry.get("approve", "always")
    if approve not in APPROVES:
        raise ConfigError(f"{where}: approve is one of {', '.join(APPROVES)}, not {approve!r}")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"{where}: timeout is a number of seconds above 0")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}: args must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}: cwd must be a folder's path")
    return ServerConfig(
        name, str(path), command=command, args=tuple(args),
        env=_expanded(entry, "env", where, nulls=not files.urls),
        unset=_unset(entry) if not files.urls else (),
        cwd=cwd, url=url, headers=_expanded(entry, "headers", where), approve=approve,
        timeout=float(timeout),
    )  # fmt: skip


def _unset(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The variables an agent's entry leaves out of its environment (``"NAME": null``)."""
    values = entry.get("env", {})
    return tuple(str(k) for k, v in values.items() if v is None) if isinstance(values, dict) \
        else ()  # fmt: skip


def _expanded(
    entry: Mapping[str, Any], key: str, where: str, *, nulls: bool = False
) -> dict[str, str]:
    values = entry.get(key, {})
    if nulls and isinstance(values, dict):  # an agent's "NAME": null, read by _unset
        values = {k: v for k, v in values.items() if v is not None}
    if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
        raise ConfigError(f"{where}: {key} must be an object of strings")
    out = {}
    for name, value in values.items():
        used = [os.environ.get(m.group(1), "") for m in _VARIABLE.finditer(value)]
        expanded = _VARIABLE.sub(lambda m: os.environ.get(m.group(1), ""), value)
        secret_header = key == "headers" and _SECRET_HEADER.search(str(name))
        for secret in used + (expanded.split()[-1:] if secret_header else []):
            remember(secret)  # scrubbed from what tools return and nbchat shows
        out[str(name)] = expanded
    return out
