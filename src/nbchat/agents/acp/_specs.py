"""Which coding agents may be hosted in the chat, and how each one starts.

Three presets name the agents people have: ``claude`` (Claude Code through
``claude-agent-acp``, or ``claude-code-acp`` before it), ``codex``
(``codex-acp``) and ``gemini`` (``gemini --acp``), each found on ``PATH`` and
started in its asking mode, never a full-access one. Any other ACP agent is
a command in ``agents.json``, in the shape of ``mcp.json``::

    {"agentServers": {"goose": {"command": "goose", "args": ["acp"], "env": {}}}}

An entry of the same name replaces a preset. The user's file is
``<jupyter config dir>/nbchat/agents.json``; the administrator's is
``nbchat/agents.json`` beside the system Jupyter config (or the file
``NBCHAT_ACP_ADMIN_CONFIG`` names), which may also say ``"acp": "off"`` and
``"allow": [patterns]``. ``NBCHAT_ACP=off`` and ``NBCHAT_ACP_ALLOW`` say the
same from the environment. A preset is checked against the allowlists like
any entry: its command line as it will run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...base.config import ENV_ACP, ENV_ACP_ADMIN_CONFIG, ENV_ACP_ALLOW
from ...base.errors import AgentError
from ...mcp._config import ConfigFiles, McpConfig, load_config, refusal

ACP_FILES = ConfigFiles("agents.json", "agentServers", "acp", ENV_ACP, ENV_ACP_ALLOW,
                        ENV_ACP_ADMIN_CONFIG, urls=False)  # fmt: skip


@dataclass(frozen=True)
class Preset:
    """An agent nbchat knows: the programs that start it, first found wins, and how to get one."""

    label: str
    commands: tuple[tuple[str, ...], ...]
    install: str


PRESETS: dict[str, Preset] = {
    "claude": Preset(
        "Claude Code", (("claude-agent-acp",), ("claude-code-acp",)),
        "npm install -g @zed-industries/claude-agent-acp (and an Anthropic key: "
        "ANTHROPIC_API_KEY, or `claude` logged in once)",
    ),
    "codex": Preset(
        "Codex", (("codex-acp", "-c", 'approval_policy="untrusted"'),),
        "npm install -g @zed-industries/codex-acp (and OPENAI_API_KEY, or `codex login` once)",
    ),
    "gemini": Preset(
        "Gemini CLI", (("gemini", "--acp"),),
        "npm install -g @google/gemini-cli (and GEMINI_API_KEY, or `gemini` logged in once)",
    ),
}  # fmt: skip


@dataclass(frozen=True)
class AgentSpec:
    """One agent as it will start: its name, what it is, its command line and environment."""

    name: str
    label: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    unset: tuple[str, ...] = ()  # the person's variables the agent does not get

    def __repr__(self) -> str:  # the environment may hold keys
        return f"AgentSpec({self.name!r}, {self.command_line!r})"

    @property
    def command_line(self) -> str:
        """What the allowlists match: the command and its arguments, joined by spaces."""
        return " ".join([self.command, *self.args])


def agent_names() -> list[str]:
    """The presets and the configured agents, by name (what ``--with`` takes)."""
    return sorted({*PRESETS, *_configured().servers, *_configured().refused})


def find_agent(name: str) -> AgentSpec:
    """The agent ``name`` as it will start; AgentError saying what to do when it cannot."""
    config = _configured()
    if not config.enabled:
        raise AgentError(f"hosting coding agents is turned off by {config.off_by}; ask your "
                         "administrator, or chat with nbchat's own model")  # fmt: skip
    if name in config.refused:
        raise AgentError(f"the agent {name!r} is not allowed here: {config.refused[name]}")
    configured = config.servers.get(name)
    if configured is not None:
        spec = AgentSpec(name, name, configured.command, configured.args,
                         dict(configured.env), configured.cwd, configured.unset)  # fmt: skip
        if shutil.which(spec.command) is None and not os.path.isfile(spec.command):
            raise AgentError(f"the agent {name!r} runs {spec.command!r}, which is not "
                             f"installed here (not on PATH); install it or fix "
                             f"{configured.source}")  # fmt: skip
        return spec
    preset = PRESETS.get(name)
    if preset is None:
        known = ", ".join(agent_names())
        raise AgentError(f"no agent is called {name!r}; use one of {known}, or add it to "
                         f"agents.json (see %chat --help)")  # fmt: skip
    for command, *args in preset.commands:
        if shutil.which(command) is not None:
            spec = AgentSpec(name, preset.label, command, tuple(args))
            _check_allowed(spec)
            return spec
    raise AgentError(f"{preset.label} is not installed here; install it with: {preset.install}")


def _configured() -> McpConfig:  # the same record as MCP servers', agents in it
    return load_config(ACP_FILES)


def _check_allowed(spec: AgentSpec) -> None:
    """A preset meets the same allowlists as a configured agent."""
    why = refusal(spec.command_line, ACP_FILES)
    if why:
        raise AgentError(f"the agent {spec.name!r} is not allowed here: {why}; ask your "
                         "administrator")  # fmt: skip
