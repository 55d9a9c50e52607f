"""What a question in a stored thread is sent with: its history, compacted, and its preview.

:class:`_Asking` sits between :class:`~._engine._Engine` and
:class:`~.chat.Chat`: the steps from a stored thread to the request, shared
by asking, previewing and compacting, so that a preview builds what the
question then sends. The summary itself is :mod:`._compaction`; :meth:`_Asking._answer` runs a
thread's turn from there, every request checked against the budgets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base._secrets import Scrubbed, noting_scrubs
from ..base.config import ENV_WINDOW
from ..base.errors import InputError, OverBudget
from ..base.events import Event, Usage
from ..base.messages import Message, wire_messages
from ..base.options import Options, check_options
from ..base.policy import Policy, budget_cap
from ..base.records import PendingCall
from ..context import as_items
from ..llm import _endpoints
from ..llm._stop import StopSignal
from ..mcp.tools import Selection
from ..store.base import Store, Thread
from ..tools import Toolbox, ToolContext
from . import _pending
from ._answer import Answer
from ._budget import Spending
from ._compaction import (
    SETTING,
    Summarizer,
    Summary,
    Window,
    check_window,
    current_summary,
    summarize,
    summary_covers,
    summary_tokens,
    with_summary,
)
from ._endings import fit_history, prompt_budget, wire_tokens
from ._engine import _Engine, check_text, check_tool_choice, provider_only, thread_options
from ._preview import Preview, Sources
from ._recorders import ThreadRecorder
from ._turn import NullRecorder, add_usage, run_turn
from .history import ChatHistory


@dataclass(frozen=True)
class _Asked:
    """The model and the options a question goes with."""

    model: str
    options: Options


@dataclass(frozen=True)
class Compacted:
    """The history a request sends, the summary in it, and a summary it still needs."""

    history: ChatHistory
    summary: Summary | None = None
    needs_summary: bool = False  # the window would leave turns out, and no summary was made


class _Asking(_Engine):
    """The steps from a stored thread to the request: checks, history, compaction, preview."""

    store: Store
    window: str | None = None  # "drop" or "summarize"; None: NBCHAT_WINDOW, else "drop"
    hosted: Any = None  # the coding agents hosted here (Chat's ``hosted``)

    def pending_calls(self, thread_id: int | None = None) -> list[PendingCall]:
        """Client-tool calls waiting for an answer, in one thread or in all of them.

        Stored calls are checked against their tool's schema: a damaged one
        raises StoreCorrupt for its thread, and over all threads a thread that
        cannot be read is left out, so the healthy ones still work. When none
        waits, the first unreadable thread's StoreCorrupt is raised: the call
        someone means to answer may be the damaged one.
        """
        if thread_id is not None:
            calls = _pending.checked_waiting(self.store, self.toolbox, self.store.get(thread_id))
        else:
            calls = _pending.all_waiting(self.store, self.toolbox)
        return _pending.without_stale(self.store, calls, self.hosted)

    def preview(
        self,
        thread_id: int | None,
        query: str,
        *,
        model: str | None = None,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        system: str | None = None,
        scrubbed: Sequence[Scrubbed] = (),
    ) -> Preview:
        """The request :meth:`ask` would send now with these arguments, built and not sent.

        Nothing is saved or sent (the endpoint may be asked its context size
        and abilities, as a question asks them). ``thread_id`` None previews
        the first question of a new thread with ``system``. ``scrubbed`` are
        the scrubs made while describing the context beforehand (see
        :func:`nbchat.base._secrets.noting_scrubs`), so the preview names them.
        A summary the question would have to make first is not made: the
        preview says so (``needs_summary``) and shows the oldest turns left out.
        """
        with noting_scrubs() as noted:
            items = as_items(context)
        if thread_id is None:
            thread = Thread(0, self.store.user, "", model or self.llm.default_model(), system,
                            0.0, 0.0, [], {})  # fmt: skip
        else:
            thread = _pending.abandoned_view(self.store.get(thread_id))
            if model is None:
                self._check_endpoint(thread)
        if model is not None:  # as asking checks it, without saving the endpoint
            _endpoints.check_model(model, self.llm.settings, self.llm.list_models)
        asked = self._question(thread, query, model, options, mcp)
        upto = len(thread.turns)
        history = self._thread_history(thread, upto=upto)
        history.chat_as_user(query, context=items)
        offered = self._offered(asked.model, (thread.settings or {}).get("builtin_tools"), mcp)
        compacted = self._compacted(thread, upto, self._with_instructions(history), asked.model,
                                    asked.options, offered, make=False)  # fmt: skip
        spec = self._spec(
            compacted.history, asked.model, asked.options, offered,
            tool_context=ToolContext(self.store.user, thread.user, self.permissions, thread.id),
            recorder=NullRecorder(),
        )  # fmt: skip
        return self._preview(spec, _sources(thread, upto, spec.context, self.instructions,
                                            compacted), [*scrubbed, *noted])  # fmt: skip

    def compact(
        self, thread_id: int, *, model: str | None = None, covers: int | None = None
    ) -> Summary | None:
        """Make (or reuse) the summary the thread's next question would send; None if none.

        None when the thread fits the model's window, when the window is
        unknown, when the model is too small to summarise well (the oldest
        turns are then dropped), or when the model's reply could not be used.
        ``covers`` summarises the first ``covers`` turns now, fitting or not.
        The summary is saved with the thread, whatever its window setting. A
        summary that would cross a budget raises OverBudget, nothing sent.
        """
        thread = self.store.get(thread_id)
        model = Policy.from_env().model(model or thread.model) or thread.model
        options = self._options(thread_options(thread))
        if covers is not None:
            return self._summary_of(thread, covers, model, options)
        history = self._thread_history(thread, upto=len(thread.turns))
        history.chat_as_user("(the next question)")
        offered = self._offered(model, (thread.settings or {}).get("builtin_tools"))
        compacted = self._compacted(thread, len(thread.turns), self._with_instructions(history),
                                    model, options, offered, make=True, window="summarize",
                                    spending=self._spending_for(thread.turns,
                                                                thread_id=thread.id),
                                    strict=True)  # fmt: skip
        return compacted.summary

    def _window_of(self, thread: Thread) -> Window:
        """How the thread's window is kept: its own setting, this Chat's, NBCHAT_WINDOW, drop."""
        saved = (thread.settings or {}).get("window")
        if saved is not None:
            return check_window(saved, f"thread {thread.id}'s window setting")
        if self.window is not None:
            return check_window(self.window)
        return check_window(os.environ.get(ENV_WINDOW, "").strip() or "drop", ENV_WINDOW)

    def _compacted(
        self,
        thread: Thread,
        upto: int,
        history: ChatHistory,
        model: str,
        options: Options,
        offered: Toolbox,
        *,
        make: bool,
        window: Window | None = None,
        spending: Spending | None = None,
        strict: bool = False,
    ) -> Compacted:
        """``history`` (the question last) with a summary for the turns the window cannot
        hold, when the window is ``summarize``; the summary is made if ``make``.

        ``spending`` checks the summary's requests: one over a budget is not sent
        and the oldest turns are left out instead (OverBudget raised if ``strict``).
        """
        llm = self.llm
        size = llm.context_size(model, options)
        if (window or self._window_of(thread)) != "summarize" or self._is_small(model) or not size:
            return Compacted(history)
        tools, scale = offered.schemas() or None, llm.token_scale(model)
        if not fit_history(history, size, options, tools, scale).dropped_turns:
            return Compacted(history)
        summary = current_summary(thread, upto)
        if summary is not None:
            shorter = with_summary(history, thread, upto, summary)
            if not fit_history(shorter, size, options, tools, scale).dropped_turns:
                return Compacted(shorter, summary)
        if not make:
            return Compacted(history, needs_summary=True)
        budget = int(prompt_budget(size, options, tools) / scale)
        covers = summary_covers(history, thread, upto, budget, summary_tokens(size))
        maker = Summarizer(llm, model, size, provider_only(options), spending)
        try:
            made = summarize(thread, covers, maker, summary) if covers else None
        except OverBudget:
            if strict:
                raise
            made = None
        if made is None:
            return Compacted(history)
        self._save_summary(thread, made)
        return Compacted(with_summary(history, thread, upto, made), made)

    def _summary_of(self, thread: Thread, covers: int, model: str,
                    options: Options) -> Summary | None:  # fmt: skip
        """The summary of the thread's first ``covers`` turns: the current one, or made now."""
        if not 0 < covers <= len(thread.turns):
            raise InputError(f"thread {thread.id} has {len(thread.turns)} turns; covers must be "
                             f"1 to {len(thread.turns)}, got {covers}")  # fmt: skip
        size = self.llm.context_size(model, options)
        if self._is_small(model) or not size:
            return None
        summary = current_summary(thread, len(thread.turns))
        if summary is not None and summary.covers == covers:
            return summary
        maker = Summarizer(self.llm, model, size, provider_only(options),
                           self._spending_for(thread.turns, thread_id=thread.id))
        made = summarize(thread, covers, maker, summary)
        if made is not None:
            self._save_summary(thread, made)
        return made

    def _save_summary(self, thread: Thread, summary: Summary) -> None:
        """Keep ``summary`` in the thread's settings (one write), over the settings as stored."""
        settings = {**(self.store.get(thread.id).settings or {}), SETTING: summary.to_dict()}
        self.store.update_thread(thread.id, settings=settings)
        thread.settings = settings

    def _question(
        self,
        thread: Thread,
        query: str,
        model: str | None,
        options: Mapping[str, Any] | None,
        mcp: Selection,
    ) -> _Asked:
        """The model and options a question in ``thread`` is asked with, checked; nothing saved."""
        check_text(query, "query")
        call_options = check_options(options)
        model = Policy.from_env().model(model or thread.model) or thread.model  # before saving
        chosen = self._options(thread_options(thread), call_options)
        builtin = (thread.settings or {}).get("builtin_tools")
        if isinstance(chosen.get("tool_choice"), Mapping):  # only then: it may start MCP servers
            check_tool_choice(chosen, self._offered(model, builtin, mcp))
        return _Asked(model, chosen)

    def _check_endpoint(self, thread: Thread, model: str | None = None) -> None:
        """A thread made with another provider is asked only with a model named for this one,
        which then becomes the thread's endpoint."""
        settings = self.llm.settings
        if model is None:
            _endpoints.check_thread(thread.id, thread.settings or {}, settings)
            return
        _endpoints.check_model(model, settings, self.llm.list_models)
        endpoint = _endpoints.endpoint_record(settings)
        saved = (thread.settings or {}).get("endpoint")
        if endpoint is not None and saved is not None and saved != endpoint:
            thread.settings = {**(thread.settings or {}), "endpoint": endpoint}
            self.store.update_thread(thread.id, settings=thread.settings)

    def _answer(
        self,
        thread: Thread,
        turn: int,
        history: ChatHistory,
        model: str,
        options: Options,
        spending: Spending,
        *,
        before: Sequence[Event] = (),
        messages: Sequence[Mapping[str, Any]] = (),
        text: str = "",
        mcp: Selection = None,
        usage: Usage | None = None,
    ) -> Answer:
        """The turn as an Answer that can be stopped, after the events ``before`` it.

        ``spending`` checks each of its requests; ``usage`` is what the turn
        reported already (a resumed turn), to which a summary made now adds.
        """
        stop = StopSignal()

        def events() -> Iterator[Event]:
            yield from before
            builtin = (thread.settings or {}).get("builtin_tools")
            recorder = ThreadRecorder(self.store, thread.id, turn)
            offered = self._offered(model, builtin, mcp)
            compacted = self._compacted(thread, turn, self._with_instructions(history), model,
                                        options, offered, make=True, spending=spending)
            covered = compacted.summary.covers if compacted.summary is not None else 0
            spec = self._spec(
                compacted.history, model, options, offered,
                tool_context=ToolContext(self.store.user, thread.user, self.permissions,
                                         thread.id),
                recorder=recorder, thread_id=thread.id, turn=turn,
                messages=[Message.from_dict(m) for m in messages],  # as the store keeps them
                text=text, stop=stop, summarized_turns=covered, spending=spending,
                usage=add_usage(usage, spending.side),
            )  # fmt: skip
            try:
                yield from run_turn(spec)
            finally:  # after the front end has shown the answer
                if recorder.status in ("complete", "incomplete"):
                    self._answered(thread)

        return Answer.streaming(events(), stop)

    def _answered(self, thread: Thread) -> None:
        """Called once a turn of ``thread`` was answered (Chat titles a new thread here)."""

    def _check_hard_cap(self, thread: Thread, call: PendingCall) -> None:
        """OverBudget before an answer to ``call`` is taken when the turn could not go on
        after it: the request it leads to would cross the administrator's hard cap. The
        call then waits on, not run, to be answered once the cap allows."""
        others = [c for c in _pending.waiting(thread) if c.turn == call.turn and c != call]
        if not budget_cap().hard or others:
            return  # a soft limit asks once the turn goes on; other calls still wait
        turn = thread.turns[call.turn]
        spending = self._spending_for(thread.turns[:call.turn], turn, thread_id=thread.id)
        if not spending.limited:
            return
        history = self._with_instructions(self._thread_history(thread, upto=call.turn))
        history.chat_as_user(turn.query, context=turn.context)
        sent = wire_messages(history.system, [*history, *map(Message.from_dict, turn.messages)])
        model = turn.model or thread.model
        tools = self._offered(model, (thread.settings or {}).get("builtin_tools")).schemas()
        spending.check_hard(wire_tokens(sent, tools or None), self._turn_options(thread, turn),
                            model)  # fmt: skip

    def _thread_history(self, thread: Thread, *, upto: int, clean: bool = True) -> ChatHistory:
        return _pending.thread_history(
            thread, upto=upto, history_limit=self.settings.history_limit, clean=clean
        )


def _sources(thread: Thread, upto: int, sent: ChatHistory, instructions: str,
             compacted: Compacted) -> Sources:  # fmt: skip
    """What tells the parts of a thread's request apart, for its preview."""
    turns = _pending.history_turns(thread, upto)
    summary = compacted.summary
    covered = set(summary.turns) if summary is not None else set()
    kept = len(sent.turns()) - 1
    left_out = tuple(i for i in turns[: len(turns) - kept] if i not in covered)
    return Sources(
        turns, instructions, summary.system_text() if summary else "",
        summary.turns if summary else (), left_out, compacted.needs_summary,
    )  # fmt: skip
