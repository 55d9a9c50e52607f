"""The chat panel's state: the synced traits the page draws, and where its code comes from.

:class:`PanelState` is the base of :class:`~.widget.ChatPanel`. Its traits
are the page's whole state; the panel's methods change several of them
together (under ``hold_sync``), and the page sends intents back
(:mod:`._intents`). Only HTML made by :mod:`nbchat.base.markup` in Python is
in a trait that the page shows as HTML (``messages``' answers,
``streaming_message``, ``preview_html``); every other text is set with
``textContent``.
"""

from __future__ import annotations

import anywidget
import ipywidgets as widgets
from traitlets import Bool, Dict, Float, Instance, Int, List, Unicode

from . import _assets as _panel_assets

__all__ = ["PLACEHOLDER", "PanelState"]

PLACEHOLDER = "Ask something… (@name attaches a variable)"


class PanelState(anywidget.AnyWidget):
    """The synced traits of the chat panel; the page's state, drawn by the script in ``js/``."""

    _esm = _panel_assets.loader()  # the code itself comes from the server, else on request

    area = Unicode("cell", help="'cell' or 'side'.").tag(sync=True)
    threads = List(Dict(), help="The store's threads, newest first: id, title, label.").tag(
        sync=True
    )
    thread_id = Int(None, allow_none=True, help="The thread shown (None: none yet).").tag(
        sync=True
    )
    title = Unicode("", help="The shown thread's title.").tag(sync=True)
    models = List(Unicode(), help="The models the picker offers.").tag(sync=True)
    model = Unicode("", help="The model the next question goes to.").tag(sync=True)
    mode = Unicode("chat", help="'chat' (no notebook tools), or the notebook agent's mode the "
                   "next question is asked in: 'ask', 'plan', 'accept-edits'.").tag(sync=True)
    agents = List(Dict(), help="The coding agents that may answer (name, label): installed "
                  "and allowed; empty hides the picker.").tag(sync=True)
    agent = Unicode("", help="Who answers the next question: '' (nbchat's model) or an "
                    "agent's name; a thread of an agent shows its own.").tag(sync=True)
    model_groups = List(Dict(), help="The models by connected endpoint: endpoint, label, "
                        "models, error (one line); empty with one endpoint.").tag(sync=True)
    messages = List(Dict(), help="The turns shown, oldest first (see jupyter._messages).").tag(
        sync=True
    )
    hidden = Int(0, help="How many earlier turns 'Show earlier' would add.").tag(sync=True)
    streaming_message = Dict(help="The answer streaming now: query, html, model.").tag(sync=True)
    streaming = Bool(False, help="An answer streams: Enter waits, Escape stops it.").tag(sync=True)
    prompts = List(Instance(widgets.Widget), help="Client-tool prompts waiting here.").tag(
        sync=True, **widgets.widget_serialization
    )
    status_text = Unicode("", help="The status line.").tag(sync=True)
    status_kind = Unicode("dim", help="'dim' or 'error'.").tag(sync=True)
    usage_text = Unicode("", help="The thread's usage totals.").tag(sync=True)
    tools_line = Unicode("", help="Whose MCP tools the next question may use ('' if none).").tag(
        sync=True
    )
    gauge = Dict(help="Context used on the last turn, the model's size, cached tokens, cost.").tag(
        sync=True
    )
    confirm = Unicode("", help="The question a delete (or a question over budget) asks first "
                      "('' when none).").tag(sync=True)  # fmt: skip
    confirm_action = Unicode("Delete", help="What the confirm bar's yes does.").tag(sync=True)
    preview_html = Unicode("", help="The previewed request, as HTML made by nbchat.base.markup "
                           "('' when none shows).").tag(sync=True)  # fmt: skip
    variables = List(Unicode(), help="The notebook's variables the chips offer.").tag(sync=True)
    picked = List(Unicode(), help="The variables picked to go with the next question.").tag(
        sync=True
    )
    attachable = Bool(False, help="Whether there is a notebook to attach variables from.").tag(
        sync=True
    )
    # Typed text arrives as messages (see js/70-input.js); echoing it back would
    # overwrite what was typed since.
    value = Unicode("", help="The text in the input.").tag(sync=True, echo_update=False)
    placeholder = Unicode(PLACEHOLDER, help="Shown while the input is empty.").tag(sync=True)
    history = List(Unicode(), help="Earlier questions, oldest first, for Up.").tag(sync=True)
    poll_seconds = Float(1.0, help="Seconds between polls while things change; 0: never.").tag(
        sync=True
    )
    _focus = Int(0).tag(sync=True)
    _focus_steal = Bool(False).tag(sync=True)
