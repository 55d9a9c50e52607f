"""The ``%chat`` magic's settings: the traits ``%config ChatMagics.…`` sets.

:class:`ChatSettings` is the base of :class:`~.magics.ChatMagics`; IPython
configures the magic by its class name, and traitlets reads a base class's
traits under the subclass's name, so ``%config ChatMagics.model = "…"`` stays
how people set them. Unset settings come from the ``NBCHAT_*`` variables.
"""

from __future__ import annotations

import sys
from typing import Any

from IPython.core.magic import Magics
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode, observe, validate

from ...base.errors import NbchatError
from ._shell import forget_config_key

__all__ = ["API_KEY_REFUSED", "ChatSettings"]

API_KEY_REFUSED = (
    "ChatMagics.api_key is not a setting, and the value was discarded; give the key with "
    "%chat --key (a hidden prompt) or the NBCHAT_API_KEY environment variable, set before "
    "starting Jupyter"
)


class ChatSettings(Magics):
    """What ``%config ChatMagics.…`` sets; the panels opened from the magics follow ``prices``."""

    model = Unicode(None, allow_none=True, help="Model of new threads.").tag(config=True)
    base_url = Unicode(None, allow_none=True, help="The endpoint's URL.").tag(config=True)
    provider = Unicode(None, allow_none=True, help="'openai' or 'ollama'.").tag(config=True)
    store = Unicode(None, allow_none=True, help="Where threads are kept.").tag(config=True)
    user = Unicode(None, allow_none=True, help="Whose threads.").tag(config=True)
    system = Unicode(None, allow_none=True, help="System prompt of new threads.").tag(config=True)
    live = Bool(
        None, allow_none=True,
        help="True: stream answers live; False: render them once, at the end; "
        "None: live when a person is at the notebook, once under nbclient/nbval.",
    ).tag(config=True)
    tools = List(
        Unicode(),
        help="Names of variables holding tools the model may call "
        "(@nbchat.tool functions, ClientTool instances), besides the built-in client tools.",
    ).tag(config=True)
    permissions = List(
        Unicode(), help="Permissions the current user has, for client tools' requirements."
    ).tag(config=True)
    api_key = Unicode(
        None, allow_none=True,
        help="Refused: give the key with %chat --key, or set the NBCHAT_API_KEY environment "
        "variable.",
    ).tag(config=True)
    panel_area = CaselessStrEnum(
        ("cell", "side"), "cell",
        help="Where %chat --panel opens the panel: 'cell', or 'side' (JupyterLab's right "
        "side area).",
    ).tag(config=True)
    prices = Dict(
        help="Dollars per million input and output tokens by model, for the panel's cost "
        'estimates: {"gpt-4o-mini": [0.15, 0.6]}; NBCHAT_PRICES when empty.',
    ).tag(config=True)
    options = Dict(
        help="Generation options for this session, e.g. {'max_tokens': 500, 'temperature': "
        "0.2}; a thread's options and a question's flags win over them.",
    ).tag(config=True)
    builtin_tools = Bool(
        None, allow_none=True,
        help="Offer the built-in client tools (ask_user, choose, confirm): True, False, or "
        "None for on except with the local model and NBCHAT_TOOLLESS_MODELS.",
    ).tag(config=True)
    max_updates_per_second = Float(
        10.0, help="At most this many live display updates a second (fewer for long answers)."
    ).tag(config=True)
    notebook_context = Bool(
        False,
        help="Attach @notebook to every question: the notebook's cells in order, with their "
        "outputs as bounded, scrubbed text, and the cells run out of order named.",
    ).tag(config=True)
    agent = Bool(
        False,
        help="Offer the notebook tools to every question, as --agent does: the model may list "
        "variables, describe them, read cells and the last error, and run code after your yes.",
    ).tag(config=True)
    approval = Unicode(
        "always",
        help="When code the model wants to run needs your yes: 'always', 'risky' (all code "
        "but what the allowlist proves harmless) or 'never-ask'. NBCHAT_MAX_APPROVAL caps it.",
    ).tag(config=True)
    mode = CaselessStrEnum(
        ("ask", "plan", "accept-edits"), "ask",
        help="What the notebook tools' changes do in threads that set none (%chat --mode "
        "sets a thread's): 'ask' (every change and run waits for your answer), 'plan' (the "
        "model reads and plans, no tool that changes the notebook is offered), "
        "'accept-edits' (changes land, undoable; runs still ask). NBCHAT_MAX_APPROVAL=always "
        "caps accept-edits to ask.",
    ).tag(config=True)
    notebook = Unicode(
        "",
        help="The notebook file the notebook tools read and change; empty: the one open in "
        "JupyterLab on this kernel, else this kernel's saved notebook.",
    ).tag(config=True)
    instructions = CaselessStrEnum(
        ("auto", "off"), None, allow_none=True,
        help="'auto': add the nearest AGENTS.md or .nbchat.md (the notebook's folder or a "
        "parent up to your home folder, only from folders only you can write) to the system "
        "prompt; 'off'; None: NBCHAT_INSTRUCTIONS, else off.",
    ).tag(config=True)
    context_budget = Int(
        2000, help="Tokens each @name (or --figure, --fix) description may take at most."
    ).tag(config=True)
    budget = Float(
        None, allow_none=True,
        help="Dollars a thread may cost (at `prices`) before a question asks first; None: "
        "NBCHAT_BUDGET. The administrator's NBCHAT_MAX_BUDGET caps it.",
    ).tag(config=True)
    kernel_budget = Float(
        None, allow_none=True,
        help="Dollars this kernel may spend before a question asks first; None: "
        "NBCHAT_KERNEL_BUDGET. NBCHAT_MAX_KERNEL_BUDGET caps it.",
    ).tag(config=True)
    window = CaselessStrEnum(
        ("drop", "summarize"), None, allow_none=True,
        help="When a thread outgrows the model's window: 'drop' its oldest turns from what is "
        "sent, or 'summarize' them (a summary the model writes once, kept with the thread); "
        "None: NBCHAT_WINDOW, else drop. A thread's own setting wins.",
    ).tag(config=True)

    @validate("api_key")
    def _validate_api_key(self, proposal: Any) -> None:
        """Refuse a key in %config at once; it is never kept, here or in any config."""
        if proposal["value"] is not None:
            print(f"UsageError: {API_KEY_REFUSED}", file=sys.stderr)
            forget_config_key(self.shell)
        return None

    @observe("prices")
    def _observe_prices(self, change: Any) -> None:
        """Prices given while a panel is open apply to it at once, to answers shown and to come."""
        for panel in list(getattr(self, "panels", ())):
            try:
                panel.prices = dict(change["new"]) or None
            except NbchatError as error:
                panel.show_error(error)
