"""The kernel's side of coding agents hosted in the chat: ``%chat --with NAME QUESTION``.

The kernel keeps one :class:`~nbchat.agents.acp.AcpHost` over the session's
store; its agents run in this notebook's folder. Each agent session is handed
nbchat's own MCP server (``nbchat/mcp`` on the Jupyter server holding this
notebook) with a token minted for that session alone, scoped to this
notebook, revoked when the session ends: the agent reads the live notebook
and its changes to it are proposals and calls waiting for the person, however
the agent's own permission mode is set. Without a Jupyter server (nbclient,
terminal IPython) the agent gets no notebook tools, and one line says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ...base.errors import AgentError, InputError, NbchatError
from ...base.policy import ENV_AGENTS

if TYPE_CHECKING:
    from ...agents.acp import AcpHost
    from ...store.base import Store

_hosts: dict[str, AcpHost] = {}  # by store location: one host per store in a kernel


def host_for(store: Store) -> AcpHost:
    """The kernel's host of agents over ``store`` (made on first use)."""
    from ...agents.acp import AcpHost

    key = f"{store.location()}|{store.user}"
    host = _hosts.get(key)
    if host is None:
        host = AcpHost(store, cwd=_notebook_folder(), mcp_for=lambda tid: _nbchat_mcp(store, tid))
        _hosts[key] = host
    return host


def hosted_agents() -> AcpHost:
    """The coding agents this kernel hosts for ``%chat --with``: close them, or look at them."""
    from IPython import get_ipython

    from .._loaded import chat_of

    return host_for(chat_of(get_ipython()).store)


def ask_agent(magics: Any, opts: Any, text: str, name: str) -> Any:
    """``--with NAME QUESTION`` (or a question in an agent's thread): the agent's turn, shown."""
    if not text:
        raise UsageError(f"ask the agent something: %chat --with {name} QUESTION")
    if opts.history is not None or opts.preview or opts.agent or opts.mode:
        raise UsageError("--with asks a coding agent in its own thread: drop -H, --preview, "
                         "--agent and --mode")  # fmt: skip
    chat = magics.chat
    host = host_for(chat.store)
    try:
        thread_id = _thread(magics, host, opts, name, text)
        events = host.iter_ask(thread_id, text)
    except (AgentError, InputError) as error:
        raise UsageError(str(error)) from None
    return magics._shown(magics._render(events, opts))


def _thread(magics: Any, host: AcpHost, opts: Any, name: str, text: str) -> int:
    """The thread the question goes to: -t, else the current one if it is NAME's, else a new one."""
    if opts.thread is not None:
        if host.agent_of(opts.thread) != name:
            raise UsageError(f"thread {opts.thread} is not a session of {name!r}; leave out -t "
                             f"to start one")  # fmt: skip
        return int(opts.thread)
    current = magics.thread_id
    if not opts.new and current is not None and host.agent_of(current) == name:
        return int(current)
    magics.thread_id = host.new_thread(name, title="")
    return int(magics.thread_id)


def _notebook_folder() -> str:
    """The folder of this kernel's notebook (where the agent works), else the working folder."""
    session = os.environ.get("JPY_SESSION_NAME", "")
    folder = os.path.dirname(session) if os.path.isabs(session) else ""
    return folder if folder and os.path.isdir(folder) else os.getcwd()


def _nbchat_mcp(store: Store, thread_id: int) -> tuple[list[Any], Any]:
    """nbchat's MCP server for one agent session, with a token of its own; and its revoke."""
    from acp.schema import HttpHeader, HttpMcpServer

    from ...agents.tokens import TokenStore
    from . import _endpoint

    url, scope = _endpoint.endpoint_url(), _endpoint.notebook_scope()
    if not url or scope is None:
        print("This kernel's Jupyter server is not known (nbclient, a terminal): the agent "
              "gets no notebook tools of nbchat's; it still asks before it acts.")
        return [], None
    if os.environ.get(ENV_AGENTS, "").strip().lower() in ("off", "0", "false", "no"):
        print(f"{ENV_AGENTS} turns nbchat's MCP endpoint off: the agent gets no notebook tools "
              "of nbchat's; it still asks before it acts.")
        return [], None
    tokens = TokenStore(store.user)
    where = hashlib.sha256(store.location().encode("utf-8", "surrogatepass")).hexdigest()[:8]
    label = f"hosted agent: thread {thread_id} of {where}"
    try:
        for old in tokens.tokens():  # an earlier session's (its kernel may have been killed)
            if old.label == label and old.is_live:
                tokens.revoke(old.id)
        minted = tokens.mint(label, paths=[scope], classes=("read", "edit", "execute"), days=1,
                             approve="read-only")  # fmt: skip
    except NbchatError as error:  # the token folder: the agent goes on without the tools
        print(f"The agent gets no notebook tools of nbchat's ({error}); it still asks before "
              "it acts.")
        return [], None
    header = HttpHeader(name="Authorization", value=f"Bearer {minted.secret}")

    def revoke() -> None:
        with contextlib.suppress(InputError):  # revoked already (a later session of the thread)
            tokens.revoke(minted.token.id)

    return [HttpMcpServer(type="http", name="nbchat", url=url, headers=[header])], revoke
