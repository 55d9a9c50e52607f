"""The panel's view of the store: its threads, the one shown, and keeping up with both.

:class:`FollowingPanel` lists the user's threads, shows one (its turns as
messages, its usage, the context gauge, its waiting prompts), offers the
endpoint's models, and follows the store: after each cell runs, and on the
browser's poll while the panel is visible, it reads the store's
:meth:`~nbchat.store.base.Store.change_stamp` (one ``stat`` of the store
folder, about 3 µs; with PostgreSQL, one one-row query) and shows threads
made or continued elsewhere. The browser polls every ``poll_seconds`` after
something changed or the person used the panel, then less often (up to four
times as long) while nothing does, and never with a question unanswered.
Each look costs the kernel about 2.5 ms, nearly all of it ipykernel handling
the message (benchmarks/panel_browser.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ...base import markup
from ...base.errors import InputError, NbchatError
from ...context.cell_tools import CELL_TOOLS, MODES
from ...engine._pending import hosted_agent
from ...engine._usage import Price, thread_usage_line
from ...llm.routed import RoutedClient
from ...mcp.tools import servers_line
from ...store.base import Thread, ThreadInfo
from ..cell.prompts import hosting, show_tool_prompts
from ..notebook._undo import changed_turns
from ._agents import offered
from ._messages import context_gauge, message, thread_view
from ._state import PanelState

if TYPE_CHECKING:
    from ...engine.chat import Chat
    from ._stream import LiveSink

__all__ = ["HISTORY_SIZE", "FollowingPanel", "Shown"]

HISTORY_SIZE = 50


@dataclass(frozen=True)
class Shown:
    """What the panel shows now, as a display's mimebundle (``data``) and its plain text."""

    data: dict[str, str]

    @property
    def text(self) -> str:
        return str(self.data.get("text/plain", ""))


NOTEBOOK_TOOLS = (*CELL_TOOLS, "run_code")


class FollowingPanel(PanelState):
    """The panel's threads and the one it shows, drawn from the store and kept up with it."""

    chat: Chat
    live: LiveSink
    page_size: int
    _prices: dict[str, Price]
    _shown_turns: int
    _infos: dict[int, ThreadInfo]
    _stamp: object
    _thread_callbacks: widgets.CallbackDispatcher

    @property
    def conversation(self) -> Shown:
        """The turns shown, as one safe-HTML display and its plain text."""
        thread = None if self.thread_id is None else self.chat.store.get(self.thread_id)
        body, plain = thread_view(thread, self._shown_turns, self._prices)
        return Shown(markup.bundle(body, plain))

    def show_error(self, error: BaseException | str) -> None:
        """Show ``error`` in the status line."""
        self._set_status(f"{markup.MARK_PROBLEM} {error}", "error")

    def say_how_to_connect(self) -> None:
        """Where no JupyterLab dialog opened: how to connect a model from a terminal."""
        self._set_status("Connect a model in JupyterLab (palette: nbchat: Connect a model…), "
                         "or in a terminal: python -m nbchat keys set openai", "dim")

    def refresh(self, select: int | None = None) -> None:
        """Reload the threads and models (threads made elsewhere, e.g. by ``%chat``)."""
        self._set_status("")
        self._load_models()
        self._load_threads(select if select is not None else self.thread_id)

    def sync(self) -> bool:
        """Show what changed in the store since the panel last looked; whether anything did.

        Costs one read of the store's change stamp when nothing changed; otherwise
        lists the threads and redraws the shown one if it changed (new turns, a new title).
        """
        if self.streaming or self.chat.store.change_stamp() == self._stamp:
            return False
        earlier = self._infos
        before = earlier.get(self.thread_id) if self.thread_id is not None else None
        self._load_threads(self.thread_id, render=False)
        after = self._infos.get(self.thread_id) if self.thread_id is not None else None
        if after is not None and after != before:
            self._show_thread(self.thread_id, keep=True)
        return self._infos != earlier

    def poll(self) -> None:
        """What the browser's poll does: follow the store."""
        self.sync()

    def _on_post_run_cell(self, *_: Any) -> None:
        try:
            self.sync()
        except NbchatError as error:
            self.show_error(error)

    def _load_models(self) -> None:
        groups = []
        try:
            if isinstance(self.chat.llm, RoutedClient):
                groups = [{**asdict(g), "models": list(g.models)}
                          for g in self.chat.llm.endpoint_models()]
            models = list(self.chat.list_models())
        except NbchatError as error:
            self.show_error(error)
            models = []
        with self.hold_sync():
            self.model_groups = groups
            self._set_models(models, self.model or self._default_model(models))
            self.agents = offered()

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

    def _load_threads(self, select: int | None, *, render: bool = True) -> None:
        """List the threads again and select ``select`` (or the newest, if it is gone)."""
        # The store's list: Chat.threads() would wait for titles under way.
        # The stamp first: a write between it and the listing shows on the next look.
        self._stamp = self.chat.store.change_stamp()
        infos = self.chat.store.threads()
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
            agent = hosted_agent(thread)
            if changed and thread is not None:  # who answers here: its agent, else the model
                self.agent = agent
            if thread is not None and not agent and (changed or not keep):  # a redraw keeps it
                last = thread.turns[-1].model if thread.turns else None
                self._set_models(list(self.models), last or thread.model)
            self.history = [t.query for t in thread.turns[-HISTORY_SIZE:]] if thread else []
            saved = (thread.settings or {}).get("mode") if thread is not None else None
            if changed and saved in (*MODES, "chat"):  # the mode it was last asked in here
                self.mode = saved
            self._render_conversation(thread)
        if thread is not None and thread.turns and thread.turns[-1].status == "suspended":
            calls = self.chat.pending_calls(thread.id)
            if calls:
                with hosting(self):
                    show_tool_prompts(self.chat_for(calls), calls, live=True)
        if changed:
            self._thread_callbacks(self, thread_id)

    def chat_for(self, calls: list[Any] | None = None) -> Any:
        """The Chat that asks in the panel's mode, or answers ``calls``: with the notebook
        tools (the magics') for the notebook agent and its calls, else the panel's own."""
        wanted = any(c.tool in NOTEBOOK_TOOLS for c in calls) if calls is not None \
            else self.mode in MODES  # fmt: skip
        if not wanted:
            return self.chat
        from IPython import get_ipython

        from .._loaded import loaded_in

        loaded = loaded_in(get_ipython())
        return loaded.notebook_chat() if loaded is not None else self.chat

    def _render_conversation(self, thread: Thread | None = None) -> None:
        if thread is None and self.thread_id is not None:
            thread = self.chat.store.get(self.thread_id)
        turns = thread.turns if thread is not None else []
        if self.streaming and turns and turns[-1].status == "streaming":
            turns = turns[:-1]  # the turn streaming here: the live message shows it
        shown = turns[-self._shown_turns:]
        first = len(turns) - len(shown)
        with self.hold_sync():
            undoable = set(changed_turns(thread.settings or {})) if thread is not None else set()
            self.messages = [message(turn, first + n, self._prices, first + n in undoable)
                             for n, turn in enumerate(shown)]  # fmt: skip
            self.hidden = first
            self.usage_text = thread_usage_line(turns, self._prices)
            self.gauge = (
                context_gauge(thread, lambda m: self.chat.llm.context_size(m))
                if thread is not None and not hosted_agent(thread) else {}
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


def _label(title: str, thread_id: int) -> str:
    return f"{title or 'Untitled'} (#{thread_id})"

def _tools_line(chat: Chat) -> str:
    """Whose MCP tools the next question may use, from the configuration (starts nothing)."""
    try:
        return servers_line(chat.mcp)
    except NbchatError as error:  # a damaged mcp.json: say so where the tools would be
        return f"MCP tools: {error}"
