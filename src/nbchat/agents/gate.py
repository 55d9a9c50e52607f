"""The gate: an outside agent's side effect as a call waiting in the person's thread store.

Each agent token has a thread of its own (settings ``{"outside": {...}}``),
so ``%chat --list``, ``--show`` and search show what each agent asked and
what the person answered. A call that changes something (insert, edit or
execute a cell, run code) is one turn of that thread: its question says who
asks what, and the call waits there, persisted, like any client-tool call,
until the person answers it in the notebook. The answer is claimed once
(the store's compare-and-set); the kernel acts on it and writes the result
into the same turn, where :meth:`AgentGate.status` finds it for the agent.

A request re-sent with the same key (a client retrying after a dropped
stream) finds the call it made before: the call id is derived from the key.
An agent waiting on a call (:meth:`AgentGate.wait`) is woken by this gate's
own writes at once and sees another process's (the kernel's answer) by the
thread's stamp, never by re-reading the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..base._visible import for_terminal
from ..base.errors import AgentRefused, ThreadNotFound
from ..base.records import PendingCall, Prompt
from ..engine._pending import call_arguments, called, complete_outside
from ..store.base import Store, Thread, Turn
from .tokens import AgentToken

State = Literal["waiting", "running", "done", "rejected", "failed"]
GATED = {
    "read": "read",  # a read that asks (the token's policy, or the administrator's cap)
    "run_code": "execute",
    "execute_cell": "execute",
    "insert_cell": "edit",
    "edit_cell": "edit",
    "delete_cell": "edit",
    "move_cell": "edit",
}
TOOL_PREFIX = "agent_"  # the pending call's tool: agent_run_code, agent_insert_cell, …
AGENT_MODEL = "outside-agent"
RETRY_WINDOW = 600.0  # seconds within which the same request key finds the same call
RECENT_TURNS = 200
WHY_MAX = 500
STAMP_EVERY = 0.1  # seconds between looks at a thread's stamp while an agent waits
MAX_WAITING = 20  # calls of one token that wait for the person at once
MAX_WAITING_CHARS = 24_000_000  # characters those calls carry together (code, cell sources)


@dataclass(frozen=True)
class AgentCall:
    """A gated call as the agent sees it: its handle, its state, what came of it."""

    handle: str
    tool: str
    notebook: str
    state: State
    answer: str = ""
    result: str = ""
    created: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"handle": self.handle, "tool": self.tool,
                                "notebook": self.notebook, "state": self.state}  # fmt: skip
        if self.answer:
            data["answer"] = self.answer
        if self.result:
            data["result"] = self.result
        if self.state == "waiting":
            data["next"] = (
                "The person must answer this in the notebook (Run, Edit or Reject). Call "
                "call_status with this handle (wait_seconds up to 20) to learn the outcome; "
                "do not send the request again."
            )
        return data


def request_key(token: AgentToken, tool: str, arguments: dict[str, Any], request_id: object) -> str:
    """The key a re-sent request shares with the first: token, JSON-RPC id, tool, arguments."""
    canonical = json.dumps([token.id, str(request_id), tool, arguments], sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class AgentGate:
    """Gated calls of outside agents, in one user's thread store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._threads: dict[str, int] = {}
        self._listeners: set[Callable[[int], None]] = set()

    # -- the agent's side ------------------------------------------------------
    def request(
        self,
        token: AgentToken,
        tool: str,
        arguments: dict[str, Any],
        *,
        notebook: str,
        key: str,
        why: str = "",
        shown: str = "",
        diff: str = "",
    ) -> AgentCall:
        """Record ``tool(arguments)`` as a call waiting for the person; the same key, the same call.

        ``arguments`` hold what the person sees and what runs (``code`` for
        code, ``source`` for a cell). ``shown`` is extra Markdown above the
        prompt; ``diff`` an edit's unified diff (chunks numbered), which text front ends
        print instead of the whole new source; ``why`` the agent's reason, as its words.
        """
        thread_id = self._thread_for(token)
        thread = self.store.get(thread_id)
        call_id = f"agent-{key}"
        found = _turn_with_call(thread, call_id)
        if found is not None:
            return self._call(thread, found)
        _check_room(thread, arguments)
        label = token.label
        reason = " ".join(str(why).split())[:WHY_MAX]
        question = f"Agent {label} asks to {tool.replace('_', ' ')} in {notebook}"
        turn = self.store.start_turn(thread_id, question, model=AGENT_MODEL)
        prompt = Prompt(
            kind="code", question=question, options=("Run", "Edit", "Reject"), markdown=shown,
            extra={"agent": label, "token": token.id, "notebook": notebook,
                   "reason": reason, "asks": _why_it_asks(tool),
                   **({"diff": diff} if diff else {})},
        )  # fmt: skip
        stored = {**arguments, "notebook": notebook, "handle": f"{thread_id}.{turn}"}
        pending = PendingCall(thread_id, turn, call_id, TOOL_PREFIX + tool, stored, prompt)
        assistant = {"role": "assistant", "content": reason or None,
                     "tool_calls": [pending.call.to_dict()]}  # fmt: skip
        self.store.update_turn(
            thread_id, turn, messages=[assistant], pending=[pending], status="suspended"
        )
        self._changed(thread_id)
        return self._call(self.store.get(thread_id), turn)

    def status(self, token: AgentToken, handle: str) -> AgentCall:
        """The state of the call ``handle`` names; AgentRefused (404) if it is not this token's."""
        thread_id, turn = _parse_handle(handle)
        try:
            thread = self.store.get(thread_id)
        except ThreadNotFound:
            thread = None
        outside = (thread.settings or {}).get("outside") if thread is not None else None
        if thread is None or not isinstance(outside, dict) or outside.get("token") != token.id \
                or turn >= len(thread.turns):  # fmt: skip
            raise AgentRefused(f"no call {handle!r} was made with this token", status=404)
        return self._call(thread, turn)

    def stamp(self, handle: str) -> object:
        """The stamp of the thread of the call ``handle`` names: take it before reading
        the call, and :meth:`wait` since it (a write in between is not missed)."""
        return self.store.stamp(_parse_handle(handle)[0])

    async def wait(self, handle: str, seconds: float, since: object) -> None:
        """Return once the thread of the call ``handle`` names may have changed after the
        stamp ``since``, or after ``seconds``: at once for this gate's writes, within
        STAMP_EVERY for another process's (the stamp costs no read of the thread)."""
        thread_id, _ = _parse_handle(handle)
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def listener(written: int) -> None:
            if written == thread_id:
                loop.call_soon_threadsafe(changed.set)

        deadline = loop.time() + seconds
        self._listeners.add(listener)
        try:
            while (left := deadline - loop.time()) > 0:
                if self.store.stamp(thread_id) != since:
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(STAMP_EVERY, left))
                    return
        finally:
            self._listeners.discard(listener)

    def _changed(self, thread_id: int) -> None:
        for listener in list(self._listeners):
            listener(thread_id)

    def waiting(self, token: AgentToken) -> list[AgentCall]:
        """This token's calls that still wait for the person."""
        thread_id = self._known_thread(token)
        if thread_id is None:
            return []
        thread = self.store.get(thread_id)
        calls = [self._call(thread, i) for i in range(max(0, len(thread.turns) - RECENT_TURNS),
                                                       len(thread.turns))]  # fmt: skip
        # A call whose turn is still being written (no tool yet) is not one until it is.
        return [call for call in calls if call.state in ("waiting", "running") and call.tool != "?"]

    # -- the kernel's side -----------------------------------------------------------
    def complete(self, handle: str, output: str) -> None:
        """Give the call ``handle`` names its result (a change the front end made) and end it."""
        thread_id, index = _parse_handle(handle)
        turn = self.store.get(thread_id).turns[index]
        first = called(turn)
        if first is None or turn.status != "streaming":
            return  # ended already (or not ours): the first result stands
        call = PendingCall(thread_id, index, first.id, first.name, {}, Prompt("code", ""))
        complete_outside(self.store, call, output)
        self._changed(thread_id)

    # -- the thread of a token --------------------------------------------------
    def _known_thread(self, token: AgentToken) -> int | None:
        known = self._threads.get(token.id)
        if known is not None:
            try:
                if self._owner(self.store.get(known)) == token.id:
                    return known
            except ThreadNotFound:
                pass
        for info in self.store.threads():
            if info.model == AGENT_MODEL and self._owner(self.store.get(info.id)) == token.id:
                self._threads[token.id] = info.id
                return info.id
        return None

    def _thread_for(self, token: AgentToken) -> int:
        found = self._known_thread(token)
        if found is not None:
            return found
        made = self.store.new_thread(
            AGENT_MODEL, title=f"Agent: {token.label}",
            settings={"outside": {"agent": token.label, "token": token.id}},
        )  # fmt: skip
        self._threads[token.id] = made
        return made

    @staticmethod
    def _owner(thread: Thread) -> str | None:
        outside = (thread.settings or {}).get("outside")
        return outside.get("token") if isinstance(outside, dict) else None

    def _call(self, thread: Thread, index: int) -> AgentCall:
        turn = thread.turns[index]
        call = called(turn)
        tool = call.name.removeprefix(TOOL_PREFIX) if call is not None else "?"
        notebook = ""
        if turn.pending:
            notebook = str(turn.pending[0].arguments.get("notebook", ""))
        elif call is not None:
            notebook = str(call_arguments(call).get("notebook", ""))
        handle = f"{thread.id}.{index}"
        state, answer, result = _outcome(turn)
        return AgentCall(handle, tool, notebook, state, answer, result, turn.started)


def _check_room(thread: Thread, arguments: dict[str, Any]) -> None:
    """AgentRefused (429) when this token's waiting calls would pass MAX_WAITING or
    MAX_WAITING_CHARS: the person answers a few at a time, and the store is theirs."""
    waiting = [turn for turn in thread.turns[-RECENT_TURNS:]
               if _outcome(turn)[0] in ("waiting", "running")]  # fmt: skip
    if len(waiting) >= MAX_WAITING:
        raise AgentRefused(
            f"{len(waiting)} calls of this token already wait for the person (at most "
            f"{MAX_WAITING}); call call_status on them and send more once they are answered",
            status=429,
        )  # fmt: skip
    carried = sum(_size(call.arguments) for turn in waiting for call in turn.pending)
    size = _size(arguments)
    if carried + size > MAX_WAITING_CHARS:
        raise AgentRefused(
            f"this call's {size:,} characters with the {carried:,} of this token's waiting "
            f"calls pass {MAX_WAITING_CHARS:,}; wait for the person to answer those first",
            status=429,
        )  # fmt: skip


def _size(arguments: dict[str, Any]) -> int:
    return sum(len(value) for value in arguments.values() if isinstance(value, str))


def _why_it_asks(tool: str) -> str:
    if tool == "read":
        return ("Your policy for this agent's token (or the administrator's NBCHAT_MAX_APPROVAL) "
                "asks before it reads your notebook.")
    if tool in ("run_code", "execute_cell"):
        return "Running code in your kernel can change your variables, files and more."
    return "It changes your notebook."


def _turn_with_call(thread: Thread, call_id: str) -> int | None:
    now = time.time()
    start = max(0, len(thread.turns) - RECENT_TURNS)
    for index in range(len(thread.turns) - 1, start - 1, -1):
        turn = thread.turns[index]
        if now - turn.started > RETRY_WINDOW:
            break
        first = called(turn)
        if first is not None and first.id == call_id:
            return index
    return None


def _outcome(turn: Turn) -> tuple[State, str, str]:
    """The state of a gated call's turn, the person's answer in words, the result for the agent."""
    answer = turn.answered[0].shown if turn.answered else ""
    result = next((str(m.get("content") or "") for m in turn.messages
                   if m.get("role") == "tool"), "")  # fmt: skip
    if turn.status == "suspended":
        return "waiting", "", ""
    if turn.status == "streaming":
        return ("running" if turn.answered else "waiting"), answer, ""
    if turn.status == "complete":
        rejected = bool(turn.answered) and answer.startswith("reject")
        return ("rejected" if rejected else "done"), answer, result
    why = turn.error or "the run did not finish"
    if turn.status == "interrupted" and not turn.answered:
        why = "the call was closed without an answer"
    return "failed", answer, for_terminal(result or why)


def _parse_handle(handle: object) -> tuple[int, int]:
    text = str(handle)
    first, dot, second = text.partition(".")
    if not dot or not first.isdigit() or not second.isdigit() or len(text) > 24:
        raise AgentRefused(f"{text[:40]!r} is not a call handle; use the handle a call returned",
                           status=404)  # fmt: skip
    return int(first), int(second)
