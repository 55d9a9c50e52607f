"""Chat with large language models inside Jupyter.

``%chat`` / ``%%chat`` magics and a widget panel in notebooks; :class:`Chat`
(threads kept per user), :class:`LLM` and :class:`ChatHistory` in any Python
script. ``import nbchat`` never imports IPython or ipywidgets: the Jupyter
layer loads only through the functions at the bottom of this module. It
imports only the errors; every other public name is imported the first time
it is used (``nbchat.Chat``, ``from nbchat import Chat``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base.errors import (
    AgentError,
    AgentGone,
    AgentRefused,
    AlreadyAnswered,
    AuthenticationError,
    ConfigError,
    ContextOverflow,
    EmptyAnswer,
    EndpointMismatch,
    InputError,
    InvalidToolAnswer,
    InvalidToolArguments,
    KeyStoreError,
    LLMConnectError,
    LLMError,
    LLMTimeout,
    MalformedStream,
    McpServerError,
    ModelNotAllowed,
    ModelNotFound,
    NbchatError,
    NoPendingCall,
    OptionRejected,
    OverBudget,
    RateLimited,
    ServerError,
    StaleProposal,
    StoreCorrupt,
    StoreError,
    StoreLocked,
    StoreUnavailable,
    StoreUnsafe,
    StoreVersionError,
    StreamCutOff,
    ThreadNotFound,
    ToolDefinitionError,
    ToolError,
    ToolRequirementsNotMet,
    TurnInterrupted,
)

if TYPE_CHECKING:
    from .base.records import AnsweredCall, PendingCall, Prompt
    from .context import ContextItem, describe
    from .context.run_code import RunCode
    from .engine._compaction import Summary
    from .engine._preview import Preview, PreviewPart
    from .engine.chat import LLM, Answer, AnswerText, Chat
    from .engine.history import ChatHistory, Message
    from .store._open import open_store
    from .store.base import SearchHit, Store
    from .store.postgres import PostgresStore
    from .store.tinydb import ThreadStore
    from .tools import AskUser, Choose, ClientTool, Confirm, Requirement, ToolContext, tool

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "AgentError",
    "AgentGone",
    "AgentRefused",
    "AlreadyAnswered",
    "Answer",
    "AnswerText",
    "AnsweredCall",
    "AskUser",
    "AuthenticationError",
    "Chat",
    "ChatHistory",
    "Choose",
    "ClientTool",
    "ConfigError",
    "Confirm",
    "ContextItem",
    "ContextOverflow",
    "EmptyAnswer",
    "EndpointMismatch",
    "InputError",
    "InvalidToolAnswer",
    "InvalidToolArguments",
    "KeyStoreError",
    "LLMConnectError",
    "LLMError",
    "LLMTimeout",
    "MalformedStream",
    "McpServerError",
    "Message",
    "ModelNotAllowed",
    "ModelNotFound",
    "NbchatError",
    "NoPendingCall",
    "OptionRejected",
    "OverBudget",
    "PendingCall",
    "PostgresStore",
    "Preview",
    "PreviewPart",
    "Prompt",
    "RateLimited",
    "Requirement",
    "RunCode",
    "SearchHit",
    "ServerError",
    "StaleProposal",
    "Store",
    "StoreCorrupt",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "StoreUnsafe",
    "StoreVersionError",
    "StreamCutOff",
    "Summary",
    "ThreadNotFound",
    "ThreadStore",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolRequirementsNotMet",
    "TurnInterrupted",
    "describe",
    "load_ipython_extension",
    "notebook_tools",
    "open_store",
    "panel",
    "tool",
    "unload_ipython_extension",
]


_LAZY = {  # each public name but the errors, and the module that defines it
    "AnsweredCall": ".base.records",
    "PendingCall": ".base.records",
    "Prompt": ".base.records",
    "ContextItem": ".context",
    "describe": ".context",
    "RunCode": ".context.run_code",
    "Summary": ".engine._compaction",
    "Preview": ".engine._preview",
    "PreviewPart": ".engine._preview",
    "LLM": ".engine.chat",
    "Answer": ".engine.chat",
    "AnswerText": ".engine.chat",
    "Chat": ".engine.chat",
    "ChatHistory": ".engine.history",
    "Message": ".engine.history",
    "open_store": ".store._open",
    "SearchHit": ".store.base",
    "Store": ".store.base",
    "ThreadStore": ".store.tinydb",
    "AskUser": ".tools",
    "Choose": ".tools",
    "ClientTool": ".tools",
    "Confirm": ".tools",
    "Requirement": ".tools",
    "ToolContext": ".tools",
    "tool": ".tools",
    "PostgresStore": ".store.postgres",
}


def __getattr__(name: str) -> Any:
    """A public name, imported when first asked for: ``import nbchat`` stays cheap."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbchat' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%chat`` / ``%%chat`` (``%load_ext nbchat``; safe to call twice)."""
    from .jupyter.magic.magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Remove ``%chat`` / ``%%chat``."""
    from .jupyter.magic.magics import unload

    unload(ipython)


def notebook_tools(
    shell: Any = None, *, approval: str = "always", mode: str = "ask", notebook: str = ""
) -> list[Any]:
    """Tools that let the model read this notebook and, after your yes, change and run it.

    ``read_cells``, ``list_variables``, ``describe_variable(name)``,
    ``read_cell(n)`` and ``last_error`` only read. ``insert_cell``,
    ``edit_cell``, ``delete_cell``, ``move_cell`` and ``execute_cell`` are
    proposals you accept (chunk by chunk) or reject, as ``mode`` says (``"ask"``,
    ``"plan"``: none offered, ``"accept-edits"``: changes land, executing asks).
    ``run_code`` waits for Run, Edit or Reject unless the ``approval`` policy
    (``"always"``, ``"risky"``, ``"never-ask"``) lets the code run; both are
    capped by ``NBCHAT_MAX_APPROVAL``. ``notebook`` names the notebook file they
    change (by default the one open in JupyterLab, else this kernel's saved file).
    Use as ``Chat(tools=nbchat.notebook_tools())`` in a notebook.
    """
    from .context.cell_tools import effective_mode
    from .jupyter.notebook.tools import notebook_tools as make

    effective_mode(mode)  # a wrong mode is an error now, not at the model's first call
    return make(shell, approval=approval, mode=lambda: mode, notebook=notebook)


def panel(*, side: bool = False, **kwargs: Any) -> Any:
    """The chat panel widget (threads, model picker, conversation, input).

    With ``side=True`` it opens in JupyterLab's right side area (one per
    kernel; asking again brings it back), through ``sidecar``; elsewhere
    it falls back to the cell with a one-line note. ``kwargs`` go to
    :class:`nbchat.jupyter.panel.widget.ChatPanel`.
    """
    if side:
        from .jupyter.panel._side import side_panel

        return side_panel(**kwargs)
    from .jupyter.panel.widget import ChatPanel

    return ChatPanel(**kwargs)
