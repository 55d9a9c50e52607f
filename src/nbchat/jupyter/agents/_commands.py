"""The ``%chat`` commands for outside agents: mint, list and revoke tokens; show waiting calls.

``%chat --agent-token LABEL`` mints a token and shows its secret once, in a
widget (its value is not part of the saved notebook unless widget state is
saved) with the endpoint's address and one line of client configuration;
``%chat --agents`` lists the tokens and shows a prompt for each call that
waits for this notebook; ``%chat --revoke-agent ID`` revokes one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ...agents.tokens import CLASSES, DEFAULT_DAYS, AgentToken, TokenStore
from ...base import markup
from ...base.errors import InputError
from ._endpoint import endpoint_url

if TYPE_CHECKING:
    from ...engine.chat import Chat

def token_store(chat: Chat) -> TokenStore:
    return TokenStore(chat.user)


def mint_token(owner: Any, opts: Any, text: str) -> None:
    """``--agent-token LABEL``: a new agent token, its secret shown once."""
    if text:  # options after an unquoted label would be taken for more of it
        raise UsageError(f"quote a label of several words, then give the options: "
                         f"%chat --agent-token \"{opts.agent_token} {text.split(' -')[0]}\" "
                         "--agent-scope PATHS")  # fmt: skip
    label = opts.agent_token.strip()
    scope = [p.strip() for p in (opts.agent_scope or "").split(",") if p.strip()] or [""]
    classes = [c.strip() for c in (opts.agent_tools or ",".join(CLASSES)).split(",")]
    days = opts.agent_days if opts.agent_days is not None else DEFAULT_DAYS
    try:
        minted = token_store(owner.chat).mint(label, paths=scope, classes=classes, days=days,
                                              approve=opts.agent_approve or "read-only")
    except InputError as error:
        raise UsageError(str(error)) from None
    url = endpoint_url() or "http://127.0.0.1:8888/nbchat/mcp"
    _show_secret(minted.token, minted.secret, url)


def _show_secret(token: AgentToken, secret: str, url: str) -> None:
    lines = [
        f"Agent token {token.id} for {token.label!r}: may use {', '.join(token.classes)} tools "
        f"on {_scope(token)} until {time.strftime('%Y-%m-%d', time.localtime(token.expires))}; "
        f"{'its reads ask too' if token.reads_ask else 'its reads run at once'}, its changes ask.",
        f"Endpoint: {url}",
        "Copy the token now: it is not shown again, nor kept anywhere but in your agent's "
        "settings. Claude Code, for example:",
        f"  claude mcp add --transport http nbchat {url} --header "
        f"\"Authorization: Bearer <the token>\"",
    ]
    if getattr(_shell(), "kernel", None) is None:  # a terminal: nothing of it is saved
        print("\n".join([lines[0], f"Token: {secret}", *lines[1:]]))
        return
    import ipywidgets as widgets
    from IPython.display import display

    class SecretBox(widgets.Text):
        def __repr__(self) -> str:  # the text/plain a saved notebook keeps: never the value
            return "(the agent token, shown in this widget only)"

    box = SecretBox(value=secret, disabled=True, description="Token",
                    layout=widgets.Layout(width="100%"))  # fmt: skip
    print("\n".join(lines))
    display(box)  # a widget's value is not in the saved notebook's outputs


def revoke_token(owner: Any, opts: Any, text: str) -> None:
    """``--revoke-agent ID``: the token stops working at once."""
    try:
        done = token_store(owner.chat).revoke(opts.revoke_agent)
    except InputError as error:
        raise UsageError(str(error)) from None
    print(f"Revoked agent token {done.id} ({done.label}); requests with it are refused.")


def show_agents(owner: Any, opts: Any, text: str) -> None:
    """``--agents``: the tokens, then a prompt for each agent call waiting for this notebook."""
    chat: Chat = owner.chat
    tokens = token_store(chat).tokens()
    if tokens:
        print("Agent tokens (id, label, tools, scope, state):")
        for token in tokens:
            print(f"  {token.id}  {markup.for_terminal(token.label)}  {','.join(token.classes)}  "
                  f"{_scope(token)}  {token.state()}")  # fmt: skip
    else:
        print("No agent tokens yet: %chat --agent-token LABEL mints one.")
    mine, elsewhere = _waiting(chat)
    for call in elsewhere:
        where = markup.for_terminal(str(call.arguments.get("notebook", "")))
        print(f"Waiting in {where} (answer it there): {markup.for_terminal(call.prompt.question)}")
    from . import _kernel as _agent_kernel

    if elsewhere and not _agent_kernel.knows_its_notebook():
        print("This kernel does not know yet which notebook it is (the server tells it when "
              "it shows it a call): a call for this notebook shows here after the agent's "
              "next call_status.")
    if not mine:
        print("No agent call waits for this notebook.")
        return
    print(f"{len(mine)} agent call{'s' * (len(mine) > 1)} wait{'s' * (len(mine) == 1)} for "
          "your answer here:")  # fmt: skip
    from ..cell.prompts import show_tool_prompts
    from ..cell.render import detect_mode

    live = detect_mode() == "live"  # a person at the notebook: prompts to click
    for call in mine:
        _agent_kernel.seen(call.call_id)
        if live:
            show_tool_prompts(chat, [call])
        else:
            handle = f"{call.thread_id}.{call.turn}"
            print(f"[{handle}] {call.question}\n    answer with %chat --answer {handle} run")


def _waiting(chat: Chat) -> tuple[list[Any], list[Any]]:
    """The agents' waiting calls: this notebook's, and the others'."""
    from . import _kernel as _agent_kernel  # the kernel's side loads with the first agent command

    calls = _agent_kernel.agent_calls(chat)
    mine = [call for call in calls if _agent_kernel.is_mine(call.arguments.get("notebook"))]
    return mine, [call for call in calls if call not in mine]


def _scope(token: AgentToken) -> str:
    paths = [p or "the whole server" for p in token.paths]
    return ", ".join(markup.for_terminal(p) for p in paths)


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()
