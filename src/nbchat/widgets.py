"""The chat panel and the client-tool prompts, as ipywidgets.

:class:`ChatPanel` (``nbchat.panel()``, ``%chat --panel``) lists the threads of
the same store the magics use, with a model picker, the selected thread's
conversation, an input box that streams the answer into it, and client-tool
prompts inline. :func:`show_tool_prompts` (in :mod:`nbchat._prompts`) is what
the cell renderer calls when a turn suspends.

Widget callbacks run while no cell runs: everything the panel shows is
written into widgets it owns, never with ``display``.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as widgets

from ._context_picker import ContextPicker
from ._prompts import (
    ERROR_STYLE,
    NOTE_STYLE,
    OutputHandle,
    PromptGroup,
    ToolPrompt,
    hosting,
    pending_prompts,
    show_tool_prompts,
    shows_errors,
)
from ._views import answer_markdown
from .chat import Chat
from .errors import InputError, NbchatError
from .events import Event
from .render import RenderResult, render_turn
from .store import Thread

__all__ = [
    "ChatPanel",
    "OutputHandle",
    "PromptGroup",
    "ToolPrompt",
    "pending_prompts",
    "show_tool_prompts",
]

_STATUS_LABELS = {
    "interrupted": "*(interrupted)*",
    "suspended": "*(waiting for your answer below)*",
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
    **chat_kwargs
        Passed to :class:`~nbchat.Chat` when ``chat`` is not given.

    Every child widget is a public attribute (``send_button``, ``input_box``,
    ``thread_list``, …), so code and tests can drive the panel with
    ``.value`` and ``.click()``.
    """

    def __init__(
        self, chat: Chat | None = None, *, thread_id: int | None = None, **chat_kwargs: Any
    ) -> None:
        if chat is not None and chat_kwargs:
            names = ", ".join(sorted(chat_kwargs))
            raise InputError(f"pass either chat or Chat settings ({names}), not both")
        self.chat = chat if chat is not None else Chat(**chat_kwargs)
        self.thread_id: int | None = None
        self._syncing = False
        self._answer_callbacks = widgets.CallbackDispatcher()
        self._thread_callbacks = widgets.CallbackDispatcher()
        self._build()
        super().__init__(self._layout(), layout=widgets.Layout(width="100%"))
        self.add_class("nbchat-panel")
        self.refresh(select=thread_id)

    def __repr__(self) -> str:
        return f"ChatPanel({self.chat!r}, thread_id={self.thread_id})"

    # -- public ------------------------------------------------------------------
    @property
    def status(self) -> str:
        """The status line's text (errors start with ⚠)."""
        return self._status_text

    def show_error(self, error: BaseException | str) -> None:
        """Show ``error`` in the status line."""
        self._set_status(f"⚠ {error}", ERROR_STYLE)

    def refresh(self, select: int | None = None) -> None:
        """Reload the threads and models (threads made elsewhere, e.g. by ``%chat``)."""
        self._set_status("")
        self._load_models()
        self._load_threads(select if select is not None else self.thread_id)

    def select(self, thread_id: int) -> None:
        """Show thread ``thread_id``."""
        self.chat.store.get(thread_id)  # ThreadNotFound, with its message, if it is not there
        self._load_threads(thread_id)

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
        self._stream(events)

    # -- building ----------------------------------------------------------------
    def _build(self) -> None:
        self.thread_list = widgets.Select(options=[], rows=12, layout=widgets.Layout(width="100%"))
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
            layout=widgets.Layout(display="none", align_items="center"),
        )
        self.model_picker = widgets.Dropdown(options=[], description="Model")
        self.conversation = OutputHandle()
        self.live = OutputHandle()
        self.prompt_area = widgets.VBox()
        self.input_box = widgets.Textarea(
            placeholder="Ask something…", rows=3, layout=widgets.Layout(width="100%")
        )
        self.send_button = _button("Send", self._on_send_button_click, button_style="primary")
        self.context_picker = ContextPicker()
        self._status_html = widgets.HTML()
        self._status_text = ""

    def _layout(self) -> list[widgets.Widget]:
        row, column = widgets.HBox, widgets.VBox
        self.title_box.layout = widgets.Layout(width="auto")
        side = column(
            [
                row([self.new_button, self.refresh_button]),
                self.thread_list,
                self.title_box,
                row([self.rename_button, self.delete_button]),
                self.confirm_box,
            ],
            layout=widgets.Layout(width="30%", min_width="14em", margin="0 8px 0 0"),
        )
        # column-reverse keeps the scroll at the bottom as the answer grows.
        scroll = column(
            [self.prompt_area, self.live.output, self.conversation.output],
            layout=widgets.Layout(
                flex_flow="column-reverse", max_height="32em", overflow="auto",
                padding="0 8px", border="1px solid var(--jp-border-color2, #ddd)",
            ),
        )
        send_row = row([self.send_button], layout=widgets.Layout(justify_content="flex-end"))
        main = column(
            [self.model_picker, scroll, self.context_picker, self.input_box, send_row],
            layout=widgets.Layout(flex="1", min_width="0"),
        )
        return [row([side, main]), self._status_html]

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
        self._confirm_html.value = f"Delete thread {thread_id}, “{html.escape(title)}”?"
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
    def _on_send_button_click(self, _: widgets.Button) -> None:
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
        self._set_status(note)
        self._load_threads(thread_id)
        result = self._stream(events)
        if result.status == "failed" and not self.input_box.value:
            self.input_box.value = query  # to send again once the problem is fixed

    # -- doing -------------------------------------------------------------------
    def _stream(self, events: Iterable[Event]) -> RenderResult:
        """Stream a turn into the live area; then show it as part of the conversation."""
        earlier = self.prompt_area.children
        self.send_button.disabled = True
        try:
            with hosting(self):
                # Live even when no person clicked: widget state is not what nbval
                # compares, and only a live renderer offers the prompts of a suspension.
                result = render_turn(
                    events, mode="live", handle=self.live, chat=self.chat,  # type: ignore[arg-type]
                    prompts=show_tool_prompts,
                )
        finally:
            self.send_button.disabled = False
        self.prompt_area.children = tuple(
            group for group in self.prompt_area.children if group not in earlier
        )
        self._load_threads(self.thread_id, render=False)
        self._render_conversation()
        self.live.clear()
        if result.error is not None:
            self.show_error(result.error)
        self._answer_callbacks(self, result)
        return result

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

    def _load_threads(self, select: int | None, *, render: bool = True) -> None:
        """List the threads again and select ``select`` (or the newest, if it is gone)."""
        infos = self.chat.threads()
        ids = [info.id for info in infos]
        if select not in ids:
            select = ids[0] if ids else None
        self._syncing = True
        try:
            self.thread_list.options = [(_label(info.title, info.id), info.id) for info in infos]
            self.thread_list.value = select
        finally:
            self._syncing = False
        if render or select != self.thread_id:
            self._show_thread(select)

    def _show_thread(self, thread_id: int | None) -> None:
        changed = thread_id != self.thread_id
        self.thread_id = thread_id
        self.confirm_box.layout.display = "none"
        self.prompt_area.children = ()
        self.live.clear()
        thread = None if thread_id is None else self.chat.store.get(thread_id)
        self.title_box.value = thread.title if thread else ""
        if thread is not None:
            self._set_models(list(self.model_picker.options), thread.model)
        self._render_conversation(thread)
        if thread_id is not None:
            calls = self.chat.pending_calls(thread_id)
            if calls:
                with hosting(self):
                    show_tool_prompts(self.chat, calls, live=True)
        if changed:
            self._thread_callbacks(self, thread_id)

    def _render_conversation(self, thread: Thread | None = None) -> None:
        if thread is None and self.thread_id is not None:
            thread = self.chat.store.get(self.thread_id)
        text = conversation_markdown(thread) if thread else _EMPTY
        self.conversation.update({"text/markdown": text, "text/plain": text}, raw=True)

    def _require_thread(self, action: str) -> int:
        if self.thread_id is None:
            raise InputError(f"no thread is selected; pick one in the list to {action} it")
        return self.thread_id

    def _set_status(self, text: str, style: str = NOTE_STYLE) -> None:
        self._status_text = text
        self._status_html.value = (
            f'<span style="{style}">{html.escape(text)}</span>' if text else ""
        )


_EMPTY = "*No thread selected. Ask something below to start one.*"


def conversation_markdown(thread: Thread) -> str:
    """A thread's turns as Markdown: each question, then its answer.

    The answer is told from the turn's messages when it has them, so that
    the person's answers to client tools show where they were given.
    """
    if not thread.turns:
        return "*No questions yet in this thread. Ask something below.*"
    turns = []
    for turn in thread.turns:
        question = turn.query.strip().replace("\n", "\n> ")
        model = f" · *{turn.model}*" if turn.model else ""
        answer = answer_markdown(turn)
        if turn.status == "failed":
            answer += f"\n\n**⚠ {turn.error or 'the answer failed'}**"
        elif _STATUS_LABELS.get(turn.status):
            answer += f"\n\n{_STATUS_LABELS[turn.status]}"
        turns.append(f"**You**\n\n> {question}\n\n**Assistant**{model}\n\n{answer.strip()}\n")
    return "\n---\n\n".join(turns)


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
