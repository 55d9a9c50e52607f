"""The chat panel, one anywidget, and the client-tool prompts it shows inline.

:class:`ChatPanel` (``nbchat.panel()``, ``%chat --panel``) is a chat over the
same store the magics use: a header with the thread's title and a thread
switcher, the conversation as messages, and an input with the model picker
and the context chips, and a Preview of the request a question would send.
Its front end is the script in ``js/`` and the stylesheet in ``css/`` beside this
module (each one's parts joined by ``_assets``); its state is in traits, and
the browser sends intents (``submit``, ``stop``, ``select``, ``rename``, …) as
custom messages. Only
HTML made by :mod:`nbchat.base.markup` in Python reaches the page as HTML; every
other text (questions, titles, model names, usage) is set with
``textContent``. :func:`show_tool_prompts` (in :mod:`nbchat.jupyter.cell.prompts`) is
what the cell renderer calls when a turn suspends; in the panel its prompts
are ipywidgets shown inside the panel.

Each turn is one record of :attr:`ChatPanel.messages`; the answer streaming
now is :attr:`ChatPanel.streaming_message`, so an update while it streams
sends that one message, never the conversation.

The panel's parts, each in its module: its synced traits (:mod:`._state`),
its threads and keeping up with the store (:mod:`._follow`), the page's
intents (:mod:`._intents`), where an answer streams and how Escape stops it
(:mod:`._worker`), the live answer's sink (:mod:`._stream`), the turns as
messages and the gauge (:mod:`._messages`), the front end's code
(:mod:`._assets`), the side area (:mod:`._side`). What stays here is what a
person does: ask, preview, stop, switch, start, rename and delete threads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import ipywidgets as widgets
from IPython import get_ipython

from ...base import markup
from ...base.content import ContextItem
from ...base.errors import InputError, OverBudget
from ...base.events import Event
from ...engine._pending import hosted_agent
from ...engine._preview import Preview
from ...engine._usage import Price, dollars, parse_prices, prices_from_env
from ...engine.chat import Chat
from ...store.base import ThreadInfo
from .._loaded import asking, turn_ended, watched
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
from . import _agents, _intents
from ._follow import HISTORY_SIZE, FollowingPanel
from ._messages import conversation_view
from ._stream import LiveSink, mentioned
from ._worker import AnswerWorker

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
SIDE_NOTE = "nbchat: the chat panel is open in JupyterLab's right side area."


class ChatPanel(FollowingPanel):
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
        self._given: list[ContextItem] = []  # what ask() attaches to its question
        if chat is not None and chat_kwargs:
            names = ", ".join(sorted(chat_kwargs))
            raise InputError(f"pass either chat or Chat settings ({names}), not both")
        if area not in AREAS:
            raise InputError(f"area must be one of {', '.join(AREAS)}, got {area!r}")
        super().__init__(area=area)
        self.chat = chat if chat is not None else Chat(**chat_kwargs)
        self.chat.hosted = self.chat.hosted or _agents.hosted_by(self.chat)  # agents' requests
        self._prices: dict[str, Price] = (
            prices_from_env() if prices is None else parse_prices(prices, source="prices")
        )
        self.background = background
        self.page_size = max(1, int(page_size))
        self._shown_turns = self.page_size
        self._infos: dict[int, ThreadInfo] = {}
        self._stamp: object = None
        self._worker = AnswerWorker(self._finish_turn)
        self._answer_callbacks = widgets.CallbackDispatcher()
        self._thread_callbacks = widgets.CallbackDispatcher()
        self.live = LiveSink(self)
        shell = get_ipython()
        from ..notebook.tools import Notebook

        self._notebook = Notebook(shell) if shell is not None else None
        self._asking: Chat | None = None  # the Chat the streaming question went to
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
    def prices(self) -> dict[str, Price]:
        """Prices by model; setting them (a mapping or its JSON) redraws the costs at once."""
        return self._prices

    @prices.setter
    def prices(self, value: Mapping[str, Any] | None) -> None:
        self._prices = prices_from_env() if value is None else parse_prices(value, source="prices")
        if not self.streaming:
            self._render_conversation()

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
        if self.agent:  # the person's coding agent answers, in a session of its own
            self._asked(query, *_agents.ask(self.chat, self.thread_id, self.agent, query), "")
            return
        model = self.model or None
        thread_id = self.thread_id
        if thread_id is None or hosted_agent(self.chat.store.get(thread_id)):
            thread_id = self.chat.new_thread(model)
        named, note = mentioned(query)
        picked = self._picked_context()
        chat = self._asking = self.chat_for()
        chat.prices = self.chat.prices = self._prices or None
        settings = dict(self.chat.store.get(thread_id).settings or {})
        if settings.get("mode", "chat") != self.mode:  # the thread's mode from now on
            self.chat.store.update_thread(thread_id, settings={**settings, "mode": self.mode})
        if chat is not self.chat:  # the notebook agent: its tools ask as this thread says
            asking(thread_id)
        try:
            events = chat.iter_ask(thread_id, query, model=model, over_budget=over_budget,
                                   context=[*self._given, *picked, *named])  # fmt: skip
            self._given = []
        except OverBudget as error:
            if self.thread_id is None:
                self.chat.delete_thread(thread_id)  # made for this question, which waits
            if error.hard:
                raise
            self._ask_budget(error)
            return
        self._asked(query, thread_id, events, note)

    def _asked(self, query: str, thread_id: int, events: Iterable[Event], note: str) -> None:
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

    def ask(self, question: str, *, context: Iterable[ContextItem] = (),
            mode: str | None = None) -> None:  # fmt: skip
        """Ask ``question`` in the shown thread with ``context`` attached, in ``mode`` (the
        picker's ``chat`` or a notebook agent's), as the page's Fix and Explain do."""
        self._refuse_while_streaming("ask again")
        if mode is not None:
            self.mode = mode
        self.value, self._given = question, list(context)
        try:
            self.submit()  # over a budget, "Send anyway" sends it with its context
        except BaseException:
            self._given = []
            raise

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
        if self.streaming and self._worker.stop():
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

    @shows_errors
    def undo(self, turn: int) -> None:
        """Put back the cells turn ``turn`` of the shown thread changed (its footer's Undo)."""
        self._refuse_while_streaming("undo a turn")
        from ..notebook._undo import undo_here

        summary = undo_here(self._shell, self.chat.store, self._require_thread("undo"), turn)
        self._show_thread(self.thread_id, keep=True)
        self._set_status(summary)

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
    def accept_confirm(self) -> None:
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

    def refresh_variables(self) -> None:
        """Offer the notebook's current variables as chips; drop picks that no longer exist."""
        names = self._notebook.variable_names() if self._notebook is not None else []
        with self.hold_sync():
            self.variables = names
            self.picked = [name for name in self.picked if name in names]

    def focus(self, *, steal: bool = False) -> None:
        """Put the keyboard focus in the input, unless the person is busy elsewhere.

        ``steal`` takes it from wherever it is (for a panel just opened on purpose).
        """
        if steal:
            self._focus_steal = True
        self._focus += 1

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background answer to end; whether it has."""
        return self._worker.wait(timeout)

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

    def _on_front_end_msg(self, _: Any, content: Any, buffers: Any) -> None:
        _intents.handle(self, content)

    # -- doing -------------------------------------------------------------------
    def _start(self, events: Iterable[Event], query: str | None = None) -> None:
        """Stream a turn here, or in a background thread (see ``background``)."""
        self._set_streaming(True)
        self.live.query = query or ""
        background = self.background
        if background is None:
            background = getattr(self._shell, "kernel", None) is not None and (
                detect_mode() == "live"
            )
        self._worker.start(events, query, background=background)

    @shows_errors
    def _finish_turn(self, events: Iterable[Event], query: str | None) -> None:
        try:
            result = self._stream(events)
        finally:
            self._set_streaming(False)
        if result.status == "failed" and query and not self.value:
            self.value = query  # to send again once the problem is fixed
        if self.mode == "plan" and self.thread_id is not None:  # an approved plan left it
            self.mode = (self.chat.store.get(self.thread_id).settings or {}).get("mode", "plan")
        self.focus()
        self._answer_callbacks(self, result)

    def _stream(self, events: Iterable[Event]) -> RenderResult:
        """Stream a turn into the live message; then show it as part of the conversation."""
        earlier = list(self.prompts)
        try:
            with hosting(self):
                # Live even when no person clicked: widget state is not what nbval
                # compares, and only a live renderer offers the prompts of a suspension.
                result = render_turn(
                    watched(events), mode="live", handle=self.live,  # type: ignore[arg-type]
                    chat=self._asking or self.chat,
                    prompts=show_tool_prompts,
                )
        finally:
            self._asking = None
            asking(None)
            turn_ended()
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




