"""The agents hosted in one process (a kernel): their sessions, their turns, their requests.

:class:`AcpHost` starts an agent the first time a thread asks it, keeps its
session while the process lives, and ends every agent's whole process tree
when the process ends (``atexit``) or :meth:`AcpHost.close` is called. A turn
is read in the caller's thread (:meth:`AcpHost.iter_ask`) from the session's
inbox: it is written to the thread store as it goes, and it suspends when the
agent asks permission, as any turn suspends on a client-tool call. The
answer comes back through :meth:`nbchat.Chat.iter_answer_tool_call`, which
claims it once in the store and hands it here (:meth:`AcpHost.resume`).

A thread of an agent keeps ``settings["acp"]``: the agent's name, its ACP
session id (so a later start resumes it with ``session/load`` where the
agent offers it) and which process hosts it. A request stored by a process
that has ended, or by an agent that has ended, is answered as cancelled the
next time it is answered or listed here (:meth:`AcpHost.sweep`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ...base._pids import pid_exists, started
from ...base.errors import AgentError, AgentGone
from ...base.events import (
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallPending,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
)
from ...base.records import HOSTED_MODEL, AnsweredCall, PendingCall, Prompt, ToolCall
from ...engine._answer import Answer
from ...engine._pending import hosted_agent, is_hosted
from ...llm._stop import StopSignal
from ...store.base import Store, Thread
from ._permission import TOOL, AcpPermission, is_remembered, kind_of, option_for
from ._session import AgentSession, Done, Permission, require_sdk
from ._specs import AgentSpec, find_agent
from ._updates import TurnState, events_for

CHECKPOINT_SECONDS = 1.0  # how often a streaming turn's text is written to the store
STOP_SECONDS = 5.0  # how long a stopped turn waits for the agent to say it stopped
POLL = 0.1  # seconds between looks at the inbox (an interrupt arrives between them)
McpFor = Callable[[int], tuple[list[Any], Callable[[], None] | None]]


def host_key() -> str:
    """This process, as a thread's settings name its host: machine, pid and start time."""
    return f"{socket.gethostname()}:{os.getpid()}:{started(os.getpid())}"


class AcpHost:
    """Coding agents hosted in this process, over one user's thread store."""

    def __init__(self, store: Store, *, cwd: str | None = None,
                 mcp_for: McpFor | None = None) -> None:  # fmt: skip
        self.store = store
        self.cwd = cwd or os.getcwd()
        self.mcp_for = mcp_for  # the MCP servers (nbchat's own) a new session is handed
        self._sessions: dict[int, AgentSession] = {}
        self._always: dict[str, set[str]] = {}  # by agent: the tool kinds allowed for good
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.tool = AcpPermission()

    # -- threads ----------------------------------------------------------------
    def new_thread(self, name: str, title: str = "") -> int:
        """A new thread for the agent ``name`` (checked first: installed, allowed)."""
        spec = find_agent(name)
        return self.store.new_thread(
            HOSTED_MODEL + name, title=title[:200],
            settings={"acp": {"agent": name, "label": spec.label, "session": "", "host": ""}},
        )  # fmt: skip

    def agent_of(self, thread_id: int) -> str | None:
        """The agent whose session thread ``thread_id`` is, or None for any other thread."""
        return hosted_agent(self.store.get(thread_id)) or None

    # -- asking -----------------------------------------------------------------------
    def iter_ask(self, thread_id: int, question: str) -> Answer:
        """Ask the thread's agent ``question``: an Answer streaming the turn's events."""
        thread = self.store.get(thread_id)
        if not is_hosted(thread):
            raise AgentError(f"thread {thread_id} is not an agent's session; ask an agent "
                             "in a thread of its own: %chat --with NAME QUESTION")  # fmt: skip
        self.sweep(thread)
        if thread.turns and thread.turns[-1].status == "suspended":
            self._cancel_stale(thread, "a new question was asked")
        session = self._session(thread)
        turn = self.store.start_turn(thread_id, question, model=thread.model)
        if not thread.title:
            self.store.update_thread_title(thread_id, _title(question), if_untitled=True)
        self._call(session.prompt(question), wait=False)
        return self._answer(session, turn, [TurnStarted(thread_id, turn, thread.model)])

    def resume(self, thread: Thread, call: PendingCall, result: ToolResult) -> Answer:
        """The person's answer (claimed) to the agent; the rest of the turn's events."""
        session = self._sessions.get(thread.id)
        kind = kind_of(result.output)
        if session is None or not session.answer(call.call_id, option_for(call.arguments, kind)):
            self._end_turn(thread.id, call.turn, "interrupted", "the agent had ended")
            error = AgentGone(f"{_label(thread)} had ended before your answer; it was not "
                              f"sent. Ask again: %chat --with {_agent(thread)} QUESTION")
            return Answer.streaming(iter([TurnFailed(thread.id, call.turn, error)]))
        if kind == "allow_always" and is_remembered(call.arguments.get("tool_kind")):
            session.remembered.add(str(call.arguments["tool_kind"]))
        return self._answer(session, call.turn, [result], resumed=True)

    def check(self, thread: Thread, call: PendingCall) -> None:
        """Before an answer is claimed: AgentGone (the call closed) if no agent waits on it."""
        session = self._sessions.get(thread.id)
        if session is not None and session.alive and call.call_id in session.waiting:
            return
        host = str(thread.settings["acp"].get("host", ""))
        if session is None and host != host_key() and _host_alive(host):
            raise AgentError(f"{_label(thread)} runs in another kernel ({host.split(':')[1]} on "
                             f"this machine); answer it in that notebook")  # fmt: skip
        self._cancel_stale(thread, "its agent had ended")
        raise AgentGone(f"{_label(thread)} is no longer running, so its request was closed as "
                        f"cancelled; ask again: %chat --with {_agent(thread)} QUESTION")

    def sweep(self, thread: Thread) -> None:
        """Close as cancelled the requests of ``thread`` that no live agent waits on."""
        if not thread.turns or thread.turns[-1].status != "suspended":
            return
        session = self._sessions.get(thread.id)
        waiting = session.waiting if session is not None and session.alive else {}
        host = str(thread.settings["acp"].get("host", ""))
        if session is None and host != host_key() and _host_alive(host):
            return  # another live kernel hosts it
        if not any(call.call_id in waiting for call in thread.turns[-1].pending):
            self._cancel_stale(thread, "its agent had ended")

    def stop(self, thread_id: int) -> None:
        """Stop the thread's turn: ``session/cancel``; its waiting requests are cancelled."""
        session = self._sessions.get(thread_id)
        if session is not None:
            self._call(session.cancel(), wait=True)

    def close(self, thread_id: int | None = None) -> None:
        """End the agents (one thread's, or all) and their whole process trees."""
        for tid in [thread_id] if thread_id is not None else list(self._sessions):
            session = self._sessions.pop(tid, None)
            if session is not None:
                self._call(session.close(), wait=True, timeout=10.0)
                self._let_go(tid)

    def _let_go(self, thread_id: int) -> None:
        """The thread no longer names this process its host: another kernel may take it up."""
        with contextlib.suppress(Exception):  # deleted meanwhile, the store gone (at exit)
            settings = self.store.get(thread_id).settings
            if settings["acp"].get("host") == host_key():
                acp = {**settings["acp"], "host": ""}
                self.store.update_thread(thread_id, settings={**settings, "acp": acp})

    # -- the turn as it is read ------------------------------------------------------------
    def _answer(self, session: AgentSession, turn: int, first: list[Event], *,
                resumed: bool = False) -> Answer:  # fmt: skip
        """The turn as an Answer whose stop (Escape, Stop) sends ``session/cancel``."""
        stop = StopSignal()
        events = self._read(session, turn, first, resumed=resumed, stop=stop)
        return Answer.streaming(events, stop=stop)

    def _read(self, session: AgentSession, turn: int, first: list[Event], *,
              resumed: bool, stop: StopSignal) -> Iterator[Event]:  # fmt: skip
        """The turn's events from the agent's inbox, written to the store as they come."""
        record = _Record(self.store, session.thread_id, turn, resumed=resumed)
        yield from first
        with stop.on_set(lambda: self._call(session.cancel(), wait=False)):
            yield from self._inbox(session, record)

    def _inbox(self, session: AgentSession, record: _Record) -> Iterator[Event]:
        try:
            while True:
                item = _next(session.inbox)
                if item is None:
                    record.checkpoint()
                    continue
                if isinstance(item, Done):
                    yield record.finish(item)
                    return
                if isinstance(item, Permission):
                    pending = record.permission(item, self.tool)
                    if pending is not None:
                        yield ToolCallPending(pending)
                        yield record.suspend()
                        return
                    continue
                for event in events_for(item, record.state):
                    record.on(event)
                    yield event
        except (KeyboardInterrupt, GeneratorExit):
            self._call(session.cancel(), wait=False)
            record.drain_stopped(session)
            raise

    # -- sessions ------------------------------------------------------------------------
    def _session(self, thread: Thread) -> AgentSession:
        found = self._sessions.get(thread.id)
        if found is not None and found.alive:
            return found
        spec: AgentSpec = find_agent(_agent(thread))
        require_sdk()
        host = str(thread.settings["acp"].get("host", ""))
        if host and host != host_key() and _host_alive(host):  # two agents on one session: no
            raise AgentError(
                f"{_label(thread)} answers thread {thread.id} in another kernel (process "
                f"{host.split(':')[1]}); ask it there, or here in a thread of its own: "
                f"%chat -n --with {_agent(thread)} QUESTION")  # fmt: skip
        session = AgentSession(spec, thread.id, self._ensure_loop(),
                               remembered=self._always.setdefault(spec.name, set()))
        mcp_servers, revoke = self.mcp_for(thread.id) if self.mcp_for is not None else ([], None)
        session.revoke = revoke
        resume = str(thread.settings["acp"].get("session", ""))
        try:
            self._call(session.start(self.cwd, mcp_servers, resume), wait=True)
        except BaseException:
            self._call(session.close(), wait=True, timeout=10.0)
            raise
        self._sessions[thread.id] = session
        acp = {**thread.settings["acp"], "session": session.session_id, "host": host_key()}
        self.store.update_thread(thread.id, settings={**thread.settings, "acp": acp})
        return session

    def _cancel_stale(self, thread: Thread, why: str) -> None:
        """Answer the last turn's waiting requests as cancelled (once: the store's claim)."""
        index = len(thread.turns) - 1
        for call in thread.turns[index].pending:
            record = AnsweredCall(call.call_id, call.tool, call.prompt.question, "cancelled",
                                  "nbchat", time.time())  # fmt: skip
            try:
                self.store.claim_call(thread.id, index, call.call_id, output="cancelled",
                                      answer=record)  # fmt: skip
            except Exception:  # answered meanwhile (AlreadyAnswered): that answer stands
                continue
        self._end_turn(thread.id, index, "interrupted", why)

    def _end_turn(self, thread_id: int, turn: int, status: str, why: str) -> None:
        current = self.store.get(thread_id).turns[turn]
        if current.status in ("streaming", "suspended"):
            self.store.update_turn(thread_id, turn, status=status, error=why,
                                   finished=time.time())  # fmt: skip

    # -- the event loop ----------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="nbchat-acp", daemon=True).start()
                self._loop = loop
                atexit.register(self.close)
            return self._loop

    def _call(self, coro: Any, *, wait: bool, timeout: float | None = None) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure_loop())
        return future.result(timeout) if wait else future


class _Record:
    """One turn of an agent as the store keeps it: text, the agent's tool calls, its requests."""

    def __init__(self, store: Store, thread_id: int, turn: int, *, resumed: bool) -> None:
        self.store, self.thread_id, self.turn = store, thread_id, turn
        current = store.get(thread_id).turns[turn]
        self.parts: list[str] = [current.answer] if resumed and current.answer else []
        self.said = len(self.parts)  # the parts some message of the turn already holds
        self.messages: list[dict[str, Any]] = list(current.messages) if resumed else []
        self.reasoning: list[str] = [current.reasoning] if current.reasoning else []
        self.state = TurnState()
        self.written = time.monotonic()
        self.model = store.get(thread_id).model

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def _said(self, **message: Any) -> dict[str, Any]:
        """An assistant message with the text the agent wrote since the last one: the
        turn's messages keep its words in order with its tool calls and requests."""
        content = "".join(self.parts[self.said:]) or None
        self.said = len(self.parts)
        return {"role": "assistant", "content": content, **message}

    def on(self, event: Event) -> None:
        if type(event) is TextDelta:
            self.parts.append(event.text)
        elif isinstance(event, ToolResult) and event.call.id != "plan":
            self.messages += [
                self._said(tool_calls=[event.call.to_dict()]),
                {"role": "tool", "tool_call_id": event.call.id,
                 "content": ("failed" if event.is_error else "completed") +
                            (f"\n{event.shown}" if isinstance(event.shown, str) and event.shown
                             else "")},
            ]  # fmt: skip
        elif type(event) is ReasoningDelta:
            self.reasoning.append(event.text)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write the text so far, at most every CHECKPOINT_SECONDS."""
        if time.monotonic() - self.written > CHECKPOINT_SECONDS:
            self.store.update_turn(self.thread_id, self.turn, answer=self.text)
            self.written = time.monotonic()

    def permission(self, item: Permission, tool: AcpPermission) -> PendingCall | None:
        """Keep the request: waiting in the store (a PendingCall), or the remembered "always"."""
        arguments = {k: v for k, v in item.arguments.items() if k != "auto"}
        call = ToolCall(item.call_id, TOOL, json.dumps(arguments))
        self.messages.append(self._said(tool_calls=[call.to_dict()]))
        if item.arguments.get("auto"):  # allowed for good by the person earlier
            self.messages.append({"role": "tool", "tool_call_id": item.call_id,
                                  "content": "allow always (remembered)"})  # fmt: skip
            return None
        prompt = Prompt.from_dict(tool.prompt(arguments), default_question=TOOL)
        pending = PendingCall(self.thread_id, self.turn, item.call_id, TOOL, arguments, prompt)
        self.store.update_turn(self.thread_id, self.turn, answer=self.text,
                               messages=self.messages, pending=[pending],
                               reasoning="".join(self.reasoning), status="suspended")  # fmt: skip
        return pending

    def suspend(self) -> TurnFinished:
        return TurnFinished(self.thread_id, self.turn, self.text, "suspended", self.model)

    def finish(self, done: Done) -> Event:
        status = {"cancelled": "interrupted", "failed": "failed"}.get(done.stop_reason,
                                                                        "complete")  # fmt: skip
        if done.error is not None and status == "complete":
            status = "failed"
        messages = [*self.messages, self._said()]
        self.store.update_turn(
            self.thread_id, self.turn, answer=self.text, messages=messages, status=status,
            finish_reason=done.stop_reason, reasoning="".join(self.reasoning),
            error=str(done.error) if done.error is not None else None, finished=time.time(),
        )  # fmt: skip
        if done.error is not None:
            return TurnFailed(self.thread_id, self.turn, done.error, self.text)  # type: ignore[arg-type]
        return TurnFinished(self.thread_id, self.turn, self.text, status,  # type: ignore[arg-type]
                            self.model, finish_reason=done.stop_reason)

    def drain_stopped(self, session: AgentSession) -> None:
        """After Stop: what the agent still sends until it says it stopped, then the record."""
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            item = _next(session.inbox)
            if isinstance(item, Done):
                break
            if item is not None and not isinstance(item, Permission):
                for event in events_for(item, self.state):
                    if type(event) is TextDelta:
                        self.parts.append(event.text)
        self.finish(Done("cancelled", None))


def _next(inbox: queue.Queue[Any]) -> Any:
    try:
        return inbox.get(timeout=POLL)
    except queue.Empty:
        return None


def _agent(thread: Thread) -> str:
    return str(thread.settings["acp"]["agent"])


def _label(thread: Thread) -> str:
    return str(thread.settings["acp"].get("label") or _agent(thread))


def _title(question: str) -> str:
    words = " ".join(question.split())
    return words if len(words) <= 60 else words[:59].rstrip() + "…"


def _host_alive(host: str) -> bool:
    """Whether the process a thread's settings name as its host still runs, here."""
    machine, _, rest = host.partition(":")
    pid, _, when = rest.partition(":")
    if machine != socket.gethostname() or not pid.isdigit():
        return False
    return pid_exists(int(pid)) and started(int(pid)) == when
