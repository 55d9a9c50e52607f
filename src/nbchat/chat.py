"""Chat, the thread manager and the one place a turn happens; LLM, its thread-less twin.

A turn is an iterator of events (:mod:`nbchat.events`). ``iter_*`` methods
return that iterator for front ends that render as it arrives; ``ask``,
``answer_tool_call`` and friends consume it and return an :class:`Answer`.

>>> from nbchat.testing import ScriptedServer, Reply
>>> with ScriptedServer(Reply("Four.", when="2+2")) as server:
...     chat = Chat(base_url=server.url, store=getfixture("tmp_path"))
...     thread = chat.new_thread()
...     print(chat.ask(thread, "What is 2+2?"))
Four.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ._titles import clean_title
from ._turn import NullRecorder, TurnSpec, run_turn
from .config import Settings, resolve
from .errors import InputError, NbchatError, NoPendingCall, TurnInterrupted
from .events import (
    Event,
    TextDelta,
    ToolCall,
    ToolCallPending,
    ToolResult,
    TurnFailed,
    TurnFinished,
    Usage,
)
from .history import ChatHistory
from .llm import LLMClient
from .store import Thread, ThreadInfo, ThreadStore, Turn
from .tools import BUILTIN_CLIENT_TOOLS, Toolbox, ToolContext

TITLE_PROMPT = (
    "You name conversations. When asked, write a conversation title of 3 to 5 words "
    "that says what the conversation is about."
)
TITLE_REQUEST = (
    "Write the conversation title for the conversation so far: 3 to 5 words, "
    "the title only, no quotes, no punctuation at the end."
)


@dataclass(frozen=True)
class PendingCall:
    """A client-tool call waiting for the person's answer."""

    thread_id: int
    turn: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    prompt: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """The outcome of a turn: its text and where it lives. ``str(answer)`` is the text."""

    text: str
    thread_id: int | None = None
    turn: int = 0
    status: str = "complete"
    model: str = ""
    usage: Usage | None = None
    elapsed: float = 0.0
    pending: tuple[PendingCall, ...] = ()

    def __str__(self) -> str:
        return self.text

    def _repr_markdown_(self) -> str:
        return self.text


@dataclass
class TurnStream:
    """An iterable turn that remembers what it saw: text, final status, pending calls."""

    events: Iterator[Event]
    seen: list[Event] = field(default_factory=list)

    def __iter__(self) -> Iterator[Event]:
        for event in self.events:
            self.seen.append(event)
            yield event

    def close(self) -> None:
        close = getattr(self.events, "close", None)
        if close is not None:
            close()

    def result(self) -> Answer:
        """Consume what is left; the Answer, or the turn's error raised."""
        for _ in self:
            pass
        return answer_from(self.seen)


def answer_from(events: Iterable[Event]) -> Answer:
    """The Answer a finished event list describes; raises the error of a failed turn."""
    pending: list[PendingCall] = []
    for event in events:
        if isinstance(event, ToolCallPending) and event.thread_id is not None:
            pending.append(_pending_from_event(event))
        elif isinstance(event, TurnFailed):
            raise event.error
        elif isinstance(event, TurnFinished):
            return Answer(
                event.text,
                event.thread_id,
                event.turn,
                event.status,
                event.model,
                event.usage,
                event.elapsed,
                tuple(pending),
            )
    raise TurnInterrupted("the turn ended before it finished")


def _pending_from_event(event: ToolCallPending) -> PendingCall:
    try:
        arguments = json.loads(event.call.arguments)
    except ValueError:
        arguments = {}
    return PendingCall(
        event.thread_id or 0, event.turn, event.call.id, event.call.name, arguments, event.prompt
    )


class ThreadRecorder:
    """Writes a turn's progress into the thread store."""

    def __init__(self, store: ThreadStore, thread_id: int, turn: int) -> None:
        self.store, self.thread_id, self.turn = store, thread_id, turn

    def checkpoint(self, text: str, messages: list[dict[str, Any]]) -> None:
        self.store.update_turn(self.thread_id, self.turn, answer=text)

    def finish(
        self,
        status: str,
        text: str,
        messages: list[dict[str, Any]],
        *,
        pending: list[dict[str, Any]] | None = None,
        error: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.store.update_turn(
            self.thread_id,
            self.turn,
            answer=text,
            messages=list(messages),
            status=status,
            pending=list(pending or []),
            error=error,
            usage=None
            if usage is None
            else {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            },
            finished=time.time(),
        )


class HistoryRecorder(NullRecorder):
    """Adds the question and the final answer to a ChatHistory."""

    def __init__(self, history: ChatHistory, question: str) -> None:
        self.history, self.question = history, question

    def finish(self, status: str, text: str, messages: list[dict[str, Any]], **_: Any) -> None:
        if status in ("complete", "interrupted") and text:
            self.history.add_question_answer(self.question, text, clean=True)


class _Engine:
    """What Chat and LLM share: settings, the lazily resolved endpoint, tools."""

    def __init__(
        self,
        *,
        model: str | None,
        base_url: str | None,
        api_key: str | None,
        provider: str | None,
        tools: Iterable[Any],
        builtin_tools: bool,
        permissions: Iterable[str],
        max_tool_rounds: int,
        store: str | os.PathLike[str] | None = None,
        user: str | None = None,
    ) -> None:
        self._explicit = dict(
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            model=model,
            store=store,
            user=user,
        )
        self.settings: Settings = resolve(**self._explicit, discover=False)  # type: ignore[arg-type]
        self.toolbox = Toolbox([*(BUILTIN_CLIENT_TOOLS if builtin_tools else ()), *tools])
        self.permissions = frozenset(permissions)
        self.max_tool_rounds = max_tool_rounds
        self._llm: LLMClient | None = None

    @property
    def llm(self) -> LLMClient:
        """The endpoint client, resolved on first use (this may start the demo model)."""
        if self._llm is None:
            settings = resolve(**self._explicit)  # type: ignore[arg-type]
            self.settings = settings
            self._llm = LLMClient(settings)
        return self._llm

    def list_models(self) -> list[str]:
        """The models the endpoint offers."""
        return self.llm.list_models()

    def _history_turn(
        self, question: str, history: ChatHistory, model: str | None, update: bool
    ) -> TurnStream:
        _check_text(question, "question")
        if not isinstance(history, ChatHistory):
            raise InputError(
                f"history must be a ChatHistory, got {type(history).__name__}; "
                f"build one with nbchat.ChatHistory()"
            )
        context = history.copy()
        context.chat_as_user(question)
        spec = TurnSpec(
            llm=self.llm,
            model=model or self.llm.default_model(),
            context=context.messages,
            toolbox=self.toolbox,
            tool_context=ToolContext(self.settings.user, self.settings.user, self.permissions),
            recorder=HistoryRecorder(history, question) if update else NullRecorder(),
            max_rounds=self.max_tool_rounds,
            suspendable=False,
        )
        return TurnStream(run_turn(spec))


class Chat(_Engine):
    """Threads for one user, kept in a ThreadStore, and the turns that fill them.

    Parameters
    ----------
    model, base_url, api_key, provider
        Override the endpoint settings (``NBCHAT_*`` variables otherwise).
    store, user
        Where threads are kept and whose they are.
    tools
        Kernel tools (``@nbchat.tool`` functions) and client tools offered to the
        model, besides the built-in client tools (ask, choose, confirm) unless
        ``builtin_tools`` is false.
    permissions
        What the current user may do, checked by client tools' requirements.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        store: str | os.PathLike[str] | ThreadStore | None = None,
        user: str | None = None,
        tools: Iterable[Any] = (),
        builtin_tools: bool = True,
        permissions: Iterable[str] = (),
        max_tool_rounds: int = 8,
    ) -> None:
        store_path = store.path if isinstance(store, ThreadStore) else store
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            tools=tools,
            builtin_tools=builtin_tools,
            permissions=permissions,
            max_tool_rounds=max_tool_rounds,
            store=store_path,
            user=store.user if isinstance(store, ThreadStore) else user,
        )
        self.store = (
            store
            if isinstance(store, ThreadStore)
            else ThreadStore(self.settings.store, self.settings.user)
        )

    def __repr__(self) -> str:
        return f"Chat(user={self.store.user!r}, store={str(self.store.path)!r})"

    @property
    def user(self) -> str:
        return self.store.user

    # -- the source design's thread manager --------------------------------
    def thread_list(self) -> list[tuple[int, str]]:
        """(id, title) of this user's threads, newest first."""
        return self.store.thread_list()

    def thread_details(self, thread_id: int) -> list[tuple[str, str]]:
        """(query, response) pairs of a thread, oldest first."""
        return self.store.thread_details(thread_id)

    def new_thread(self, model: str | None = None, *, system: str | None = None) -> int:
        """Start a thread; its id. The model defaults to the endpoint's default."""
        return self.store.new_thread(model or self.llm.default_model(), system=system)

    def append_response(
        self, thread_id: int, query: str, answer: str, title: str | None = None
    ) -> int:
        """Record a whole (query, answer) turn without asking the model."""
        return self.store.append_response(thread_id, query, answer, title)

    def update_thread_title(self, thread_id: int, title: str) -> None:
        self.store.update_thread_title(thread_id, title)

    def chat_query(self, thread_id: int, query: str) -> Iterator[Event]:
        """Stream an answer to ``query``, the thread's earlier turns as context; saves nothing."""
        _check_text(query, "query")
        thread = self.store.get(thread_id)
        history = self._thread_history(thread, upto=len(thread.turns))
        return iter(self._history_turn(query, history, thread.model, update=False))

    def get_thread_title(self, thread_id: int) -> str:
        """Ask the model for a 3–5 word title (first words of the first query if it fails)."""
        thread = self.store.get(thread_id)
        if not thread.turns:
            raise InputError(f"thread {thread_id} has no turns to title yet; ask something first")
        first = next((t for t in thread.turns if t.answer.strip()), thread.turns[0])
        fallback = _first_words(thread.turns[0].query)
        messages = [
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": first.query[:2000]},
            {"role": "assistant", "content": first.answer[:2000]},
            {"role": "user", "content": TITLE_REQUEST},
        ]
        try:
            text = "".join(
                e.text
                for e in self.llm.stream(messages, model=thread.model)
                if type(e) is TextDelta
            )
        except NbchatError:
            return fallback
        return _clean_title(text) or fallback

    # -- beyond the source ----------------------------------------------------
    def threads(self) -> list[ThreadInfo]:
        """This user's threads with model, turn count and times, newest first."""
        return self.store.threads()

    def delete_thread(self, thread_id: int) -> None:
        self.store.delete_thread(thread_id)

    def history(self, thread_id: int) -> ChatHistory:
        """The thread as a ChatHistory (a copy: editing it leaves the thread alone)."""
        thread = self.store.get(thread_id)
        return self._thread_history(thread, upto=len(thread.turns), clean=False)

    def ask(self, thread_id: int, query: str, *, model: str | None = None) -> Answer:
        """Save the query, stream the answer, append it; the Answer (raises if the turn failed)."""
        return self.iter_ask(thread_id, query, model=model).result()

    def iter_ask(self, thread_id: int, query: str, *, model: str | None = None) -> TurnStream:
        """Like :meth:`ask`, as a stream of events. The query is saved before this returns."""
        _check_text(query, "query")
        thread = self.store.get(thread_id)
        self._abandon_pending(thread)
        model = model or thread.model
        turn = self.store.start_turn(thread_id, query, model=model)
        history = self._thread_history(thread, upto=len(thread.turns))
        history.chat_as_user(query)
        return TurnStream(
            self._run(thread, turn, history.messages, model, titled=bool(thread.title))
        )

    def retry(self, thread_id: int) -> Answer:
        """Ask the last query again when its turn failed or was interrupted."""
        thread = self.store.get(thread_id)
        if not thread.turns or thread.turns[-1].status not in ("failed", "interrupted"):
            raise InputError(f"the last turn of thread {thread_id} did not fail; nothing to retry")
        last = len(thread.turns) - 1
        self.store.update_turn(
            thread_id, last, status="streaming", answer="", messages=[], error=None, pending=[]
        )
        history = self._thread_history(thread, upto=last)
        history.chat_as_user(thread.turns[last].query)
        events = self._run(thread, last, history.messages, thread.model, titled=bool(thread.title))
        return TurnStream(events).result()

    def ask_with_history(
        self, question: str, history: ChatHistory, model: str | None = None, *, update: bool = False
    ) -> Answer:
        """Ask with ``history`` as the context for this one request; no thread is touched.

        The history is left as it was unless ``update`` is true.
        """
        return self._history_turn(question, history, model, update).result()

    def iter_ask_with_history(
        self, question: str, history: ChatHistory, model: str | None = None, *, update: bool = False
    ) -> TurnStream:
        """:meth:`ask_with_history` as a stream of events."""
        return self._history_turn(question, history, model, update)

    # -- client tools ----------------------------------------------------------
    def pending_calls(self, thread_id: int | None = None) -> list[PendingCall]:
        """Client-tool calls waiting for an answer, in one thread or in all of them."""
        ids = [thread_id] if thread_id is not None else [t.id for t in self.store.threads()]
        calls: list[PendingCall] = []
        for tid in ids:
            thread = self.store.get(tid)
            if thread.turns and thread.turns[-1].status == "suspended":
                index = len(thread.turns) - 1
                calls.extend(_pending(tid, index, e) for e in thread.turns[-1].pending)
        return calls

    def answer_tool_call(
        self, thread_id: int, response: object, *, call_id: str | None = None
    ) -> Answer:
        """Answer a pending client-tool call and resume the turn; the resumed Answer."""
        return self.iter_answer_tool_call(thread_id, response, call_id=call_id).result()

    def iter_answer_tool_call(
        self, thread_id: int, response: object, *, call_id: str | None = None
    ) -> TurnStream:
        """Check and record the answer now (raising InvalidToolAnswer or
        ToolRequirementsNotMet, the call left pending); stream the resumed turn.
        """
        thread = self.store.get(thread_id)
        call = self._find_pending(thread, call_id)
        tool = self.toolbox.client_tool(call.tool)
        context = ToolContext(self.user, thread.user, self.permissions, thread_id)
        tool.check_requirements(context, call.arguments)
        answer = tool.parse_response(call.arguments, response)
        output = tool.get_tool_output(call.arguments, answer)
        turn = thread.turns[call.turn]
        messages = turn.messages + [
            {"role": "tool", "tool_call_id": call.call_id, "name": call.tool, "content": output}
        ]
        pending = [e for e in turn.pending if e["call"]["id"] != call.call_id]
        self.store.update_turn(thread_id, call.turn, messages=messages, pending=pending)
        result = ToolResult(ToolCall(call.call_id, call.tool, json.dumps(call.arguments)), output)
        if pending:
            finished = TurnFinished(thread_id, call.turn, turn.answer, "suspended", thread.model)
            rest = [_pending_event(thread_id, call.turn, e) for e in pending]
            return TurnStream(iter([result, *rest, finished]))
        self.store.update_turn(thread_id, call.turn, status="streaming")
        history = self._thread_history(thread, upto=call.turn)
        history.chat_as_user(turn.query)
        events = self._run(
            thread,
            call.turn,
            history.messages,
            turn.model or thread.model,
            titled=bool(thread.title),
            messages=messages,
            text=turn.answer,
            first=result,
        )
        return TurnStream(events)

    # -- internals ---------------------------------------------------------------
    def _run(
        self,
        thread: Thread,
        turn: int,
        context: list[dict[str, Any]],
        model: str,
        *,
        titled: bool,
        messages: list[dict[str, Any]] | None = None,
        text: str = "",
        first: Event | None = None,
    ) -> Iterator[Event]:
        if first is not None:
            yield first
        spec = TurnSpec(
            llm=self.llm,
            model=model,
            context=context,
            toolbox=self.toolbox,
            tool_context=ToolContext(self.user, thread.user, self.permissions, thread.id),
            recorder=ThreadRecorder(self.store, thread.id, turn),
            thread_id=thread.id,
            turn=turn,
            messages=list(messages or []),
            text=text,
            max_rounds=self.max_tool_rounds,
        )
        finished = None
        for event in run_turn(spec):
            if isinstance(event, TurnFinished):
                finished = event
            yield event
        if finished is not None and finished.status == "complete" and not titled:
            self.store.update_thread_title(thread.id, self.get_thread_title(thread.id))

    def _thread_history(self, thread: Thread, *, upto: int, clean: bool = True) -> ChatHistory:
        settings = thread.settings or {}
        history = ChatHistory(
            system=thread.system,
            limit=settings.get("history_limit", self.settings.history_limit),
            strategy=settings.get("strategy", "window"),
        )
        for turn in thread.turns[:upto]:
            if turn.status == "failed" and not turn.answer:
                continue
            history.chat_as_user(turn.query)
            for message in _closed(turn):
                history.append(message)
        if clean:
            history.clean()
        return history

    def _abandon_pending(self, thread: Thread) -> None:
        """A new question while a call waits: the model is told there was no answer."""
        if not thread.turns or thread.turns[-1].status != "suspended":
            return
        index = len(thread.turns) - 1
        turn = thread.turns[index]
        self.store.update_turn(
            thread.id, index, messages=list(_closed(turn)), pending=[], status="interrupted"
        )
        thread.turns[index] = self.store.get(thread.id).turns[index]

    def _find_pending(self, thread: Thread, call_id: str | None) -> PendingCall:
        calls = self.pending_calls(thread.id)
        if not calls:
            raise NoPendingCall(f"thread {thread.id} has no client-tool call waiting for an answer")
        if call_id is None:
            if len(calls) > 1:
                ids = ", ".join(c.call_id for c in calls)
                raise NoPendingCall(
                    f"thread {thread.id} has {len(calls)} calls waiting ({ids}); say which one"
                )
            return calls[0]
        for call in calls:
            if call.call_id == call_id:
                return call
        ids = ", ".join(c.call_id for c in calls)
        raise NoPendingCall(f"no pending call {call_id!r} in thread {thread.id}; waiting: {ids}")


class LLM(_Engine):
    """The script helper: one in-memory ChatHistory, no threads, no store.

    ``ask`` uses and extends ``llm.history``; ``ask_with_history`` uses another
    history for one request and leaves the main one as it was.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        system: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        tools: Iterable[Any] = (),
        max_tool_rounds: int = 8,
    ) -> None:
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            tools=tools,
            builtin_tools=False,
            permissions=(),
            max_tool_rounds=max_tool_rounds,
        )
        self.model = model
        self.history = ChatHistory(system=system)

    def __repr__(self) -> str:
        return f"LLM(model={self.model!r}, messages={len(self.history)})"

    def ask(self, question: str) -> str:
        """Ask with the main history, which then holds the question and the answer."""
        return self._history_turn(question, self.history, self.model, update=True).result().text

    def ask_with_history(self, question: str, history: ChatHistory) -> str:
        """Ask with ``history`` for this request only; the main history is untouched."""
        return self._history_turn(question, history, self.model, update=False).result().text


def _closed(turn: Turn) -> list[dict[str, Any]]:
    """A turn's messages, with any unanswered tool call given a 'no answer' result."""
    messages = list(turn.messages)
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for entry in turn.pending:
        call = entry["call"]
        if call["id"] not in answered:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": call["function"]["name"],
                    "content": "The person did not answer this question.",
                }
            )
    if turn.answer and not any(
        m.get("role") == "assistant" and not m.get("tool_calls") for m in messages
    ):
        messages.append({"role": "assistant", "content": turn.answer})
    return messages


def _pending(thread_id: int, turn: int, entry: dict[str, Any]) -> PendingCall:
    call = entry["call"]
    return PendingCall(
        thread_id, turn, call["id"], call["function"]["name"], entry["arguments"], entry["prompt"]
    )


def _pending_event(thread_id: int, turn: int, entry: dict[str, Any]) -> ToolCallPending:
    return ToolCallPending(thread_id, turn, ToolCall.from_dict(entry["call"]), entry["prompt"])


def _check_text(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise InputError(f"the {what} must be text (str), got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"the {what} is empty; type something to ask")


def _first_words(text: str, count: int = 5) -> str:
    words = re.findall(r"[\w'’+-]+", text)
    return " ".join(words[:count]) or "Untitled"


def _clean_title(text: str) -> str:
    return clean_title(text)
