"""The session's commands: the endpoint's key, its models, the panel, the MCP servers.

Each handler takes the magics, the parsed options and the text after them, as
:data:`~.magics.HANDLERS` calls it. They act on the session, not on a thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ...base import markup

if TYPE_CHECKING:
    from .magics import ChatMagics

__all__ = ["KEY_NO_STDIN", "KEY_PROMPT", "ask_key", "list_mcp", "list_models", "open_panel",
           "panel_for"]  # fmt: skip

KEY_PROMPT = "API key (hidden): "
KEY_NO_STDIN = (
    "%chat --key asks at a hidden prompt, and this notebook cannot show one (it runs "
    "without a person, e.g. under nbclient); set NBCHAT_API_KEY in the environment "
    "before starting Jupyter instead"
)


def list_mcp(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --mcp``: the configured MCP servers and their tools."""
    from ...mcp.tools import overview

    if text:
        raise UsageError("--mcp before a question names the servers to use, or off: "
                         "%chat --mcp files QUESTION; alone it lists them")
    print(markup.for_terminal(overview()))


def ask_key(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --key``: the endpoint's key at a hidden prompt, kept in this process only."""
    import getpass

    from IPython.core.error import StdinNotImplementedError

    from ...base._secrets import redact_url, remember

    if text:  # never echoed: it may be the key itself
        raise UsageError("--key takes nothing after it: run %chat --key alone and type "
                         "the key at its hidden prompt, not in the cell (cells are saved)")
    endpoint = magics.chats.endpoint()
    if not endpoint:
        raise UsageError("no endpoint is set for the key: set one first, e.g. "
                         "%env NBCHAT_BASE_URL=https://api.openai.com/v1, then %chat --key")
    try:
        key = getpass.getpass(KEY_PROMPT).strip()
    except StdinNotImplementedError:
        raise UsageError(KEY_NO_STDIN) from None
    except EOFError:
        key = ""
    if not key:
        raise UsageError("no key given; nothing changed")
    remember(key)
    magics.chats.set_key(endpoint, key)
    kept = _offer_to_keep(endpoint, key)
    if kept:
        print(f"The key for {redact_url(endpoint)} is set, and kept for {kept}: new kernels "
              f"use it without --key. It was not shown.")
    else:
        print(f"The key for {redact_url(endpoint)} is set in this kernel's memory only; "
              f"it was not shown and is saved nowhere.")


def _offer_to_keep(endpoint: str, key: str) -> str:
    """Ask whether to keep ``key`` for ``endpoint``; what it is kept as and where, or ""."""
    from IPython.core.error import StdinNotImplementedError

    from ...base import connections
    from ...base.config import resolve
    from ...base.keys import key_store

    store = key_store()
    name = connections.name_for(endpoint)
    try:
        answer = input(f"Remember it for {name} in {store.where()}? [y/N] ")
    except (StdinNotImplementedError, EOFError, OSError):  # no one to ask: memory only
        return ""
    if answer.strip().lower() not in ("y", "yes"):
        return ""
    store.set(name, key)
    connections.connect_url(name, endpoint, resolve(base_url=endpoint).provider)
    return f"{name} in {store.where()}"


def list_models(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --models``: the endpoint's models, the default marked."""
    from ...llm.routed import RoutedClient
    from ..cell._views import grouped_models_list, models_list

    chat = magics.chat
    if isinstance(chat.llm, RoutedClient):
        body, plain = grouped_models_list(chat.llm.endpoint_models(), chat.llm.default_model())
    else:
        body, plain = models_list(chat.list_models(), chat.llm.default_model())
    display(markup.bundle(body, plain), raw=True)


def open_panel(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --panel [--side]``: the panel in this cell or JupyterLab's side area."""
    display(panel_for(magics, side=bool(opts.side or magics.panel_area == "side")))


def panel_for(magics: ChatMagics, *, side: bool, focus: bool = True) -> Any:
    """A panel on the magics' Chat that follows their prices; ``side``: in the side area
    (``focus``: with the keyboard, as opening it on purpose gives it)."""
    try:
        from ..panel._side import side_panel
        from ..panel.widget import ChatPanel
    except ImportError as err:
        raise UsageError(f"the panel is not available: {err}; pip install nbchat") from err
    prices = dict(magics.prices) or None
    if side:
        panel = side_panel(magics.chat, prices=prices, focus=focus)  # in a cell: a note
    else:
        panel = ChatPanel(chat=magics.chat, prices=prices)
    magics.panels.add(panel)
    return panel
