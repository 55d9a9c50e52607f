"""The chat panel and the client-tool prompts, as ipywidgets.

:class:`ChatPanel` (``nbchat.panel()``, ``%chat --panel``) lists the threads of
the same store the magics use, with a model picker, the selected thread's
conversation, an input box that streams the answer into it, and client-tool
prompts inline. :func:`show_tool_prompts` (in :mod:`nbchat._prompts`) is what
the cell renderer calls when a turn suspends.

Widget callbacks run while no cell runs: everything the panel shows is
written into widgets it owns, never with ``display``.

How Escape stops an answer. When a person sends from the browser, the answer
streams in a background thread and the widget callback returns at once; the
stop request (a comm message from the question box) calls the answer's
:meth:`~nbchat.Answer.stop`, which shuts the connection down, so the answer
ends at once even while the model sends nothing (the engine saves it as
interrupted). Measured
in JupyterLab + Chromium on ipykernel 7.4, Escape to the interrupted answer on
screen: 85 ms with the stream in a thread, 182 ms with it in the callback on
the main thread. That 7.4 handled the stop message while the callback ran is
not something to build on: a kernel that queues comm messages behind a running
handler, as kernels do behind a blocking cell, would see it only after the
answer. The thread also leaves the kernel free to run cells while the panel
answers.
A kernel interrupt, which stops answers in cells, does not reach the thread:
Escape and Stop do. A ``.click()`` from code streams before it returns.

Following the store costs one ``stat`` of the store folder per look (about
2 µs; with PostgreSQL, one listing query); the browser asks once a second
while the panel is visible, never with a question unanswered. Measured in
JupyterLab with the panel visible and the kernel idle: 2.1 ms of kernel CPU
a second with the poll, 0.2 ms without, so the poll costs about 2 ms a
second, nearly all of it ipykernel handling the message.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import ipywidgets as widgets
from IPython import get_ipython

from . import markup
from ._chat_input import ChatInput
from ._context_picker import ContextPicker
from ._prompts import (
    OutputHandle,
    PromptGroup,
    ToolPrompt,
    hosting,
    pending_prompts,
    show_tool_prompts,
    shows_errors,
)
from ._usage import Price, parse_prices, prices_from_env, thread_usage_line, turn_usage_line
from ._views import answer_markdown
from .chat import Chat
from .errors import InputError, NbchatError
from .events import Event
from .render import RenderResult, detect_mode, render_turn
from .store import Thread, ThreadInfo

__all__ = [
    "ChatInput",
    "ChatPanel",
    "OutputHandle",
    "PromptGroup",
    "ToolPrompt",
    "pending_prompts",
    "show_tool_prompts",
]

_STATUS_LABELS = {
    "interrupted": "(interrupted)",
    "suspended": "(waiting for your answer below)",
    "streaming": "",
}


class ChatPanel(widgets.VBox):
    """Threads, a model picker, the conversation and an input box, in one widget.

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
    background
        Stream answers in a background thread, so that the kernel stays free and
        Escape (or the Stop button) can stop them. By default: when a person
        clicked or pressed Enter in the browser; a ``.click()`` from code
        streams before it returns (a kernel interrupt stops it, as in a cell).
    page_size
        How many of a thread's last turns to show at first; "Show earlier"
        adds as many again.
    area
        ``"cell"`` or ``"side"`` (where ``nbchat.panel(side=True)`` puts it);
        the side area gets a taller, narrower layout.
    **chat_kwargs
        Passed to :class:`~nbchat.Chat` when ``chat`` is not given.

    Every child widget is a public attribute (``send_button``, ``input_box``,
    ``thread_list``, …), so code and tests can drive the panel with
    ``.value`` and ``.click()``. The panel follows the store: after each cell
    runs, and on the browser's poll about once a second while it is visible,
    it looks (one ``stat`` of the store folder) and shows threads made or
    continued elsewhere.
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
        if chat is not None and chat_kwargs:
            names = ", ".join(sorted(chat_kwargs))
            raise InputError(f"pass either chat or Chat settings ({names}), not both")
        if area not in AREAS:
            raise InputError(f"area must be one of {', '.join(AREAS)}, got {area!r}")
        self.chat = chat if chat is not None else Chat(**chat_kwargs)
        self.prices: dict[str, Price] = (
            prices_from_env() if prices is None else parse_prices(prices, source="prices")
        )
        self.background = background
        self.page_size = max(1, int(page_size))
        self.area = area
        self.thread_id: int | None = None
        self._shown_turns = self.page_size
        self._infos: dict[int, ThreadInfo] = {}
        self._stamp: object = None
        self._syncing = False
        self._turn: _Stoppable | None = None
        self._worker: threading.Thread | None = None
        self._answer_callbacks = widgets.CallbackDispatcher()
        self._thread_callbacks = widgets.CallbackDispatcher()
        self._build()
        super().__init__(self._layout(), layout=widgets.Layout(width="100%"))
        self.add_class("nbchat-panel")
        self.add_class(f"nbchat-panel-{area}")
        self.refresh(select=thread_id)
        shell = get_ipython()
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
        """Close the panel's widgets and stop following the store."""
        if getattr(self, "_shell", None) is not None:
            with contextlib.suppress(ValueError):
                self._shell.events.unregister("post_run_cell", self._on_post_run_cell)
            self._shell = None
        super().close()

    # -- public ------------------------------------------------------------------
    @property
    def status(self) -> str:
        """The status line's text (errors start with ⚠)."""
        return self._status_text

    @property
    def usage(self) -> str:
        """The thread's usage totals as shown in its header ("" when none were reported)."""
        return self._usage_text

    @property
    def is_streaming(self) -> bool:
        """Whether an answer is streaming into the panel now."""
        return self.input_box.streaming

    def show_error(self, error: BaseException | str) -> None:
        """Show ``error`` in the status line."""
        self._set_status(f"⚠ {error}", "nbchat-error")

    def refresh(self, select: int | None = None) -> None:
        """Reload the threads and models (threads made elsewhere, e.g. by ``%chat``)."""
        self._set_status("")
        self._load_models()
        self._load_threads(select if select is not None else self.thread_id)

    def sync(self) -> bool:
        """Show what changed in the store since the panel last looked; whether anything did.

        Costs one ``stat`` when nothing changed; otherwise lists the threads and
        redraws the shown one if it changed (new turns, a new title).
        """
        if self.is_streaming or self._store_stamp() == self._stamp:
            return False
        before = self._infos.get(self.thread_id) if self.thread_id is not None else None
        self._load_threads(self.thread_id, render=False)
        after = self._infos.get(self.thread_id) if self.thread_id is not None else None
        if after is not None and after != before:
            self._show_thread(self.thread_id, keep=True)
        return True

    def select(self, thread_id: int) -> None:
        """Show thread ``thread_id``."""
        self.chat.store.get(thread_id)  # ThreadNotFound, with its message, if it is not there
        self._load_threads(thread_id)

    def stop(self) -> None:
        """Stop the answer streaming in the background (what Escape and Stop do).

        The answer stops at once, also while the model sends nothing; what came
        so far is kept in the thread, marked interrupted.
        """
        turn = self._turn
        if self.is_streaming and turn is not None:
            turn.stop()
            self._set_status("Stopping…")

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
        self.prompt_area.children += (group,)

    def resume_turn(self, group: PromptGroup, events: Iterable[Event]) -> None:
        self._start(events)

    # -- building ----------------------------------------------------------------
    def _build(self) -> None:
        side = self.area == "side"
        self.thread_list = widgets.Select(
            options=[], rows=4 if side else 12, layout=widgets.Layout(width="100%")
        )
        self.thread_list.add_class("nbchat-threads")
        self.thread_list.observe(self._on_thread_list_change, "value")
        self.new_button = _button("New", self._on_new_button_click, icon="plus")
        self.refresh_button = _button("", self._on_refresh_button_click, icon="refresh")
        self.refresh_button.tooltip = "Reload threads and models"
        self.title_box = widgets.Text(
            placeholder="Title", layout=widgets.Layout(width="auto", flex="1")
        )
        self.rename_button = _button("Rename", self._on_rename_button_click)
        self.delete_button = _button("Delete", self._on_delete_button_click, icon="trash")
        self.confirm_delete_button = _button(
            "Delete", self._on_confirm_delete_button_click, button_style="danger"
        )
        self.cancel_delete_button = _button("Cancel", self._on_cancel_delete_button_click)
        self._confirm_html = widgets.HTML()
        self.confirm_box = widgets.HBox(
            [self._confirm_html, self.confirm_delete_button, self.cancel_delete_button],
            layout=widgets.Layout(display="none", align_items="center", flex_flow="row wrap"),
        )
        self.model_picker = widgets.Dropdown(
            options=[], description="Model", layout=widgets.Layout(width="auto")
        )
        self.usage_html = widgets.HTML()
        self.usage_html.add_class("nbchat-usage")
        self._usage_text = ""
        self.earlier_button = _button("Show earlier", self._on_earlier_button_click)
        self.earlier_button.layout.display = "none"
        self.earlier_button.layout.align_self = "center"
        self.conversation = OutputHandle()
        self.live = OutputHandle()
        self.prompt_area = widgets.VBox()
        self.input_box = ChatInput(
            placeholder="Ask something… (Enter sends, Shift+Enter adds a line)",
            layout=widgets.Layout(width="100%"),
        )
        self.input_box.on_submit(self._on_input_box_submit)
        self.input_box.on_stop(self._on_input_box_stop)
        self.input_box.on_poll(self._on_input_box_poll)
        self.send_button = _button("Send", self._on_send_button_click, button_style="primary")
        self.stop_button = _button("Stop", self._on_stop_button_click, icon="stop")
        self.stop_button.tooltip = "Stop the answer (Escape)"
        self.stop_button.layout.display = "none"
        self.context_picker = ContextPicker()
        self._status_html = widgets.HTML()
        self._status_text = ""

    def _layout(self) -> list[widgets.Widget]:
        row, column = widgets.HBox, widgets.VBox
        side = self.area == "side"
        self.title_box.layout = widgets.Layout(width="auto")
        threads = column(
            [
                row([self.new_button, self.refresh_button]),
                self.thread_list,
                self.title_box,
                row([self.rename_button, self.delete_button]),
                self.confirm_box,
            ],
            layout=widgets.Layout(flex="1 1 14em", min_width="12em", margin="0 8px 0 0"),
        )
        # Children keep their height (a shrunk child would spill over the input box).
        for child in (self.prompt_area, self.live.output, self.conversation.output,
                      self.earlier_button):
            child.layout.flex = "0 0 auto"
        # column-reverse keeps the scroll at the bottom as the answer grows.
        scroll = column(
            [self.prompt_area, self.live.output, self.conversation.output, self.earlier_button],
            layout=widgets.Layout(
                flex_flow="column-reverse", overflow="auto", padding="0 8px",
                # The side area is as tall as the window: fill it, leaving room
                # for the thread list above, the context row and the box below.
                max_height="calc(100vh - 36em)" if side else "32em",
                min_height="10em" if side else "",
                border="1px solid var(--jp-border-color2, #ddd)",
            ),
        )
        scroll.add_class("nbchat-conversation")
        buttons = row(
            [self.stop_button, self.send_button], layout=widgets.Layout(justify_content="flex-end")
        )
        main = column(
            [self.model_picker, self.usage_html, scroll, self.context_picker, self.input_box,
             buttons],
            layout=widgets.Layout(flex="3 1 20em", min_width="0"),
        )
        # Side by side where there is room; stacked in the narrow side area.
        return [row([threads, main], layout=widgets.Layout(flex_flow="row wrap")),
                self._status_html]

    # -- events ------------------------------------------------------------------
    @shows_errors
    def _on_thread_list_change(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self._show_thread(change["new"])

    @shows_errors
    def _on_new_button_click(self, _: widgets.Button) -> None:
        thread_id = self.chat.new_thread(self.model_picker.value or None)
        self._load_threads(thread_id)
        self._set_status(f"Started thread {thread_id}; ask something below.")
        self.input_box.focus()

    @shows_errors
    def _on_refresh_button_click(self, _: widgets.Button) -> None:
        self.refresh()

    @shows_errors
    def _on_rename_button_click(self, _: widgets.Button) -> None:
        thread_id = self._require_thread("rename")
        self.chat.update_thread_title(thread_id, self.title_box.value)
        self._load_threads(thread_id)
        self._set_status(f"Renamed thread {thread_id}.")

    @shows_errors
    def _on_delete_button_click(self, _: widgets.Button) -> None:
        thread_id = self._require_thread("delete")
        title = self.chat.store.get(thread_id).title or "Untitled"
        self._confirm_html.value = markup.styled(
            markup.text(f"Delete thread {thread_id}, “{title}”?"))
        self.confirm_box.layout.display = "flex"

    @shows_errors
    def _on_confirm_delete_button_click(self, _: widgets.Button) -> None:
        self.confirm_box.layout.display = "none"
        thread_id = self._require_thread("delete")
        self.chat.delete_thread(thread_id)
        self._load_threads(None)
        self._set_status(f"Deleted thread {thread_id}.")

    def _on_cancel_delete_button_click(self, _: widgets.Button) -> None:
        self.confirm_box.layout.display = "none"

    @shows_errors
    def _on_earlier_button_click(self, _: widgets.Button) -> None:
        self._shown_turns += self.page_size
        self._render_conversation()

    def _on_input_box_submit(self, _: ChatInput) -> None:
        self.send_button.click()

    def _on_input_box_stop(self, _: ChatInput) -> None:
        self.stop()

    def _on_stop_button_click(self, _: widgets.Button) -> None:
        self.stop()

    @shows_errors
    def _on_input_box_poll(self, _: ChatInput) -> None:
        self.sync()

    def _on_post_run_cell(self, *_: Any) -> None:
        try:
            self.sync()
        except NbchatError as error:
            self.show_error(error)

    @shows_errors
    def _on_send_button_click(self, _: widgets.Button) -> None:
        if self.is_streaming:
            raise InputError("an answer is still streaming; stop it (Escape) or wait for it")
        query = self.input_box.value
        if not query.strip():
            raise InputError("the question is empty; type something to ask")
        model = self.model_picker.value or None
        thread_id = self.thread_id
        if thread_id is None:
            thread_id = self.chat.new_thread(model)
        mentioned, note = _mentioned(query)
        context = [*self.context_picker.take(), *mentioned]
        events = self.chat.iter_ask(thread_id, query, model=model, context=context)
        self.context_picker.refresh()
        self.input_box.value = ""
        self.input_box.history = [*self.input_box.history[-(HISTORY_SIZE - 1):], query]
        self._set_status(note)
        self._load_threads(thread_id)
        self._start(events, query)

    # -- doing -------------------------------------------------------------------
    def _start(self, events: Iterable[Event], query: str | None = None) -> None:
        """Stream a turn here, or in a background thread (see ``background``)."""
        self._set_streaming(True)
        turn = self._turn = _Stoppable(events)
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
        if result.status == "failed" and query and not self.input_box.value:
            self.input_box.value = query  # to send again once the problem is fixed
        self.input_box.focus()
        self._answer_callbacks(self, result)

    def _stream(self, events: Iterable[Event]) -> RenderResult:
        """Stream a turn into the live area; then show it as part of the conversation."""
        earlier = self.prompt_area.children
        with hosting(self):
            # Live even when no person clicked: widget state is not what nbval
            # compares, and only a live renderer offers the prompts of a suspension.
            result = render_turn(
                events, mode="live", handle=self.live, chat=self.chat,  # type: ignore[arg-type]
                prompts=show_tool_prompts,
            )
        self.prompt_area.children = tuple(
            group for group in self.prompt_area.children if group not in earlier
        )
        self._load_threads(self.thread_id, render=False)
        self._render_conversation()
        self.live.clear()
        if result.error is not None:
            self.show_error(result.error)
        elif result.status == "interrupted":
            self._set_status("Stopped; the partial answer is kept.")
        elif self._status_text == "Stopping…":
            self._set_status("")
        return result

    def _set_streaming(self, streaming: bool) -> None:
        self.input_box.streaming = streaming
        # The answer belongs to the thread shown: no switching or deleting meanwhile.
        for widget in (self.send_button, self.thread_list, self.new_button,
                       self.delete_button, self.confirm_delete_button):
            widget.disabled = streaming
        self.stop_button.layout.display = "" if streaming else "none"

    def _load_models(self) -> None:
        try:
            models = list(self.chat.list_models())
        except NbchatError as error:
            self.show_error(error)
            models = []
        self._set_models(models, self.model_picker.value or self._default_model(models))

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
        self._syncing = True
        try:
            self.model_picker.options = models
            if value:
                self.model_picker.value = value
        finally:
            self._syncing = False

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
        ids = [info.id for info in infos]
        if select not in ids:
            select = ids[0] if ids else None
        options = [(_label(info.title, info.id), info.id) for info in infos]
        self._syncing = True
        try:
            if list(self.thread_list.options) != options:
                self.thread_list.options = options
            self.thread_list.value = select
        finally:
            self._syncing = False
        if render or select != self.thread_id:
            self._show_thread(select)

    def _show_thread(self, thread_id: int | None, *, keep: bool = False) -> None:
        """Show a thread; ``keep`` redraws the one shown, keeping what the person opened."""
        changed = thread_id != self.thread_id
        self.thread_id = thread_id
        if not keep:
            self.confirm_box.layout.display = "none"
            self._shown_turns = self.page_size
        self.prompt_area.children = ()
        self.live.clear()
        thread = None if thread_id is None else self.chat.store.get(thread_id)
        title = thread.title if thread else ""
        if not keep or self.title_box.value != title:
            self.title_box.value = title
        if thread is not None:
            self._set_models(list(self.model_picker.options), thread.model)
        self.input_box.history = [t.query for t in thread.turns[-HISTORY_SIZE:]] if thread else []
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
        body, plain = (markup.text(_EMPTY, cls="nbchat-dim", block=True), _EMPTY) if (
            thread is None) else self._thread_view(thread)
        hidden = len(thread.turns) - self._shown_turns if thread else 0
        self.earlier_button.layout.display = "" if hidden > 0 else "none"
        self.earlier_button.description = f"Show earlier ({hidden} more)" if hidden > 0 else ""
        self._usage_text = thread_usage_line(thread.turns, self.prices) if thread else ""
        self.usage_html.value = markup.styled(
            markup.element("small", f"Σ {self._usage_text}")
            if self._usage_text else markup.SafeHTML(""))
        self.conversation.update(markup.bundle(body, plain), raw=True)

    def _thread_view(self, thread: Thread) -> tuple[markup.SafeHTML, str]:
        """The last turns shown, each with its usage line: safe HTML and plain text."""
        if not thread.turns:
            return conversation_view(thread)
        bodies, plains = [], []
        for turn in thread.turns[-self._shown_turns:]:
            body, plain = conversation_view(dataclasses.replace(thread, turns=[turn]))
            line = turn_usage_line(turn, self.prices)
            if line:
                body = markup.join([body, markup.element("p", markup.element("small", line),
                                                         cls="nbchat-dim")])
                plain += f"\n{line}"
            bodies.append(body)
            plains.append(plain)
        return markup.join(bodies, "\n<hr>\n"), "\n---\n".join(plains)

    def _require_thread(self, action: str) -> int:
        if self.thread_id is None:
            raise InputError(f"no thread is selected; pick one in the list to {action} it")
        return self.thread_id

    def _set_status(self, text: str, style: str = "nbchat-dim") -> None:
        self._status_text = text
        self._status_html.value = markup.styled(
            markup.text(text, cls=style) if text else markup.SafeHTML(""))


class _Stoppable:
    """A turn's events that :meth:`stop`, called from any thread, ends as interrupted.

    An :class:`~nbchat.Answer` stops at once (its connection is shut down and
    it ends with the interrupted TurnFinished). Whatever still comes after the
    stop ends the turn too: the generator is closed (the engine records the
    turn as interrupted) and the renderer sees the interrupt it knows from a cell.
    """

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = events
        self.is_stopped = threading.Event()

    def __iter__(self) -> Iterator[Event]:
        for event in self.events:
            yield event
            if self.is_stopped.is_set():
                self.close()
                raise KeyboardInterrupt

    def stop(self) -> None:
        self.is_stopped.set()
        stop = getattr(self.events, "stop", None)
        if stop is not None:
            stop()

    def close(self) -> None:
        close = getattr(self.events, "close", None)
        if close is not None:
            close()


AREAS = ("cell", "side")
HISTORY_SIZE = 50
SIDE_NOTE = "nbchat: the chat panel is open in JupyterLab's right side area."


_EMPTY = "No thread selected. Ask something below to start one."


def conversation_view(thread: Thread) -> tuple[markup.SafeHTML, str]:
    """A thread's turns as safe HTML and plain text: each question, then its answer.

    The answer is told from the turn's messages when it has them, so that
    the person's answers to client tools show where they were given.
    """
    if not thread.turns:
        empty = "No questions yet in this thread. Ask something below."
        return markup.text(empty, cls="nbchat-dim", block=True), empty
    bodies, plains = [], []
    for turn in thread.turns:
        answer = answer_markdown(turn).strip()
        label = _STATUS_LABELS.get(turn.status, "")
        if turn.status == "failed":
            label = f"⚠ {turn.error or 'the answer failed'}"
        by = [markup.element("strong", "Assistant")]
        if turn.model:
            by.append(markup.element("i", turn.model))
        bodies.append(markup.join([
            markup.element("p", markup.element("strong", "You")),
            markup.element("blockquote", markup.text(turn.query.strip(), block=True)),
            markup.element("p", markup.join(by, " · ")),
            markup.markdown(answer),
            markup.text(label, cls="nbchat-error" if turn.status == "failed" else "nbchat-dim",
                        block=True) if label else markup.SafeHTML(""),
        ]))
        plains.append("\n\n".join(p for p in (f"You: {turn.query.strip()}",
                                               f"Assistant: {answer}", label) if p))
    return markup.join(bodies, "\n<hr>\n"), "\n---\n".join(plains)


def _label(title: str, thread_id: int) -> str:
    return f"{title or 'Untitled'} (#{thread_id})"


def _button(
    description: str, callback: Callable[[widgets.Button], Any], **kwargs: Any
) -> widgets.Button:
    button = widgets.Button(
        description=description, tooltip=description, layout=widgets.Layout(width="auto"),
        **kwargs,
    )
    button.on_click(callback)
    return button


def _mentioned(query: str) -> tuple[list[Any], str]:
    """The objects ``query`` mentions with ``@name`` in this kernel's namespace, and a note
    naming those it did not find."""
    from IPython import get_ipython

    from ._notebook import Notebook

    shell = get_ipython()
    if shell is None:
        return [], ""
    attached = Notebook(shell).attach(query)
    missing = ", ".join(attached.unresolved)
    return list(attached.items), f"not defined here, no context attached: {missing}" * bool(missing)
