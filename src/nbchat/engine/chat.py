"""Chat, the thread manager: threads in a store and the turns that fill them.

A turn is an iterator of events (:mod:`nbchat.base.events`). ``iter_*`` methods
return that iterator for front ends that render as it arrives; ``ask``,
``answer_tool_call`` and friends consume it and return an :class:`Answer`.

What Chat shares with :class:`LLM` (settings, tools, building a turn) is
:class:`~._engine._Engine`; the Answer record is :mod:`._answer`; calls that
wait for a person are :mod:`._pending`; titles are :mod:`._title_workers`.
``LLM``, ``Answer`` and ``AnswerText`` are offered here too, beside Chat.

>>> from nbchat.testing import ScriptedServer, Reply
>>> with ScriptedServer(Reply("Four.", when="2+2")) as server:
...     chat = Chat(base_url=server.url, store=getfixture("tmp_path"))
...     thread = chat.new_thread()
...     print(chat.ask(thread, "What is 2+2?"))
Four.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..base.errors import InputError
from ..base.events import (
    TextDelta,
    ToolCallAbandoned,
    ToolCallPending,
    TurnFailed,
    TurnFinished,
)
from ..base.options import TITLE_OPTIONS, check_options, merge_options
from ..base.policy import Policy
from ..context import as_items
from ..llm import _endpoints
from ..mcp.tools import Selection
from ..store._open import open_store
from ..store.base import SearchHit, Store, Thread, ThreadInfo
from ..tools import ToolContext
from . import _pending
from ._answer import Answer, AnswerText
from ._asking import _Asking
from ._budget import GO_ON
from ._compaction import check_window
from ._engine import check_text, provider_only, thread_options
from ._kernel_spending import Ledger, StoreLedger
from ._scripts import LLM
from ._title_workers import (
    TITLE_WAIT,
    TitleWorkers,
    ask_title,
)
from ._titles import question_title
from .history import ChatHistory

__all__ = ["LLM", "Answer", "AnswerText", "Chat"]


class Chat(_Asking):
    """Threads for one user, kept in a thread store, and the turns that fill them.

    Parameters
    ----------
    model, base_url, api_key, provider
        Override the endpoint settings (``NBCHAT_*`` variables otherwise).
    store, user
        Where threads are kept and whose they are: a folder (TinyDB), a
        ``postgresql://`` URL, or a store object; default ``NBCHAT_STORE_URL``,
        else ``NBCHAT_STORE``, else the Jupyter data dir.
    tools
        Kernel tools (``@nbchat.tool`` functions) and client tools offered to the
        model, besides the built-in client tools (ask, choose, confirm).
    builtin_tools
        Offer the built-in client tools: True, False, or None (the default) for
        on except with the local model and models named in
        ``NBCHAT_TOOLLESS_MODELS``. A thread's own setting wins.
    permissions
        What the current user may do, checked by client tools' requirements.
    options
        Generation options for every turn (``{"max_tokens": 500, "temperature":
        0.2}``; see :mod:`nbchat.base.options`), over ``NBCHAT_OPTIONS``; a thread's
        options and a call's win over them.
    mcp
        Which configured MCP servers' tools to offer: None (the default) or True
        for all, False or ``"off"`` for none, a name or a list of names.
        Servers are configured in ``mcp.json`` files only (see
        :mod:`nbchat.mcp._config`); a question may choose again with ``mcp=``.
    budget, kernel_budget
        Dollars a thread, and this process, may cost before a question asks
        first (see :meth:`ask`); ``NBCHAT_BUDGET`` and ``NBCHAT_KERNEL_BUDGET``
        otherwise. Costs come from ``prices`` (``NBCHAT_PRICES``).
    answering
        Client tools that answer calls already waiting in the store (an outside
        agent's, say) and are never offered to the model; or a function that
        gives them, called when a waiting call first needs one.
    window
        ``"drop"`` (the default) leaves a long thread's oldest turns out of what
        is sent; ``"summarize"`` sends a summary of them instead (see
        :meth:`compact`); ``NBCHAT_WINDOW`` otherwise, and a thread's own setting wins.
    hosted
        The coding agents hosted in this process (``AcpHost``), or a function
        giving it: an agent's request is claimed here, then handed to it.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        store: str | os.PathLike[str] | Store | None = None,
        user: str | None = None,
        tools: Iterable[Any] = (),
        builtin_tools: bool | None = None,
        permissions: Iterable[str] = (),
        max_tool_rounds: int = 8,
        options: Mapping[str, Any] | None = None,
        mcp: Selection = None,
        budget: float | None = None,
        kernel_budget: float | None = None,
        window: str | None = None,
        answering: Iterable[Any] | Callable[[], Iterable[Any]] = (),
        hosted: _pending.Hosted | Callable[[], _pending.Hosted | None] | None = None,
    ) -> None:
        given = None if store is None or isinstance(store, str | os.PathLike) else store
        super().__init__(
            model=model, base_url=base_url, api_key=api_key, provider=provider, tools=tools,
            builtin_tools=builtin_tools, permissions=permissions, max_tool_rounds=max_tool_rounds,
            store=None if given is not None else store,  # type: ignore[arg-type]
            user=given.user if given is not None else user, options=options, mcp=mcp,
            budget=budget, kernel_budget=kernel_budget, answering=answering,
        )  # fmt: skip
        self.store: Store = (
            given if given is not None else open_store(self.settings.store, self.settings.user)
        )
        self._titles = TitleWorkers.shared(self.store)
        self.window = None if window is None else check_window(window)
        self.hosted = hosted  # the coding agents hosted here (see above)

    def __repr__(self) -> str:
        return f"Chat(user={self.store.user!r}, store={self.store.location()!r})"

    def _ledger(self) -> Ledger:
        """What this kernel has spent, kept in the store (so a restart keeps it)."""
        return StoreLedger(self.store)

    @property
    def user(self) -> str:
        return self.store.user

    # -- the source design's thread manager --------------------------------
    def thread_list(self) -> list[tuple[int, str]]:
        """(id, title) of this user's threads, newest first."""
        self._titles.wait(TITLE_WAIT)
        return self.store.thread_list()

    def thread_details(self, thread_id: int) -> list[tuple[str, str]]:
        """(query, response) pairs of a thread, oldest first."""
        return self.store.thread_details(thread_id)

    def new_thread(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        options: Mapping[str, Any] | None = None,
        builtin_tools: bool | None = None,
    ) -> int:
        """Start a thread; its id. The model defaults to the endpoint's default.

        ``options`` and ``builtin_tools`` are saved with the thread and used by
        every turn in it (see :meth:`update_thread_settings`), and so is the
        endpoint's provider. A model another provider serves (``claude-…`` on
        an OpenAI endpoint that does not list it) raises EndpointMismatch.
        """
        given = model
        model = Policy.from_env().model(model) or self.llm.default_model()
        if given:
            _endpoints.check_model(model, self.llm.settings, self.llm.list_models)
        settings: dict[str, Any] = {}
        endpoint = _endpoints.endpoint_record(self.llm.settings)
        if endpoint is not None:
            settings["endpoint"] = endpoint
        if options is not None:
            settings["options"] = merge_options(check_options(options))
        if builtin_tools is not None:
            settings["builtin_tools"] = bool(builtin_tools)
        return self.store.new_thread(model, system=system, settings=settings or None)

    def update_thread_settings(
        self,
        thread_id: int,
        *,
        options: Mapping[str, Any] | None = None,
        builtin_tools: bool | None = None,
        window: str | None = None,
    ) -> dict[str, Any]:
        """Merge generation options into a thread's (a None value removes one); set whether
        its turns offer the built-in client tools, and its window (``"drop"`` or
        ``"summarize"``). The thread's settings as saved."""
        thread = self.store.get(thread_id)
        settings = dict(thread.settings or {})
        if options is not None:
            merged = merge_options(settings.get("options"), check_options(options))
            settings["options"] = merged
        if builtin_tools is not None:
            settings["builtin_tools"] = bool(builtin_tools)
        if window is not None:
            settings["window"] = check_window(window)
        self.store.update_thread(thread_id, settings=settings)
        return settings

    def append_response(
        self, thread_id: int, query: str, answer: str, title: str | None = None
    ) -> int:
        """Record a whole (query, answer) turn without asking the model."""
        return self.store.append_response(thread_id, query, answer, title)

    def update_thread_title(self, thread_id: int, title: str) -> None:
        self.store.update_thread_title(thread_id, title)

    def chat_query(self, thread_id: int, query: str) -> Iterator[str]:
        """Stream the answer to ``query`` as text chunks, the thread's turns as context.

        The chunks joined are the answer. Nothing is saved (:meth:`ask` saves).
        """
        check_text(query, "query")
        thread = self.store.get(thread_id)
        history = self._thread_history(thread, upto=len(thread.turns))
        for event in self._history_turn(query, history, thread.model, update=False):
            if type(event) is TextDelta:
                yield event.text
            elif type(event) is TurnFailed:
                raise event.error

    def get_thread_title(self, thread_id: int) -> str:
        """Ask the model for a 3–5 word title (the question's own words if that fails).

        A reply longer than ``TITLE_MAX_CHARS`` or slower than ``TITLE_SECONDS``
        counts as failed: the request is closed there. A reply that names
        nothing ("3 to 5") is not a title, and small models (see
        :meth:`_is_small`) are not asked: their titles read worse than the
        question and would hold up its answer on a one-slot server.
        """
        thread = self.store.get(thread_id)
        if not thread.turns:
            raise InputError(f"thread {thread_id} has no turns to title yet; ask something first")
        fallback = question_title(thread.turns[0].query)
        if self._is_small(thread.model):
            return fallback
        options = merge_options(provider_only(self._options(thread_options(thread))),
                                TITLE_OPTIONS)  # fmt: skip
        spending = self._spending_for(thread.turns, thread_id=thread_id)
        return ask_title(self.llm, thread, options, spending) or fallback

    # -- beyond the source ----------------------------------------------------
    def threads(self) -> list[ThreadInfo]:
        """This user's threads with model, turn count and times, newest first."""
        self._titles.wait(TITLE_WAIT)
        return self.store.threads()

    def delete_thread(self, thread_id: int) -> None:
        self.store.delete_thread(thread_id)

    def search(self, text: str) -> list[SearchHit]:
        """This user's turns that mention *text*, newest threads first.

        A folder store matches substrings, ignoring case; a PostgreSQL store
        matches words and word starts through its full-text index.
        ``hit.snippet(text)`` shows where.
        """
        self._titles.wait(TITLE_WAIT)
        return self.store.search(text)

    def history(self, thread_id: int) -> ChatHistory:
        """The thread as a ChatHistory (a copy: editing it leaves the thread alone)."""
        thread = self.store.get(thread_id)
        return self._thread_history(thread, upto=len(thread.turns), clean=False)

    def ask(
        self,
        thread_id: int,
        query: str,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        over_budget: bool = False,
    ) -> Answer:
        """Save the query, stream the answer, append it; the Answer (raises if the turn failed).

        ``options`` (``{"max_tokens": 300, "seed": 1}``) apply to this call, over the
        thread's and the session's; they are saved with the turn. ``context``
        attaches objects to the question, sent apart from its text and kept with
        the turn: :class:`~nbchat.context.ContextItem` objects, ``(name, object)``
        pairs or a ``{name: object}`` dict (each described with
        :func:`nbchat.context.describe`). ``mcp`` chooses the MCP servers for
        this question, as ``Chat(mcp=...)`` does for every question.

        A question whose estimated cost would cross a budget (``budget``,
        ``kernel_budget``, the administrator's caps) raises OverBudget before
        anything is saved or sent; ``over_budget=True`` is the yes that sends it
        (except past the administrator's hard cap). Every later request of the
        question (a round after tool results, its summary, its title) is
        checked too: over a budget the turn suspends on a call that asks
        whether to go on (see :meth:`answer_tool_call`); over a hard cap it
        stops there, saved, ``finish_reason`` ``"budget"``.
        """
        return self.iter_ask(
            thread_id, query, model=model, options=options, context=context, mcp=mcp,
            over_budget=over_budget,
        ).result()

    def iter_ask(
        self,
        thread_id: int,
        query: str,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        over_budget: bool = False,
    ) -> Answer:
        """Like :meth:`ask`, as a stream of events. The query is saved before this returns.

        A client-tool call still waiting in the thread is closed first (the
        model is told the person did not answer): a ToolCallAbandoned event
        says so.
        """
        check_text(query, "query")
        thread = self.store.get(thread_id)
        _pending.check_not_outside(thread)
        self._check_endpoint(thread, model)
        asked = self._question(thread, query, model, options, mcp)
        items = as_items(context)
        spending = self._spending_for(thread.turns, thread_id=thread_id)
        self._check_budget(
            lambda: self.preview(thread_id, query, model=model, options=options, context=items,
                                 mcp=mcp),
            spending, asked.options, confirmed=over_budget,
        )  # fmt: skip
        abandoned = _pending.abandon_pending(self.store, thread)
        turn = self.store.start_turn(thread_id, query, model=asked.model, context=items)
        self.store.update_turn(thread_id, turn, options=asked.options)
        history = self._thread_history(thread, upto=len(thread.turns))
        history.chat_as_user(query, context=items)
        return self._answer(thread, turn, history, asked.model, asked.options, spending, mcp=mcp,
                            before=[ToolCallAbandoned(call) for call in abandoned])

    def retry(self, thread_id: int) -> Answer:
        """Ask the last query again when its turn failed, was interrupted or a budget stopped it.

        What the person answered to client tools in that turn, and what its
        kernel tools returned, are kept and sent again: the turn goes on from
        its last tool result. Its first request is checked against the budgets
        as every later one is.
        """
        return self.iter_retry(thread_id).result()

    def iter_retry(self, thread_id: int) -> Answer:
        """:meth:`retry` as a stream of events."""
        thread = self.store.get(thread_id)
        _pending.check_not_outside(thread)
        if not thread.turns or not _pending.retryable(thread.turns[-1]):
            raise InputError(f"the last turn of thread {thread_id} did not fail; nothing to retry")
        self._check_endpoint(thread)
        last = len(thread.turns) - 1
        spending = self._spending_for(thread.turns[:last], thread.turns[last], thread_id=thread_id)
        messages, text = _pending.resume_point(thread.turns[last])
        self.store.update_turn(
            thread_id, last, status="streaming", answer=text, messages=messages, error=None,
            pending=[],
        )  # fmt: skip
        history = self._thread_history(thread, upto=last)
        history.chat_as_user(thread.turns[last].query, context=thread.turns[last].context)
        model = thread.turns[last].model or thread.model
        options = self._turn_options(thread, thread.turns[last])
        return self._answer(thread, last, history, model, options, spending, messages=messages,
                            text=text, usage=_pending.reported(thread.turns[last]))

    def ask_with_history(
        self,
        question: str,
        history: ChatHistory,
        model: str | None = None,
        *,
        update: bool = False,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        over_budget: bool = False,
    ) -> Answer:
        """Ask with ``history`` as the context for this one request; no thread is touched.

        The history is left as it was unless ``update`` is true. ``context``
        attaches objects to the question, ``mcp`` chooses MCP servers and
        ``over_budget`` says yes to crossing a budget, as in :meth:`ask`.
        """
        return self._history_turn(
            question, history, model, update, options, context, mcp, over_budget
        ).result()

    def iter_ask_with_history(
        self,
        question: str,
        history: ChatHistory,
        model: str | None = None,
        *,
        update: bool = False,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        over_budget: bool = False,
    ) -> Answer:
        """:meth:`ask_with_history` as a stream of events."""
        return self._history_turn(question, history, model, update, options, context, mcp,
                                  over_budget)  # fmt: skip

    # -- client tools ----------------------------------------------------------
    def answer_tool_call(
        self, thread_id: int, response: object, *, call_id: str | None = None
    ) -> Answer:
        """Answer a pending client-tool call and resume the turn; the resumed Answer."""
        return self.iter_answer_tool_call(thread_id, response, call_id=call_id).result()

    def iter_answer_tool_call(
        self, thread_id: int, response: object, *, call_id: str | None = None
    ) -> Answer:
        """Check and record the answer now; stream the resumed turn.

        The answer is checked (requirements, ``parse_response``) and then
        claimed in the store: of two answers to one call, exactly one is
        recorded and resumes the turn; the other raises AlreadyAnswered and
        sends nothing. A rejected answer (InvalidToolAnswer,
        ToolRequirementsNotMet) leaves the call pending. A turn a budget
        suspended waits on a call of its own (``over_budget``): yes goes on
        from where the turn stopped, nothing sent again; no ends it there.
        When the turn could not go on after the answer (the administrator's
        hard cap), OverBudget is raised before the answer is taken: the call
        waits on, not run.
        """
        thread = self.store.get(thread_id)
        call = _pending.find_pending(thread, call_id)
        if _pending.is_hosted(thread):  # claimed here, then the agent's turn goes on
            context = ToolContext(self.user, thread.user, self.permissions, thread_id)
            return _pending.answer_hosted(self.store, thread, call, self.hosted, response,
                                          context)  # fmt: skip
        outside = _pending.is_outside(thread)
        if not outside:
            self._check_endpoint(thread)
        tool = GO_ON if call.asks_budget else self._client_tool(call.tool)
        context = ToolContext(self.user, thread.user, self.permissions, thread_id)
        if not outside and not call.asks_budget:
            self._check_hard_cap(thread, call)  # before the claim: refused, the call waits on
        result, turn = _pending.claim_answer(self.store, thread, call, tool, response, context)
        if outside:  # an outside agent reads the result; no model goes on from it
            return Answer.streaming(iter(_pending.finish_outside(self.store, thread, call, result)))
        if turn.status == "suspended":
            finished = TurnFinished(thread_id, call.turn, turn.answer, "suspended", thread.model)
            return Answer.streaming(iter([result, *map(ToolCallPending, turn.pending), finished]))
        if call.asks_budget and not GO_ON.parse_response(call.arguments, response):  # a no
            return Answer.streaming(iter(_pending.stop_at_budget(self.store, call)))
        raised = call.arguments.get("raise") if call.asks_budget else None  # what a yes lifts
        spending = self._spending_for(thread.turns[:call.turn], turn, raised=raised,
                                      thread_id=thread_id)  # fmt: skip
        history = self._thread_history(thread, upto=call.turn)
        history.chat_as_user(turn.query, context=turn.context)
        return self._answer(
            thread, call.turn, history, turn.model or thread.model,
            self._turn_options(thread, turn), spending, messages=turn.messages,
            text=turn.answer, before=[] if call.asks_budget else [result],
            usage=_pending.reported(turn),
        )  # fmt: skip

    def wait_for_titles(self, timeout: float | None = None) -> bool:
        """Wait until the titles this Chat is generating are saved; False on timeout.

        Without a timeout this waits as long as a title request may last
        (``TITLE_SECONDS``, plus the time to connect).
        """
        return self._titles.wait(timeout)

    # -- internals ---------------------------------------------------------------
    def _answered(self, thread: Thread) -> None:
        """After an answer was shown: a new thread gets its title (it does not compete)."""
        if not thread.title:
            self._titles.start(self, thread.id)
