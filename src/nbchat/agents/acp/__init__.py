"""Coding agents hosted in the chat through the Agent Client Protocol (ACP).

A person's own agent (Claude Code, Codex, Gemini CLI, or any ACP command)
runs as a subprocess of the kernel and answers in an nbchat thread; every
permission it asks for is a call waiting in the thread store, answered once,
and the notebook reaches it only through nbchat's own MCP tools. The
protocol is spoken with its official Python SDK (``agent-client-protocol``,
``pip install "nbchat[acp]"``), imported only when an agent starts.
"""

from ._host import AcpHost, host_key, is_hosted
from ._permission import AcpPermission
from ._specs import PRESETS, AgentSpec, agent_names, find_agent

__all__ = [
    "PRESETS", "AcpHost", "AcpPermission", "AgentSpec", "agent_names", "find_agent", "host_key",
    "is_hosted",
]
