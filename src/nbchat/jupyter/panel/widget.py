"""The chat panel, one anywidget, and the client-tool prompts it shows inline.

:class:`ChatPanel` (``nbchat.panel()``, ``%chat --panel``) is a chat over the
same store the magics use: a header with the thread's title and a thread
switcher, the conversation as messages, and an input with the model picker
and the context chips, and a Preview of the request a question would send.
Its front end is ``_panel.js`` and ``_panel.css``
beside this module; its state is in traits, and the browser sends intents
(``submit``, ``stop``, ``select``, ``rename``, …) as custom messages. Only
HTML made by :mod:`nbchat.base.markup` in Python reaches the page as HTML; every
other text (questions, titles, model names, usage) is set with
``textContent``. :func:`show_tool_prompts` (in :mod:`nbchat.jupyter.cell.prompts`) is
what the cell renderer calls when a turn suspends; in the panel its prompts
are ipywidgets shown inside the panel.

Each turn is one record of :attr:`ChatPanel.messages`; the answer streaming
now is :attr:`ChatPanel.streaming_message`, so an update while it streams
sends that one message, never the conversation.

How Escape stops an answer. When a person sends from the browser, the answer
streams in a background thread and the widget callback returns at once; the
stop request (a comm message) calls the answer's :meth:`~nbchat.Answer.stop`,
which shuts the connection down, so the answer ends at once even while the
model sends nothing (the engine saves it as interrupted). Measured in
JupyterLab + Chromium on ipykernel 7.4, Escape to the interrupted answer on
screen: 85 ms with the stream in a thread, 182 ms with it in the callback on
the main thread. That 7.4 handled the stop message while the callback ran is
not something to build on: a kernel that queues comm messages behind a running
handler, as kernels do behind a blocking cell, would see it only after the
answer. The thread also leaves the kernel free to run cells while the panel
answers. A kernel interrupt, which stops answers in cells, does not reach the
thread: Escape and Stop do. A :meth:`ChatPanel.submit` from code streams before
it returns.

Following the store costs one ``stat`` of the store folder per look (about
3 µs; with PostgreSQL, one listing query); the browser asks while the panel
is visible, never with a question unanswered: every ``poll_seconds`` after
something changed or the person used the panel, then less often (up to four
times as long) while nothing does. Each look costs the kernel about 2.5 ms,
nearly all of it ipykernel handling the message (benchmarks/panel_browser.py).

Why this module is longer than the others: :class:`ChatPanel` is one
anywidget, its synced traits are the page's state, and each method is an
intent that changes several of them together (under ``hold_sync``). What
needs no widget state already lives elsewhere: the turns as messages and the
gauge (:mod:`._messages`), the live answer's sink (:mod:`._stream`),
the front end's code (:mod:`._assets`), the side area (:mod:`._side`),
the prompts (:mod:`nbchat.jupyter.cell.prompts`). Cutting the class into mixins would put the
traits in one file and the methods that keep them consistent in another.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anywidget
import ipywidgets as widgets
from IPython import get_ipython
from traitlets import Bool, Dict, Float, Instance, Int, List, Unicode

from ...base import markup
from ...base.content import ContextItem
from ...base.errors import InputError, NbchatError, OverBudget
from ...base.events import Event
from ...engine._preview import Preview
from ...engine._usage import Price, dollars, parse_prices, prices_from_env, thread_usage_line
from ...engine.chat import Chat
from ...mcp.tools import servers_line
from ...store.base import Thread, ThreadInfo
from ..cell._preview_view import preview_html
from ..cell.prompts import (
    OutputHandle,
    PromptGroup,
    ToolPrompt,
    hosting,
    pending_prompts,
    show_tool_prompts,
    shows_errors,
)
from ..cell.render import RenderResult, detect_mode, render_turn
from . import _assets as _panel_assets
from ._messages import context_gauge, conversation_view, message, thread_view
from ._stream import LiveSink, Stoppable, mentioned

__all__ = [
    "ChatPanel",
    "OutputHandle",
    "PromptGroup",
    "ToolPrompt",
    "conversation_view",
    "pending_prompts",
    "show_tool_prompts",
]

AREAS = ("cell", "side")
HISTORY_SIZE = 50
SIDE_NOTE = "nbchat: the chat panel is open in JupyterLab's right side area."
PLACEHOLDER = "Ask something… (@name attaches a variable)"


@dataclass(frozen=True)
class Shown:
    """What the panel shows now, as a display's mimebundle (``data``) and its plain text."""

    data: dict[str, str]

    @property
    def text(self) -> str:
        return str(self.data.get("text/plain", ""))


class ChatPanel(anywidget.AnyWidget):
    """A chat over the store's threads: the conversation, the input, the threads, in one widget.

    Parameters
    ----------
    chat
        The Chat to use (the magics pass theirs, so both see the same store);
        by default one made from ``chat_kwargs`` and the ``NBCHAT_*`` settings.
    thread_id
        The thread to open; the newest one by default.
    prices
        US dollars per million input and output tokens, by model
        (``{"gpt-4o-mini": [0.15, 0.6]}``), for the cost estimates; by default
        ``NBCHAT_PRICES``. Without a price only the token counts show.
        Setting :attr:`prices` later redraws the costs at once.
    background
        Stream answers in a background thread, so that the kernel stays free and
        Escape (or the Stop button) can stop them. By default: when a person
        pressed Enter or Send in the browser; a :meth:`submit` from code streams
        before it returns (a kernel interrupt stops it, as in a cell).
    page_size
        How many of a thread's last turns to show at first; "Show earlier"
        adds as many again.
    area
        ``"cell"`` or ``"side"`` (where ``nbchat.panel(side=True)`` puts it).
    **chat_kwargs
        Passed to :class:`~nbchat.Chat` when ``chat`` is not given.

    Code drives the panel as the browser does: set :attr:`value` and call
    :meth:`submit`; :meth:`select`, :meth:`new_thread`, :meth:`rename`,
    :meth:`delete`, :meth:`show_earlier`. The panel follows the store: after
    each cell runs, and on the browser's poll about once a second while it
    is visible, it looks (one ``stat`` of the store folder) and shows threads
    made or continued elsewhere.
    """

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
    # Typed text arrives as messages (see _panel.js); echoing it back would
    # overwrite what was typed since.
    value = Unicode("", help="The text in the input.").tag(sync=True, echo_update=False)
    placeholder = Unicode(PLACEHOLDER, help="Shown while the input is empty.").tag(sync=True)
    history = List(Unicode(), help="Earlier questions, oldest first, for Up.").tag(sync=True)
    poll_seconds = Float(1.0, help="Seconds between polls while things change; 0: never.").tag(
        sync=True
    )
    _focus = Int(0).tag(sync=True)
    _focus_steal = Bool(False).tag(sync=True)

    def __init__(
        self,
        chat: Chat | None = None,
        *,
        thread_id: int | None = None,
        prices: Mapping[str, Any] | None = None,
        background: bool | None = None,
        page_size: int = 20,
        area: str = "cell",
        **chat_kwargs: Any,
    ) -> None:
        self._shell: Any = None
        if chat is not None and chat_kwargs:
            names = ", ".join(sorted(chat_kwargs))
            raise InputError(f"pass either chat or Chat settings ({names}), not both")
        if area not in AREAS:
            raise InputError(f"area must be one of {', '.join(AREAS)}, got {area!r}")
        super().__init__(area=area)
        self.chat = chat if chat is not None else Chat(**chat_kwargs)
        self._prices: dict[str, Price] = (
            prices_from_env() if prices is None else parse_prices(prices, source="prices")
        )
        self.background = background
        self.page_size = max(1, int(page_size))
        self._shown_turns = self.page_size
        self._infos: dict[int, ThreadInfo] = {}
        self._stamp: object = None
        self._turn: Stoppable | None = None
        self._worker: threading.Thread | None = None
        self._answer_callbacks = widgets.CallbackDispatcher()
        self._thread_callbacks = widgets.CallbackDispatcher()
        self.live = LiveSink(self)
        shell = get_ipython()
        from ..notebook.tools import Notebook

        self._notebook = Notebook(shell) if shell is not None else None
        self.attachable = self._notebook is not None
        self.on_msg(self._on_front_end_msg)
        self.refresh(select=thread_id)
        self.refresh_variables()
        if shell is not None:
            shell.events.register("post_run_cell", self._on_post_run_cell)
            self._shell = shell

    def __repr__(self) -> str:
        return f"ChatPanel({self.chat!r}, thread_id={self.thread_id})"

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        if self.area == "side":  # shown in the side area: a cell gets a line saying so
            return {"text/plain": SIDE_NOTE}
        return super()._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Close the panel and stop following the store."""
        if getattr(self, "_shell", None) is not None:
            with contextlib.suppress(ValueError):
                self._shell.events.unregister("post_run_cell", self._on_post_run_cell)
            self._shell = None
        super().close()

    # -- what it shows -------------------------------------------------------------
    @property
    def status(self) -> str:
        """The status line's text (errors start with ‼)."""
        return self.status_text

    @property
    def usage(self) -> str:
        """The thread's usage totals as shown in its header ("" when none were reported)."""
        return self.usage_text

    @property
    def is_streaming(self) -> bool:
        """Whether an answer is streaming into the panel now."""
        return self.streaming

    @property
    def conversation(self) -> Shown:
        """The turns shown, as one safe-HTML display and its plain text."""
        thread = None if self.thread_id is None else self.chat.store.get(self.thread_id)
        body, plain = thread_view(thread, self._shown_turns, self._prices)
        return Shown(markup.bundle(body, plain))

    @property
    def prices(self) -> dict[str, Price]:
        """Prices by model; setting them (a mapping or its JSON) redraws the costs at once."""
        return self._prices

    @prices.setter
    def prices(self, value: Mapping[str, Any] | None) -> None:
        self._prices = prices_from_env() if value is None else parse_prices(value, source="prices")
        if not self.streaming:
            self._render_conversation()

    def show_error(self, error: BaseException | str) -> None:
        """Show ``error`` in the status line."""
        self._set_status(f"{markup.MARK_PROBLEM} {error}", "error")

    # -- what a person does ----------------------------------------------------------
    @shows_errors
    def submit(self, over_budget: bool = False) -> None:
        """Ask :attr:`value` in the shown thread (a new one if none), as Enter does.

        A question over a budget sends nothing and asks in the confirm bar; its
        "Send anyway" (or ``submit(over_budget=True)``) sends it.
        """
        if self.streaming:
            raise InputError("an answer is still streaming; stop it (Escape) or wait for it")
        query = self.value
        if not query.strip():
            raise InputError("the question is empty; type something to ask")
        model = self.model or None
        thread_id = self.thread_id
        if thread_id is None:
            thread_id = self.chat.new_thread(model)
        named, note = mentioned(query)
        picked = self._picked_context()
        self.chat.prices = self._prices or None
        try:
            events = self.chat.iter_ask(thread_id, query, model=model, context=[*picked, *named],
                                        over_budget=over_budget)  # fmt: skip
        except OverBudget as error:
            if self.thread_id is None:
                self.chat.delete_thread(thread_id)  # made for this question, which waits
            if error.hard:
                raise
            self._ask_budget(error)
            return
        self._set_streaming(True)  # from here the live message shows this turn, not the list
        try:
            self.picked = []
            self.refresh_variables()
            self.value = ""
            self.history = [*self.history[-(HISTORY_SIZE - 1):], query]
            self._set_status(note)
            self._load_threads(thread_id)
        except BaseException:
            self._set_streaming(False)
            raise
        self._start(events, query)

    @shows_errors
    def preview(self) -> Preview | None:
        """Show the request :attr:`value` would send now (Preview button); nothing is sent.

        The picked variables and ``@name`` mentions go with it as with Send,
        and stay picked. The preview's record is returned (None on an error).
        """
        query = self.value
        if not query.strip():
            raise InputError("the question is empty; type what you would ask, then Preview")
        named, note = mentioned(query)
        picked = self._picked_context()
        self.chat.prices = self._prices or None
        shown = self.chat.preview(self.thread_id, query, model=self.model or None,
                                  context=[*picked, *named])  # fmt: skip
        self.preview_html = markup.styled(preview_html(shown)[0])
        self._set_status(note)
        return shown

    def close_preview(self) -> None:
        """Hide the preview."""
        self.preview_html = ""

    def stop(self) -> None:
        """Stop the answer streaming in the background (what Escape and Stop do).

        The answer stops at once, also while the model sends nothing; what came
        so far is kept in the thread, marked interrupted.
        """
        turn = self._turn
        if self.streaming and turn is not None:
            turn.stop()
            self._set_status("Stopping…")

    def select(self, thread_id: int) -> None:
        """Show thread ``thread_id``."""
        self._refuse_while_streaming("switch threads")
        self.chat.store.get(thread_id)  # ThreadNotFound, with its message, if it is not there
        self._load_threads(thread_id)

    @shows_errors
    def new_thread(self) -> None:
        """Start a thread with the picked model and show it."""
        self._refuse_while_streaming("start a thread")
        thread_id = self.chat.new_thread(self.model or None)
        self._load_threads(thread_id)
        self._set_status(f"Started thread {thread_id}; ask something below.")
        self.focus()

    @shows_errors
    def rename(self, title: str) -> None:
        """Give the shown thread ``title``."""
        thread_id = self._require_thread("rename")
        self.chat.update_thread_title(thread_id, title)
        self._load_threads(thread_id)
        self._set_status(f"Renamed thread {thread_id}.")

    @shows_errors
    def delete(self) -> None:
        """Ask whether to delete the shown thread (:meth:`confirm_delete` does it)."""
        self._refuse_while_streaming("delete it")
        thread_id = self._require_thread("delete")
        title = self.chat.store.get(thread_id).title or "Untitled"
        self.confirm = f"Delete thread {thread_id}, “{title}”?"

    @shows_errors
    def confirm_delete(self) -> None:
        """Delete the shown thread, once :meth:`delete` asked."""
        self._refuse_while_streaming("delete it")
        self.confirm = ""
        thread_id = self._require_thread("delete")
        self.chat.delete_thread(thread_id)
        self._load_threads(None)
        self._set_status(f"Deleted thread {thread_id}.")

    def cancel_delete(self) -> None:
        """Keep the thread after all (or send nothing after all)."""
        self.confirm = ""
        self.confirm_action = "Delete"

    def _ask_budget(self, error: OverBudget) -> None:
        where = "this thread's" if error.scope == "thread" else "this kernel's"
        with self.hold_sync():
            self.confirm = (
                f"This question would cost ≈ {dollars(error.estimate or 0)}; with "
                f"{dollars(error.spent)} spent that crosses {where} budget of "
                f"{dollars(error.budget or 0)}. Nothing was sent."
            )
            self.confirm_action = "Send anyway"

    @shows_errors
    def _on_confirm(self) -> None:
        """The confirm bar's yes: delete the thread, or send the question over its budget."""
        if self.confirm_action == "Send anyway":
            self.cancel_delete()
            self.submit(over_budget=True)
        else:
            self.confirm_delete()

    @shows_errors
    def show_earlier(self) -> None:
        """Show ``page_size`` more of the thread's earlier turns."""
        self._shown_turns += self.page_size
        self._render_conversation()

    def refresh(self, select: int | None = None) -> None:
        """Reload the threads and models (threads made elsewhere, e.g. by ``%chat``)."""
        self._set_status("")
        self._load_models()
        self._load_threads(select if select is not None else self.thread_id)

    def refresh_variables(self) -> None:
        """Offer the notebook's current variables as chips; drop picks that no longer exist."""
        names = self._notebook.variable_names() if self._notebook is not None else []
        with self.hold_sync():
            self.variables = names
            self.picked = [name for name in self.picked if name in names]

    def sync(self) -> bool:
        """Show what changed in the store since the panel last looked; whether anything did.

        Costs one ``stat`` when nothing changed; otherwise lists the threads and
        redraws the shown one if it changed (new turns, a new title).
        """
        if self.streaming or self._store_stamp() == self._stamp:
            return False
        before = self._infos.get(self.thread_id) if self.thread_id is not None else None
        self._load_threads(self.thread_id, render=False)
        after = self._infos.get(self.thread_id) if self.thread_id is not None else None
        if after is not None and after != before:
            self._show_thread(self.thread_id, keep=True)
        return True

    def poll(self) -> None:
        """What the browser's poll does: follow the store."""
        self.sync()

    def focus(self, *, steal: bool = False) -> None:
        """Put the keyboard focus in the input, unless the person is busy elsewhere.

        ``steal`` takes it from wherever it is (for a panel just opened on purpose).
        """
        if steal:
            self._focus_steal = True
        self._focus += 1

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background answer to end; whether it has."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
            return not worker.is_alive()
        return True

    def on_answer(self, callback: Callable[[ChatPanel, Any], Any], remove: bool = False) -> None:
        """Call ``callback(panel, result)`` after each turn the panel showed has ended."""
        self._answer_callbacks.register_callback(callback, remove=remove)

    def on_thread_change(
        self, callback: Callable[[ChatPanel, int | None], Any], remove: bool = False
    ) -> None:
        """Call ``callback(panel, thread_id)`` when another thread is shown."""
        self._thread_callbacks.register_callback(callback, remove=remove)

    # -- PromptHost: tool prompts of the panel's turns show inline ---------------
    def add_prompts(self, group: PromptGroup) -> None:
        self.prompts = [*self.prompts, group]

    def resume_turn(self, group: PromptGroup, events: Iterable[Event]) -> None:
        self._start(events)

    # -- the browser's intents -------------------------------------------------------
    def _on_front_end_msg(self, _: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        event = content.get("event")
        value = content.get("value")
        if event in ("value", "submit", "preview") and isinstance(value, str):
            self.set_state({"value": value})  # as a state update: not sent back
        if event == "submit":
            self.submit()
        elif event == "preview":
            self.preview()
        elif event == "stop":
            self.stop()
        elif event == "poll":
            changed = False
            try:
                changed = bool(self._on_poll())
            finally:
                self.send({"event": "polled", "changed": changed})
        elif event == "assets":  # no Jupyter Server serves the code to this front end
            self.send({"event": "assets", "code": _panel_assets.code(),
                       "css": _panel_assets.stylesheet()})  # fmt: skip
        elif event == "focused":
            self._focus_steal = False
        elif event == "select" and isinstance(value, int) and not isinstance(value, bool):
            self._on_select(value)
        elif event == "rename" and isinstance(value, str):
            self.rename(value)
        elif event in _INTENTS:
            getattr(self, _INTENTS[event])()

    @shows_errors
    def _on_select(self, thread_id: int) -> None:
        self.select(thread_id)

    @shows_errors
    def _on_refresh(self) -> None:
        self.refresh()

    @shows_errors
    def _on_poll(self) -> bool:
        return self.sync()

    def _on_post_run_cell(self, *_: Any) -> None:
        try:
            self.sync()
        except NbchatError as error:
            self.show_error(error)

    # -- doing -------------------------------------------------------------------
    def _start(self, events: Iterable[Event], query: str | None = None) -> None:
        """Stream a turn here, or in a background thread (see ``background``)."""
        self._set_streaming(True)
        self.live.query = query or ""
        turn = self._turn = Stoppable(events)
        background = self.background
        if background is None:
            background = getattr(self._shell, "kernel", None) is not None and (
                detect_mode() == "live"
            )
        if not background:
            self._finish_turn(turn, query)
            return
        # The widget callback returns at once: the kernel stays free, and the
        # stop request (a comm message) is handled while the answer streams.
        context = contextvars.copy_context()
        self._worker = threading.Thread(
            target=context.run, args=(self._finish_turn, turn, query),
            name="nbchat-panel-answer", daemon=True,
        )
        self._worker.start()

    @shows_errors
    def _finish_turn(self, events: Iterable[Event], query: str | None) -> None:
        try:
            result = self._stream(events)
        finally:
            self._set_streaming(False)
        if result.status == "failed" and query and not self.value:
            self.value = query  # to send again once the problem is fixed
        self.focus()
        self._answer_callbacks(self, result)

    def _stream(self, events: Iterable[Event]) -> RenderResult:
        """Stream a turn into the live message; then show it as part of the conversation."""
        earlier = list(self.prompts)
        with hosting(self):
            # Live even when no person clicked: widget state is not what nbval
            # compares, and only a live renderer offers the prompts of a suspension.
            result = render_turn(
                events, mode="live", handle=self.live, chat=self.chat,  # type: ignore[arg-type]
                prompts=show_tool_prompts,
            )
        with self.hold_sync():
            self.prompts = [group for group in self.prompts if group not in earlier]
            self._load_threads(self.thread_id, render=False)
            self._render_conversation()
            self.live.clear()
        if result.error is not None:
            self.show_error(result.error)
        elif result.status == "interrupted":
            self._set_status("Stopped; the partial answer is kept.")
        elif self.status_text == "Stopping…":
            self._set_status("")
        return result

    def _set_streaming(self, streaming: bool) -> None:
        # The browser shows Stop for Send, and keeps the thread while it streams.
        self.streaming = streaming

    def _refuse_while_streaming(self, action: str) -> None:
        if self.streaming:
            raise InputError(f"an answer is streaming; stop it (Escape) or wait for it to {action}")

    def _picked_context(self) -> list[ContextItem]:
        """The picked variables, described (the picks stay until the question goes)."""
        if self._notebook is None:
            return []
        return [self._notebook.describe(name) for name in self.picked]

    def _load_models(self) -> None:
        try:
            models = list(self.chat.list_models())
        except NbchatError as error:
            self.show_error(error)
            models = []
        self._set_models(models, self.model or self._default_model(models))

    def _default_model(self, models: list[str]) -> str | None:
        if self.chat.settings.model:
            return self.chat.settings.model
        try:
            model = self.chat.llm.default_model()
        except NbchatError:
            return None
        return model if model in models else None

    def _set_models(self, models: list[str], value: str | None) -> None:
        if value and value not in models:
            models.append(value)
        with self.hold_sync():
            self.models = models
            if value:
                self.model = value

    def _store_stamp(self) -> object:
        """Something that changes when the store does, as cheap as the store allows."""
        store = self.chat.store
        folder = getattr(store, "folder", None)
        if folder is None:  # a database: its listing is one query
            return tuple((i.id, i.title, i.turns, i.updated) for i in store.threads())
        # Every write replaces a file in the user's folder, which changes its mtime.
        try:
            info = os.stat(folder)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns)

    def _load_threads(self, select: int | None, *, render: bool = True) -> None:
        """List the threads again and select ``select`` (or the newest, if it is gone)."""
        # The store's list: Chat.threads() would wait for titles under way.
        infos = self.chat.store.threads()
        self._stamp = self._store_stamp()
        self._infos = {info.id: info for info in infos}
        if select not in self._infos:
            select = infos[0].id if infos else None
        threads = [
            {"id": info.id, "title": info.title, "label": _label(info.title, info.id),
             "turns": info.turns}
            for info in infos
        ]
        if threads != self.threads:
            self.threads = threads
        if render or select != self.thread_id:
            self._show_thread(select)

    def _show_thread(self, thread_id: int | None, *, keep: bool = False) -> None:
        """Show a thread; ``keep`` redraws the one shown, keeping what the person opened."""
        changed = thread_id != self.thread_id
        thread = None if thread_id is None else self.chat.store.get(thread_id)
        with self.hold_sync():
            self.thread_id = thread_id
            if not keep:
                self.confirm = ""
                self._shown_turns = self.page_size
            self.prompts = []
            self.live.clear()
            self.title = thread.title if thread else ""
            if thread is not None:
                self._set_models(list(self.models), thread.model)
            self.history = [t.query for t in thread.turns[-HISTORY_SIZE:]] if thread else []
            self._render_conversation(thread)
        if thread is not None and thread.turns and thread.turns[-1].status == "suspended":
            calls = self.chat.pending_calls(thread.id)
            if calls:
                with hosting(self):
                    show_tool_prompts(self.chat, calls, live=True)
        if changed:
            self._thread_callbacks(self, thread_id)

    def _render_conversation(self, thread: Thread | None = None) -> None:
        if thread is None and self.thread_id is not None:
            thread = self.chat.store.get(self.thread_id)
        turns = thread.turns if thread is not None else []
        if self.streaming and turns and turns[-1].status == "streaming":
            turns = turns[:-1]  # the turn streaming here: the live message shows it
        shown = turns[-self._shown_turns:]
        first = len(turns) - len(shown)
        with self.hold_sync():
            self.messages = [message(turn, first + n, self._prices) for n, turn in enumerate(shown)]
            self.hidden = first
            self.usage_text = thread_usage_line(turns, self._prices)
            self.gauge = (
                context_gauge(thread, lambda m: self.chat.llm.context_size(m))
                if thread is not None else {}
            )
            self.tools_line = _tools_line(self.chat)

    def _require_thread(self, action: str) -> int:
        if self.thread_id is None:
            raise InputError(f"no thread is selected; pick one in the list to {action} it")
        return self.thread_id

    def _set_status(self, text: str, kind: str = "dim") -> None:
        with self.hold_sync():
            self.status_text = text
            self.status_kind = kind


# Browser intents that carry nothing but their name, and the method each calls
# (each shows its own errors).
_INTENTS = {
    "new": "new_thread", "delete": "delete", "confirm_delete": "_on_confirm",
    "cancel_delete": "cancel_delete", "earlier": "show_earlier", "refresh": "_on_refresh",
    "variables": "refresh_variables", "close_preview": "close_preview",
}


def _label(title: str, thread_id: int) -> str:
    return f"{title or 'Untitled'} (#{thread_id})"


def _tools_line(chat: Chat) -> str:
    """Whose MCP tools the next question may use, from the configuration (starts nothing)."""
    try:
        return servers_line(chat.mcp)
    except NbchatError as error:  # a damaged mcp.json: say so where the tools would be
        return f"MCP tools: {error}"
