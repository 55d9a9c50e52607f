"""Chat, the thread manager and the one place a turn happens; LLM, its thread-less twin.

A turn is an iterator of events (:mod:`nbchat.base.events`). ``iter_*`` methods
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

import atexit
import fnmatch
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base import markup
from ..base._secrets import remember
from ..base.config import ENV_TOOLLESS_MODELS, Settings, resolve
from ..base.errors import (
    AlreadyAnswered,
    InputError,
    InvalidToolArguments,
    NbchatError,
    NoPendingCall,
    StoreCorrupt,
    StreamCutOff,
    TurnInterrupted,
)
from ..base.events import (
    Event,
    RanCode,
    ReasoningDelta,
    ReplyFinished,
    TextDelta,
    ToolCallAbandoned,
    ToolCallPending,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    Usage,
)
from ..base.options import TITLE_OPTIONS, Options, check_options, env_options, merge_options
from ..base.policy import Policy
from ..base.records import AnsweredCall, PendingCall
from ..context import as_items
from ..llm import LLMClient, _endpoints
from ..llm._stop import StopSignal
from ..llm.local import BUNDLED_ALIAS
from ..mcp.tools import Selection, mcp_tool_named, mcp_tools
from ..store._open import open_store
from ..store.base import SearchHit, Store, Thread, ThreadInfo, Turn
from ..tools import BUILTIN_CLIENT_TOOLS, ClientTool, Toolbox, ToolContext
from ._endings import fit_history, refit_history, request_tokens
from ._titles import clean_title, names_something, question_title
from ._turn import NullRecorder, TurnSpec, run_turn
from .history import ChatHistory

ACTING_OUTPUT = "(the answer was accepted; its result is being computed)"
TITLE_PROMPT = (
    "You name conversations. When asked, write a conversation title of 3 to 5 words "
    "that says what the conversation is about."
)
TITLE_REQUEST = (
    "Write the conversation title for the conversation so far: 3 to 5 words, "
    "the title only, no quotes, no punctuation at the end."
)


class _Joined:
    """A str field kept as the parts streamed into it, joined when read.

    ``+=`` on an attribute copies the whole text for every chunk, which grows
    with the square of the answer's length; appending a part does not.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self.parts = f"_{name}_parts"

    def __get__(self, instance: object | None, owner: type | None = None) -> str:
        if instance is None:
            return ""  # the field's default
        parts: list[str] = instance.__dict__[self.parts]
        count = len(parts)  # a part appended meanwhile by the streaming thread stays after
        if count > 1:
            parts[:count] = ["".join(parts[:count])]
        return "".join(parts)

    def __set__(self, instance: object, text: str) -> None:
        self.parts_of(instance)[:] = [text]

    def parts_of(self, instance: object) -> list[str]:
        """The parts of the field of ``instance``: one list for its lifetime, to append to."""
        parts: list[str] = instance.__dict__.setdefault(self.parts, [])
        return parts


_TEXT, _REASONING = _Joined(), _Joined()


class AnswerText(str):
    """An answer's text that also says how it ended, so a cut answer is told from a whole one.

    ``status`` is ``"complete"`` or ``"incomplete"`` (``finish_reason`` ``"length"``:
    the token limit cut it; ``note`` says how to go on).
    """

    status: str
    finish_reason: str | None
    note: str

    def __new__(cls, answer: Answer) -> AnswerText:
        text = super().__new__(cls, answer.text)
        text.status, text.finish_reason, text.note = (
            answer.status, answer.finish_reason, answer.note)  # fmt: skip
        return text

    @property
    def complete(self) -> bool:
        return self.status == "complete"


@dataclass
class Answer:
    """One turn: iterable while it streams (its events), then what it came to.

    ``chat.iter_ask(…)`` returns one still streaming: iterating yields the
    turn's events and keeps ``text``, ``status``, ``pending``, ``usage`` up to
    date; ``result()`` streams what is left and returns the same object (or
    raises the failed turn's error). ``ask(…)`` returns it finished.
    ``str(answer)`` is the text; the model's thinking is apart, in
    ``reasoning``. An ``incomplete`` answer (cut at the token limit:
    ``finish_reason == "length"``) says why in ``note``.
    """

    text: _Joined = _TEXT
    thread_id: int | None = None
    turn: int = 0
    status: str = "complete"
    model: str = ""
    usage: Usage | None = None
    elapsed: float = 0.0
    pending: tuple[PendingCall, ...] = ()
    error: NbchatError | None = field(default=None, compare=False)
    events: Iterator[Event] | None = field(default=None, repr=False, compare=False)
    reasoning: _Joined = _REASONING
    finish_reason: str | None = None
    note: str = ""
    _stop: StopSignal | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def streaming(cls, events: Iterator[Event], stop: StopSignal | None = None) -> Answer:
        """An Answer that fills in as ``events`` are iterated; :meth:`stop` sets ``stop``."""
        answer = cls(status="streaming", events=events)
        answer._stop = stop
        return answer

    def __iter__(self) -> Iterator[Event]:
        events, self.events = self.events, None
        if events is None:
            return
        self._running = events  # what close() ends once iterating has begun
        add_text = _TEXT.parts_of(self).append  # the bulk of the events, at the least cost
        try:
            for event in events:
                if type(event) is TextDelta:
                    add_text(event.text)
                else:
                    self._note(event)
                yield event
        finally:
            if self.status == "streaming":
                self.status = "interrupted"

    def result(self) -> Answer:
        """Stream what is left; this Answer, or the failed turn's error raised."""
        for _ in self:
            pass
        if self.error is not None:
            raise self.error
        if self.status == "interrupted":
            raise TurnInterrupted("the turn ended before it finished", thread_id=self.thread_id,
                                  partial=self.text)
        return self

    def stop(self) -> None:
        """Stop the turn from any thread, at once even while the model sends nothing.

        The thread iterating the answer sees it end: the turn is saved as
        ``interrupted`` with the text so far, and the last event is the
        TurnFinished that says so. Stopping a finished turn does nothing.
        """
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        """Stop the turn from the thread that iterates it (the engine records it as interrupted)."""
        events = self.events if self.events is not None else getattr(self, "_running", None)
        close = getattr(events, "close", None)
        if close is not None:
            close()

    def _note(self, event: Event) -> None:
        """Take in an event other than TextDelta (``__iter__`` appends those itself)."""
        kind = type(event)
        if kind is ReasoningDelta:
            _REASONING.parts_of(self).append(event.text)  # type: ignore[union-attr]
        elif kind is TurnStarted:
            self.thread_id, self.turn, self.model = (
                event.thread_id, event.turn, event.model)  # type: ignore[union-attr]
        elif kind is ToolCallPending:
            self.pending += (event.pending,)  # type: ignore[union-attr]
        elif kind is TurnFinished:
            assert isinstance(event, TurnFinished)
            self.text, self.status, self.usage = event.text, event.status, event.usage
            self.thread_id, self.turn = event.thread_id, event.turn
            self.model, self.elapsed = event.model or self.model, event.elapsed
            self.reasoning = event.reasoning or self.reasoning
            self.finish_reason, self.note = event.finish_reason, event.note
        elif kind is TurnFailed:
            assert isinstance(event, TurnFailed)
            self.text, self.status, self.error = event.text, "failed", event.error

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return markup.styled(markup.markdown(self.text))


class ThreadRecorder:
    """Writes a turn's progress into the thread store."""

    def __init__(self, store: Store, thread_id: int, turn: int) -> None:
        self.store, self.thread_id, self.turn = store, thread_id, turn
        self.status: str | None = None  # how the turn ended, once it has

    def checkpoint(self, text: str, messages: list[dict[str, Any]]) -> None:
        self.store.update_turn(self.thread_id, self.turn, answer=text)

    def finish(
        self,
        status: str,
        text: str,
        messages: list[dict[str, Any]],
        *,
        pending: list[PendingCall] | None = None,
        error: str | None = None,
        usage: Usage | None = None,
        finish_reason: str | None = None,
        reasoning: str = "",
    ) -> None:
        self.status = status
        self.store.update_turn(
            self.thread_id,
            self.turn,
            answer=text,
            messages=list(messages),
            status=status,
            pending=list(pending or []),
            error=error,
            finish_reason=finish_reason,
            reasoning=reasoning,
            usage=None if usage is None else usage.to_dict(),
            finished=time.time(),
        )


class _Titles:
    """Titles new threads after their first answer, off the turn's critical path.

    The cell is done when the answer is: the title request runs in a daemon
    thread and its result is a store update (the panel and ``--list`` read it
    from there). A title request reads at most ``TITLE_MAX_CHARS`` of reply
    and lasts at most ``TITLE_SECONDS``; past either it is given up and the
    question's first words are the title. Every Chat of the process on the
    same store and user shares one registry (:meth:`shared`), so listing from
    any of them waits up to ``TITLE_WAIT`` for titles under way: ``%chat
    --list`` right after ``chat.ask(…)`` shows the title. At exit a script
    waits up to ``EXIT_TITLE_WAIT``.
    """

    def __init__(self) -> None:
        self._workers: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, store: Store) -> _Titles:
        """The registry of the titles under way for *store*'s user in this process."""
        key = (type(store).__name__, store.location(), store.user)
        with _SHARED_LOCK:
            titles = _SHARED_TITLES.get(key)
            if titles is None:
                titles = _SHARED_TITLES[key] = cls()
        return titles

    def start(self, chat: Chat, thread_id: int) -> None:
        with self._lock:
            if thread_id in self._workers:
                return
            worker = threading.Thread(
                target=self._title, args=(chat, thread_id), daemon=True,
                name=f"nbchat-title-{thread_id}",
            )  # fmt: skip
            worker.start()  # under the lock: wait() never meets a worker not yet started
            self._workers[thread_id] = worker

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            worker.join(left)
        return not any(worker.is_alive() for worker in workers)

    def _title(self, chat: Chat, thread_id: int) -> None:
        try:
            title = chat.get_thread_title(thread_id)
            chat.store.update_thread_title(thread_id, title, if_untitled=True)  # a rename wins
        except NbchatError:
            pass  # the thread was deleted or the store is unreadable: no title to give
        finally:
            with self._lock:
                self._workers.pop(thread_id, None)


TITLE_MAX_CHARS = 2000  # a reply this long is no title: stop reading it
TITLE_SECONDS = 5.0  # a title request is given up after this long, however it streams
TITLE_WAIT = 1.0  # seconds listing waits for a title under way
EXIT_TITLE_WAIT = 2.0  # seconds the process waits at exit for titles under way
_SHARED_TITLES: weakref.WeakValueDictionary[tuple[str, str, str], _Titles] = (
    weakref.WeakValueDictionary()
)
_SHARED_LOCK = threading.Lock()


@atexit.register
def _finish_titles() -> None:
    deadline = time.monotonic() + EXIT_TITLE_WAIT
    for titles in list(_SHARED_TITLES.values()):
        titles.wait(max(0.0, deadline - time.monotonic()))


class HistoryRecorder(NullRecorder):
    """Adds the question and the final answer to a ChatHistory."""

    def __init__(self, history: ChatHistory, question: str) -> None:
        self.history, self.question = history, question

    def finish(self, status: str, text: str, messages: list[dict[str, Any]], **_: Any) -> None:
        if status in ("complete", "incomplete", "interrupted") and text:
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
        builtin_tools: bool | None,
        permissions: Iterable[str],
        max_tool_rounds: int,
        store: str | os.PathLike[str] | None = None,
        user: str | None = None,
        options: Mapping[str, Any] | None = None,
        mcp: Selection = None,
    ) -> None:
        self._explicit = dict(
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            model=model,
            store=store,
            user=user,
        )
        self.settings: Settings = resolve(**self._explicit)  # type: ignore[arg-type]
        remember(self.settings.api_key)  # kept out of what the notebook tools send from now on
        self.user_tools = list(tools)
        self.toolbox = Toolbox([*BUILTIN_CLIENT_TOOLS, *self.user_tools])
        self.builtin_tools = builtin_tools
        self.options: Options = check_options(options)
        self.permissions = frozenset(permissions)
        self.max_tool_rounds = max_tool_rounds
        self.mcp = mcp
        self.instructions = ""  # project instructions added to every turn's system prompt
        self._llm: LLMClient | None = None

    @property
    def llm(self) -> LLMClient:
        """The endpoint client, resolved on first use (this may start the demo model)."""
        if self._llm is None:
            self._llm = LLMClient(resolve(**self._explicit))  # type: ignore[arg-type]
            self.settings = self._llm.settings
        return self._llm

    def list_models(self) -> list[str]:
        """The models the endpoint offers."""
        return self.llm.list_models()

    def _options(self, *layers: Mapping[str, Any] | None) -> Options:
        """NBCHAT_OPTIONS, then this object's options, then ``layers`` (thread, call)."""
        return merge_options(env_options(), self.options, *layers)

    def _is_small(self, model: str) -> bool:
        """Whether ``model`` is too small for tools and titles.

        The bundled model, a model named in ``NBCHAT_TOOLLESS_MODELS``, or one
        whose server says its chat template has no tools.
        """
        if self.llm.settings.origin == "local" or model == BUNDLED_ALIAS:
            return True
        patterns = os.environ.get(ENV_TOOLLESS_MODELS, "").split(",")
        if any(fnmatch.fnmatch(model, p.strip()) for p in patterns if p.strip()):
            return True
        return self.llm.template_has_tools() is False  # the server says: never taught tools

    def _offered(self, model: str, builtin: bool | None = None, mcp: Selection = None) -> Toolbox:
        """The tools offered in a turn: the user's, the built-ins where they help, MCP's.

        Built-ins are off by default for the local model and for models named in
        ``NBCHAT_TOOLLESS_MODELS``: small models call them instead of answering.
        ``mcp`` chooses the MCP servers for this turn (None: this object's choice).
        """
        if builtin is None:
            builtin = self.builtin_tools
        if builtin is None:
            builtin = not self._is_small(model)
        offered = [*(BUILTIN_CLIENT_TOOLS if builtin else ()), *self.user_tools]
        names = {getattr(item, "name", None) or getattr(item, "__name__", None) for item in offered}
        servers = [t for t in mcp_tools(self.mcp if mcp is None else mcp) if t.name not in names]
        return Toolbox([*offered, *servers])  # a tool of your own wins over a server's

    def _with_instructions(self, history: ChatHistory) -> ChatHistory:
        """``history`` whose system prompt ends with the project instructions, if any."""
        if self.instructions:
            history.system = "\n\n".join(p for p in (history.system, self.instructions) if p)
        return history

    def _client_tool(self, name: str) -> ClientTool:
        """The client tool that answers a saved call: offered here, or an MCP server's."""
        if name not in self.toolbox:
            found = mcp_tool_named(name)
            if found is not None:
                return found
        return self.toolbox.client_tool(name)

    def _spec(
        self,
        history: ChatHistory,
        model: str,
        options: Options,
        toolbox: Toolbox,
        **fields: Any,
    ) -> TurnSpec:
        """A TurnSpec whose context is the window of ``history`` that fits the model."""
        llm = self.llm
        tools = toolbox.schemas() or None
        size = llm.context_size(model, options)
        fitted = fit_history(history, size, options, tools, llm.token_scale(model))

        def refit(error: NbchatError) -> tuple[list[dict[str, Any]], int] | None:
            size = getattr(error, "context_size", None)
            if size:
                llm.learn_context_size(model, size)
            sent = getattr(error, "prompt_tokens", None)
            if sent:
                calibrate(sent)
            shorter = refit_history(history, spec.context, size or fitted.context_size,
                                    options, tools, sent, llm.token_scale(model))  # fmt: skip
            return None if shorter is None else (shorter.messages, shorter.dropped_turns)

        def calibrate(counted: int) -> None:
            """Learn the model's tokens per estimated one from its count of this request."""
            llm.learn_token_count(model, request_tokens(spec.context, tools), counted)

        spec = TurnSpec(
            llm=llm, model=model, context=fitted.messages, toolbox=toolbox, options=options,
            refit=refit, dropped_turns=fitted.dropped_turns, context_size=fitted.context_size,
            max_rounds=self.max_tool_rounds, calibrate=calibrate if size else None, **fields,
        )  # fmt: skip
        return spec

    def _history_turn(
        self,
        question: str,
        history: ChatHistory,
        model: str | None,
        update: bool,
        options: Mapping[str, Any] | None = None,
        attached: Iterable[Any] = (),
        mcp: Selection = None,
    ) -> Answer:
        _check_text(question, "question")
        if not isinstance(history, ChatHistory):
            raise InputError(
                f"history must be a ChatHistory, got {type(history).__name__}; "
                f"build one with nbchat.ChatHistory()"
            )
        context = self._with_instructions(history.copy())
        context.chat_as_user(question, context=as_items(attached))
        model = model or self.llm.default_model()
        chosen, offered = self._options(check_options(options)), self._offered(model, mcp=mcp)
        _check_tool_choice(chosen, offered)
        spec = self._spec(
            context, model, chosen, offered,
            tool_context=ToolContext(self.settings.user, self.settings.user, self.permissions),
            recorder=HistoryRecorder(history, question) if update else NullRecorder(),
            suspendable=False, stop=StopSignal(),
        )  # fmt: skip
        return Answer.streaming(run_turn(spec), spec.stop)


class Chat(_Engine):
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
    ) -> None:
        given = None if store is None or isinstance(store, str | os.PathLike) else store
        super().__init__(
            model=model,
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            tools=tools,
            builtin_tools=builtin_tools,
            permissions=permissions,
            max_tool_rounds=max_tool_rounds,
            store=None if given is not None else store,  # type: ignore[arg-type]
            user=given.user if given is not None else user,
            options=options,
            mcp=mcp,
        )
        self.store: Store = (
            given if given is not None else open_store(self.settings.store, self.settings.user)
        )
        self._titles = _Titles.shared(self.store)

    def __repr__(self) -> str:
        return f"Chat(user={self.store.user!r}, store={self.store.location()!r})"

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
    ) -> dict[str, Any]:
        """Merge generation options into a thread's (a None value removes one); set whether
        its turns offer the built-in client tools. The thread's settings as saved."""
        thread = self.store.get(thread_id)
        settings = dict(thread.settings or {})
        if options is not None:
            merged = merge_options(settings.get("options"), check_options(options))
            settings["options"] = merged
        if builtin_tools is not None:
            settings["builtin_tools"] = bool(builtin_tools)
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
        _check_text(query, "query")
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
        first = next((t for t in thread.turns if t.answer.strip()), thread.turns[0])
        fallback = question_title(thread.turns[0].query)
        if self._is_small(thread.model):
            return fallback
        messages = [
            {"role": "system", "content": TITLE_PROMPT},
            {"role": "user", "content": first.query[:2000]},
            {"role": "assistant", "content": first.answer[:2000]},
            {"role": "user", "content": TITLE_REQUEST},
        ]
        options = merge_options(_provider_only(self._options(_thread_options(thread))),
                                TITLE_OPTIONS)  # fmt: skip
        for _attempt in range(2):  # a stream the server cut short is asked once more
            try:
                reply = self._title_reply(messages, thread.model, options)
            except StreamCutOff:
                continue
            except NbchatError:
                return fallback
            if reply is None:
                return fallback
            title = _clean_title(reply)
            return title if title and names_something(title) else fallback
        return fallback

    def _title_reply(
        self, messages: list[dict[str, Any]], model: str, options: Mapping[str, Any]
    ) -> str | None:
        """The model's whole reply to a title request; None when it ran too long or too slow.

        A reply that ends with no finish reason was cut by the server (as
        llama-cpp-python does when the next question arrives): StreamCutOff.
        """
        stop = StopSignal()
        deadline = stop.set_after(TITLE_SECONDS)
        events = self.llm.stream(messages, model=model, options=options, stop=stop)
        parts: list[str] = []
        size, finished = 0, False
        try:
            for event in events:
                if type(event) is TextDelta or type(event) is ReasoningDelta:
                    size += len(event.text)
                    if size > TITLE_MAX_CHARS:
                        return None
                    if type(event) is TextDelta:
                        parts.append(event.text)
                elif type(event) is ReplyFinished:
                    finished = event.finish_reason is not None
        finally:
            deadline.cancel()
            events.close()  # an unfinished reply closes its connection
        if stop.is_set():
            return None
        if not finished:
            raise StreamCutOff("the title reply ended before the endpoint said it was done")
        return "".join(parts)

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
    ) -> Answer:
        """Save the query, stream the answer, append it; the Answer (raises if the turn failed).

        ``options`` (``{"max_tokens": 300, "seed": 1}``) apply to this call, over the
        thread's and the session's; they are saved with the turn. ``context``
        attaches objects to the question, sent apart from its text and kept with
        the turn: :class:`~nbchat.context.ContextItem` objects, ``(name, object)``
        pairs or a ``{name: object}`` dict (each described with
        :func:`nbchat.context.describe`). ``mcp`` chooses the MCP servers for
        this question, as ``Chat(mcp=...)`` does for every question.
        """
        return self.iter_ask(
            thread_id, query, model=model, options=options, context=context, mcp=mcp
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
    ) -> Answer:
        """Like :meth:`ask`, as a stream of events. The query is saved before this returns.

        A client-tool call still waiting in the thread is closed first (the
        model is told the person did not answer): a ToolCallAbandoned event
        says so.
        """
        _check_text(query, "query")
        call_options = check_options(options)
        thread = self.store.get(thread_id)
        self._check_endpoint(thread, model)
        model = Policy.from_env().model(model or thread.model) or thread.model  # before saving
        chosen = self._options(_thread_options(thread), call_options)
        builtin = (thread.settings or {}).get("builtin_tools")
        if isinstance(chosen.get("tool_choice"), Mapping):  # only then: it may start MCP servers
            _check_tool_choice(chosen, self._offered(model, builtin, mcp))
        abandoned = self._abandon_pending(thread)
        items = as_items(context)
        turn = self.store.start_turn(thread_id, query, model=model, context=items)
        self.store.update_turn(thread_id, turn, options=chosen)
        history = self._thread_history(thread, upto=len(thread.turns))
        history.chat_as_user(query, context=items)
        return self._answer(thread, turn, history, model, chosen, mcp=mcp,
                            before=[ToolCallAbandoned(call) for call in abandoned])

    def retry(self, thread_id: int) -> Answer:
        """Ask the last query again when its turn failed or was interrupted.

        What the person answered to client tools in that turn is kept and sent
        again: the turn goes on from its last answered tool call.
        """
        return self.iter_retry(thread_id).result()

    def iter_retry(self, thread_id: int) -> Answer:
        """:meth:`retry` as a stream of events."""
        thread = self.store.get(thread_id)
        if not thread.turns or thread.turns[-1].status not in ("failed", "interrupted"):
            raise InputError(f"the last turn of thread {thread_id} did not fail; nothing to retry")
        self._check_endpoint(thread)
        last = len(thread.turns) - 1
        messages, text = _resume_point(thread.turns[last])
        self.store.update_turn(
            thread_id, last, status="streaming", answer=text, messages=messages, error=None,
            pending=[],
        )  # fmt: skip
        history = self._thread_history(thread, upto=last)
        history.chat_as_user(thread.turns[last].query, context=thread.turns[last].context)
        model = thread.turns[last].model or thread.model
        options = _turn_options(thread, thread.turns[last], self)
        return self._answer(thread, last, history, model, options, messages=messages, text=text)

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
    ) -> Answer:
        """Ask with ``history`` as the context for this one request; no thread is touched.

        The history is left as it was unless ``update`` is true. ``context``
        attaches objects to the question and ``mcp`` chooses MCP servers, as in :meth:`ask`.
        """
        return self._history_turn(
            question, history, model, update, options, context, mcp
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
    ) -> Answer:
        """:meth:`ask_with_history` as a stream of events."""
        return self._history_turn(question, history, model, update, options, context, mcp)

    # -- client tools ----------------------------------------------------------
    def pending_calls(self, thread_id: int | None = None) -> list[PendingCall]:
        """Client-tool calls waiting for an answer, in one thread or in all of them.

        Stored calls are checked against their tool's schema: a damaged one
        raises StoreCorrupt for its thread, and over all threads a thread that
        cannot be read is left out, so the healthy ones still work. When none
        waits, the first unreadable thread's StoreCorrupt is raised: the call
        someone means to answer may be the damaged one.
        """
        if thread_id is not None:
            return self._waiting(self.store.get(thread_id))
        calls: list[PendingCall] = []
        damaged: list[StoreCorrupt] = []
        for info in self.store.threads():
            try:
                calls += self._waiting(self.store.get(info.id))
            except StoreCorrupt as error:
                damaged.append(error)
        if damaged and not calls:
            raise damaged[0]
        return calls

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
        ToolRequirementsNotMet) leaves the call pending.
        """
        thread = self.store.get(thread_id)
        call = self._find_pending(thread, call_id)
        self._check_endpoint(thread)
        tool = self._client_tool(call.tool)
        self._check_stored_call(thread, call, tool)
        self._check_shown(thread, call, tool, response)
        context = ToolContext(self.user, thread.user, self.permissions, thread_id)
        tool.check_requirements(context, call.arguments)
        answer = tool.parse_response(call.arguments, response)
        acts = tool.acts_on_answer  # its output has effects: act only once the claim is won
        output = ACTING_OUTPUT if acts else tool.get_tool_output(call.arguments, answer)
        record = AnsweredCall(
            call.call_id, call.tool, call.prompt.question, answer, self.user, time.time()
        )
        turn = self.store.claim_call(
            thread_id, call.turn, call.call_id, output=output, answer=record
        )
        shown: str | RanCode = ""
        if acts:
            output, turn = self._act_on_answer(call, tool, answer)
            shown = tool.shown_output(call.arguments, answer)
        result = ToolResult(call.call, output, shown=shown)
        if turn.status == "suspended":
            finished = TurnFinished(thread_id, call.turn, turn.answer, "suspended", thread.model)
            return Answer.streaming(iter([result, *map(ToolCallPending, turn.pending), finished]))
        history = self._thread_history(thread, upto=call.turn)
        history.chat_as_user(turn.query, context=turn.context)
        return self._answer(
            thread, call.turn, history, turn.model or thread.model,
            _turn_options(thread, turn, self), messages=turn.messages, text=turn.answer,
            before=[result],
        )  # fmt: skip

    def _act_on_answer(
        self, call: PendingCall, tool: ClientTool, answer: object
    ) -> tuple[str, Turn]:
        """Compute a claimed answer's output (it runs code, say) and put it in the turn."""
        try:
            output = tool.get_tool_output(call.arguments, answer)
        except KeyboardInterrupt:
            turn = self._set_tool_output(call, "The user interrupted the run; it did not finish.")
            if turn.status == "streaming":
                self.store.update_turn(call.thread_id, call.turn, status="interrupted")
            raise
        return output, self._set_tool_output(call, output)

    def _set_tool_output(self, call: PendingCall, output: str) -> Turn:
        turn = self.store.get(call.thread_id).turns[call.turn]
        messages = [
            {**m, "content": output} if m.get("tool_call_id") == call.call_id else m
            for m in turn.messages
        ]
        return self.store.update_turn(call.thread_id, call.turn, messages=messages)

    def wait_for_titles(self, timeout: float | None = None) -> bool:
        """Wait until the titles this Chat is generating are saved; False on timeout.

        Without a timeout this waits as long as a title request may last
        (``TITLE_SECONDS``, plus the time to connect).
        """
        return self._titles.wait(timeout)

    # -- internals ---------------------------------------------------------------
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
        *,
        before: Sequence[Event] = (),
        messages: list[dict[str, Any]] | None = None,
        text: str = "",
        mcp: Selection = None,
    ) -> Answer:
        """The turn as an Answer that can be stopped, after the events ``before`` it."""
        stop = StopSignal()

        def events() -> Iterator[Event]:
            yield from before
            builtin = (thread.settings or {}).get("builtin_tools")
            recorder = ThreadRecorder(self.store, thread.id, turn)
            spec = self._spec(
                self._with_instructions(history), model, options,
                self._offered(model, builtin, mcp),
                tool_context=ToolContext(self.user, thread.user, self.permissions, thread.id),
                recorder=recorder, thread_id=thread.id, turn=turn,
                messages=list(messages or []), text=text, stop=stop,
            )  # fmt: skip
            try:
                yield from run_turn(spec)
            finally:  # after the front end has shown the answer: the title does not compete
                answered = recorder.status in ("complete", "incomplete")
                if answered and not thread.title:
                    self._titles.start(self, thread.id)

        return Answer.streaming(events(), stop)

    def _waiting(self, thread: Thread) -> list[PendingCall]:
        calls = _waiting(thread)
        for call in calls:
            tool = self.toolbox.get(call.tool) if call.tool in self.toolbox else None
            if isinstance(tool, ClientTool):
                self._check_stored_call(thread, call, tool)
        return calls

    def _check_shown(
        self, thread: Thread, call: PendingCall, tool: ClientTool, response: object
    ) -> None:
        """An answer given to what a prompt showed must meet the same call in the store."""
        check = getattr(tool, "check_shown", None)
        why = check(call.arguments, response) if check is not None else None
        if why:
            where = self.store.location(thread.id)
            raise StoreCorrupt(
                f"{where} holds a pending {call.tool!r} call whose {why}; nothing ran; "
                "ask again to see the code again", path=where,
            )

    def _check_stored_call(self, thread: Thread, call: PendingCall, tool: ClientTool) -> None:
        """A stored call's arguments must still be what the tool accepts (files get edited)."""
        try:
            tool.parse_arguments(call.arguments)
        except InvalidToolArguments as error:
            where = self.store.location(thread.id)
            raise StoreCorrupt(
                f"{where} holds a pending {call.tool!r} call whose arguments the tool "
                f"rejects ({error}); it was left untouched; ask again to close it",
                path=where,
            ) from None

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
            history.chat_as_user(turn.query, context=turn.context)
            for message in _closed(turn):
                history.append(message)
        if clean:
            history.clean()
        return history

    def _abandon_pending(self, thread: Thread) -> list[PendingCall]:
        """A new question while calls wait: the model is told there was no answer."""
        if not thread.turns or thread.turns[-1].status != "suspended":
            return []
        index = len(thread.turns) - 1
        turn = thread.turns[index]
        self.store.update_turn(
            thread.id, index, messages=list(_closed(turn)), pending=[], status="interrupted"
        )
        thread.turns[index] = self.store.get(thread.id).turns[index]
        return list(turn.pending)

    def _find_pending(self, thread: Thread, call_id: str | None) -> PendingCall:
        calls = _waiting(thread)
        if call_id is not None:
            calls = [call for call in calls if call.call_id == call_id] or calls
        if len(calls) == 1 and (call_id is None or calls[0].call_id == call_id):
            return calls[0]
        if calls and call_id is None:
            ids = ", ".join(c.call_id for c in calls)
            raise NoPendingCall(
                f"thread {thread.id} has {len(calls)} calls waiting ({ids}); say which one"
            )
        done = _answered(thread, call_id)
        if done is not None:
            raise AlreadyAnswered(
                f"already answered: {done.question or done.tool!r} in thread {thread.id} "
                f"was answered ({done.shown}); nothing was sent again",
                thread_id=thread.id,
                call_id=done.call_id,
                answer=done.shown,
            )
        if not calls:
            raise NoPendingCall(f"thread {thread.id} has no client-tool call waiting for an answer")
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
        options: Mapping[str, Any] | None = None,
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
            options=options,
        )
        self.model = model
        self.history = ChatHistory(system=system)

    def __repr__(self) -> str:
        return f"LLM(model={self.model!r}, messages={len(self.history)})"

    def ask(self, question: str, *, options: Mapping[str, Any] | None = None) -> AnswerText:
        """Ask with the main history, which then holds the question and the answer.

        ``options`` apply to this call, over the LLM's own and ``NBCHAT_OPTIONS``.
        The text is a ``str`` whose ``status`` says whether the answer is whole.
        """
        turn = self._history_turn(question, self.history, self.model, True, options)
        return AnswerText(turn.result())

    def ask_with_history(
        self, question: str, history: ChatHistory, *, options: Mapping[str, Any] | None = None
    ) -> AnswerText:
        """Ask with ``history`` for this request only; the main history is untouched."""
        turn = self._history_turn(question, history, self.model, False, options)
        return AnswerText(turn.result())


def _closed(turn: Turn) -> list[dict[str, Any]]:
    """A turn's messages, with any unanswered tool call given a 'no answer' result."""
    messages = list(turn.messages)
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for call in turn.pending:
        if call.call_id not in answered:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.call_id,
                    "name": call.tool,
                    "content": "The person did not answer this question.",
                }
            )
    if turn.answer and not any(m.get("role") == "assistant" for m in messages):
        messages.append({"role": "assistant", "content": turn.answer})  # no messages kept
    return messages


def _thread_options(thread: Thread) -> Options:
    options = (thread.settings or {}).get("options")
    return dict(options) if isinstance(options, dict) else {}


def _turn_options(thread: Thread, turn: Turn, engine: _Engine) -> Options:
    """The options a turn was asked with (resuming it uses them again)."""
    if turn.options is not None:
        return dict(turn.options)
    return engine._options(_thread_options(thread))


def _provider_only(options: Options) -> Options:
    """Options that are about the endpoint, not the answer (kept for side requests)."""
    answer_keys = {"max_tokens", "temperature", "top_p", "seed", "stop", "tool_choice"}
    return {k: v for k, v in options.items() if k not in answer_keys}


def _answered(thread: Thread, call_id: str | None) -> AnsweredCall | None:
    """The last turn's answered call (that one, or the latest), if any."""
    answered = thread.turns[-1].answered if thread.turns else []
    matching = [done for done in answered if call_id is None or done.call_id == call_id]
    return matching[-1] if matching else None


def _waiting(thread: Thread) -> list[PendingCall]:
    last = thread.turns[-1] if thread.turns else None
    return list(last.pending) if last is not None and last.status == "suspended" else []


def _resume_point(turn: Turn) -> tuple[list[dict[str, Any]], str]:
    """The messages and text a failed turn goes on from: through its last tool result."""
    messages = list(turn.messages)
    while messages and messages[-1].get("role") != "tool":
        messages.pop()
    rounds = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
    return messages, "\n\n".join(text for text in rounds if text)


def _check_text(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise InputError(f"the {what} must be text (str), got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"the {what} is empty; type something to ask")


def _clean_title(text: str) -> str:
    return clean_title(text)


def _check_tool_choice(options: Mapping[str, Any], toolbox: Toolbox) -> None:
    """Refuse a tool choice naming a tool this turn does not offer, before anything is sent."""
    choice = options.get("tool_choice")
    if not isinstance(choice, Mapping):
        return
    name = (choice.get("function") or {}).get("name")
    if name not in toolbox.names:
        offered = ", ".join(toolbox.names) or "none"
        raise InputError(
            f"tool_choice names {name!r}, which is not offered in this turn (offered: "
            f"{offered}); name one of those, or leave --tool-choice out"
        )
