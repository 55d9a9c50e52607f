"""The names by which one of nbchat's processes reaches another, each written once.

The Jupyter Server extension serves routes that the browser and outside agents
call; the server and the lab extension run calls inside a notebook's kernel,
always of :mod:`nbchat.jupyter.kernel_api`. Python imports these names; the
lab extension's TypeScript spells the same strings, and a test compares them.
"""

from __future__ import annotations

MCP_ROUTE = "nbchat/mcp"  # outside agents' MCP endpoint (Streamable HTTP)
COMPLETE_ROUTE = "nbchat/complete"  # code suggestions for the inline completer
STATIC_ROUTE = "nbchat/static/"  # the panel's script and style, for the page
CONNECTIONS_ROUTE = "nbchat/connections"  # the endpoints connected once, for the Connect dialog
CONNECTIONS_TEST_ROUTE = "nbchat/connections/test"  # list an endpoint's models with a key
CONNECTIONS_CHOICE_ROUTE = "nbchat/connections/choice"  # the chat's and suggestions' models
CONNECT_EVENT = "nbchat:connect"  # the DOM event on document that opens the Connect dialog
KERNEL_API = "nbchat.jupyter.kernel_api"
KERNEL_CALLS = ("variables_text", "describe_text", "wake", "open_from_lab", "help_with_error",
                "ask_in_cell")


def kernel_call(name: str, *args: object) -> str:
    """The expression a kernel evaluates to run ``kernel_api.<name>(*args)`` (each by repr),
    importing nothing of the notebook's namespace."""
    if name not in KERNEL_CALLS:
        raise ValueError(f"{name!r} is not a kernel call; they are {', '.join(KERNEL_CALLS)}")
    arguments = ", ".join(repr(argument) for argument in args)
    return f"__import__({KERNEL_API!r}, fromlist=['_']).{name}({arguments})"
