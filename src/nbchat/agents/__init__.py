"""Outside agents in the notebook, behind the same yes: nbchat as an MCP server.

Agents that run outside the notebook (Claude Code, Codex, Cursor, Gemini CLI)
reach nbchat's MCP endpoint, served by its Jupyter Server extension at
``{base_url}nbchat/mcp`` (and ``python -m nbchat mcp`` for clients that start
a command). Reads are bounded and scrubbed; every side effect is a call that
waits in the person's thread store and in the notebook until they answer it,
once. :mod:`.tokens` holds who may call, :mod:`.gate` the waiting calls,
:mod:`.server` the MCP tools, :mod:`.tools` what answers the calls in the
kernel. Nothing here imports IPython or Jupyter Server.
"""

from .gate import AgentCall, AgentGate
from .tokens import AgentToken, Minted, TokenStore

__all__ = ["AgentCall", "AgentGate", "AgentToken", "Minted", "TokenStore"]
