"""Client-tool calls waiting in a stored thread, and the turns they leave to go on from.

A suspended turn holds calls that wait for a person's answer. Here they are
found (:func:`find_pending`, :func:`all_waiting`), checked against their tool
before anything runs, closed when a new question passes them by, and claimed
with an answer (:func:`claim_answer`); :func:`thread_history` and
:func:`resume_point` say what the next or the resumed turn sends. Functions
over a store and a thread, so that :class:`~nbchat.engine.chat.Chat` keeps
only the order of the steps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..base.errors import (
    AgentError,
    AlreadyAnswered,
    InputError,
    InvalidToolArguments,
    NoPendingCall,
    StaleProposal,
    StoreCorrupt,
)
from ..base.events import Event, RanCode, ToolResult, TurnFinished, Usage
from ..base.markup import fence
from ..base.messages import Message
from ..base.records import AnsweredCall, PendingCall, Prompt, RecordError, ToolCall
from ..store.base import Store, Thread, Turn
from ..tools import ClientTool, Toolbox, ToolContext
from ._answer import Answer
from ._endings import BUDGET_REASON
from .history import ChatHistory

ACTING_OUTPUT = "(the answer was accepted; its result is being computed)"
OUTSIDE_TURNS = 200  # the recent turns of an outside agent's thread whose calls may wait


def is_outside(thread: Thread) -> bool:
    """Whether ``thread`` holds an outside agent's calls: each turn is one call, no model."""
    return isinstance((thread.settings or {}).get("outside"), dict)


class Hosted(Protocol):
    """What answers a hosted coding agent's requests (``nbchat.agents.acp.AcpHost``)."""

    tool: ClientTool

    def check(self, thread: Thread, call: PendingCall) -> None: ...

    def resume(self, thread: Thread, call: PendingCall, result: ToolResult) -> Answer: ...

    def sweep(self, thread: Thread) -> None: ...


def without_stale(
    store: Store, calls: list[PendingCall], host: Hosted | Callable[[], Hosted | None] | None
) -> list[PendingCall]:
    """``calls`` less an agent's requests no live agent waits on any more (closed as
    cancelled now, as the host does): a restarted kernel never offers them to answer."""
    hosted_threads = {c.thread_id for c in calls if is_hosted(store.get(c.thread_id))}
    hosted = (host() if callable(host) else host) if hosted_threads else None
    if hosted is None:
        return calls
    for thread_id in hosted_threads:
        hosted.sweep(store.get(thread_id))
    still = {c.call_id for tid in hosted_threads for c in waiting(store.get(tid))}
    return [c for c in calls if c.thread_id not in hosted_threads or c.call_id in still]


def answer_hosted(
    store: Store, thread: Thread, call: PendingCall,
    host: Hosted | Callable[[], Hosted | None] | None, response: object, context: ToolContext,
) -> Answer:
    """Claim the answer to an agent's request now (once), then hand it to the agent.

    AgentGone (the request closed as cancelled) when no agent waits on it any more.
    """
    hosted = host() if callable(host) else host
    if hosted is None:
        raise AgentError(f"thread {thread.id} is a coding agent's session, hosted by a kernel: "
                         "answer its request in that notebook")  # fmt: skip
    hosted.check(thread, call)
    result, _ = claim_answer(store, thread, call, hosted.tool, response, context)
    return hosted.resume(thread, call, result)


def is_hosted(thread: Thread) -> bool:
    """Whether ``thread`` is a coding agent's session hosted in the chat (ACP): no model."""
    return bool(hosted_agent(thread))


def hosted_agent(thread: Thread | None) -> str:
    """The agent whose session ``thread`` is ("" for any other thread)."""
    acp = (thread.settings or {}).get("acp") if thread is not None else None
    return str(acp.get("agent") or "") if isinstance(acp, dict) else ""


def check_not_outside(thread: Thread) -> None:
    """InputError for a question asked of the model in an outside agent's or an agent's thread."""
    if is_outside(thread):
        raise InputError(
            f"thread {thread.id} holds an outside agent's calls, not a conversation; "
            "ask in another thread (%chat -n QUESTION)"
        )
    if is_hosted(thread):
        name = thread.settings["acp"].get("agent", "NAME")
        raise InputError(
            f"thread {thread.id} is a session of the agent {name!r}, which answers in it: "
            f"%chat -t {thread.id} --with {name} QUESTION; ask nbchat's model in another "
            "thread (%chat -n QUESTION)"
        )


def waiting(thread: Thread) -> list[PendingCall]:
    """The calls the thread's last turn waits on (none unless it is suspended).

    In an outside agent's thread every recent turn is one call, and each may wait.
    """
    if is_outside(thread):
        recent = thread.turns[-OUTSIDE_TURNS:]
        return [call for turn in recent if turn.status == "suspended" for call in turn.pending]
    last = thread.turns[-1] if thread.turns else None
    return list(last.pending) if last is not None and last.status == "suspended" else []


def checked_waiting(store: Store, toolbox: Toolbox, thread: Thread) -> list[PendingCall]:
    """The thread's waiting calls, each checked against its tool if ``toolbox`` offers it."""
    calls = waiting(thread)
    for call in calls:
        tool = toolbox.get(call.tool) if call.tool in toolbox else None
        if isinstance(tool, ClientTool):
            check_stored_call(store, thread, call, tool)
    return calls


def all_waiting(store: Store, toolbox: Toolbox) -> list[PendingCall]:
    """The checked calls waiting in every thread of the store's user that can be read.

    A damaged thread is left out, so the healthy ones still work; when none
    waits, the first damaged thread's StoreCorrupt is raised.
    """
    calls: list[PendingCall] = []
    damaged: list[StoreCorrupt] = []
    for info in store.threads():
        try:
            calls += checked_waiting(store, toolbox, store.get(info.id))
        except StoreCorrupt as error:
            damaged.append(error)
    if damaged and not calls:
        raise damaged[0]
    return calls


def answered(thread: Thread, call_id: str | None) -> AnsweredCall | None:
    """The last turn's answered call (that one, or the latest), if any."""
    done = thread.turns[-1].answered if thread.turns else []
    if is_outside(thread):
        done = [call for turn in thread.turns[-OUTSIDE_TURNS:] for call in turn.answered]
    matching = [call for call in done if call_id is None or call.call_id == call_id]
    return matching[-1] if matching else None


def find_pending(thread: Thread, call_id: str | None) -> PendingCall:
    """The waiting call ``call_id`` names (or the only one); why not, raised."""
    calls = waiting(thread)
    if call_id is not None:
        calls = [call for call in calls if call.call_id == call_id] or calls
    if len(calls) == 1 and (call_id is None or calls[0].call_id == call_id):
        return calls[0]
    if calls and call_id is None:
        ids = ", ".join(c.call_id for c in calls)
        raise NoPendingCall(
            f"thread {thread.id} has {len(calls)} calls waiting ({ids}); say which one"
        )
    done = answered(thread, call_id)
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


def claim_answer(
    store: Store,
    thread: Thread,
    call: PendingCall,
    tool: ClientTool,
    response: object,
    context: ToolContext,
) -> tuple[ToolResult, Turn]:
    """Check ``response`` to ``call``, claim the call with it; the result and the turn as saved.

    Of two answers to one call exactly one wins the claim (the other raises
    AlreadyAnswered). A tool whose output has effects (it runs code) acts only
    once the claim is won.
    """
    check_stored_call(store, thread, call, tool)
    check_shown(store, thread, call, tool, response)
    tool.check_requirements(context, call.arguments)
    try:
        answer = tool.parse_answer(call, response)
    except StaleProposal as stale:  # shown again on the cell's new text, still waiting
        if stale.prompt is not None:
            reprompt(store, call, Prompt.from_dict(stale.prompt, default_question=call.tool))
        raise
    acts = tool.acts_on_answer
    output = ACTING_OUTPUT if acts else tool.get_tool_output(call.arguments, answer)
    record = AnsweredCall(
        call.call_id, call.tool, call.prompt.question, answer, context.user, time.time()
    )
    turn = store.claim_call(thread.id, call.turn, call.call_id, output=output, answer=record)
    shown: str | RanCode = ""
    if acts:
        output, turn = act_on_answer(store, call, tool, answer)
        shown = tool.shown_output(call.arguments, answer)
    return ToolResult(call.call, output, shown=shown), turn


def reprompt(store: Store, call: PendingCall, prompt: Prompt) -> None:
    """Keep ``call`` waiting with ``prompt`` instead of the one it was stored with."""
    turn = store.get(call.thread_id).turns[call.turn]
    pending = [dataclasses.replace(p, prompt=prompt) if p.call_id == call.call_id else p
               for p in turn.pending]  # fmt: skip
    store.update_turn(call.thread_id, call.turn, pending=pending)


def check_stored_call(store: Store, thread: Thread, call: PendingCall, tool: ClientTool) -> None:
    """A stored call's arguments must still be what the tool accepts (files get edited)."""
    try:
        tool.parse_arguments(call.arguments)
    except InvalidToolArguments as error:
        where = store.location(thread.id)
        raise StoreCorrupt(
            f"{where} holds a pending {call.tool!r} call whose arguments the tool "
            f"rejects ({error}); it was left untouched; ask again to close it",
            path=where,
        ) from None


def check_shown(
    store: Store, thread: Thread, call: PendingCall, tool: ClientTool, response: object
) -> None:
    """An answer given to what a prompt showed must meet the same call in the store."""
    check = getattr(tool, "check_shown", None)
    why = check(call.arguments, response) if check is not None else None
    if why:
        where = store.location(thread.id)
        raise StoreCorrupt(
            f"{where} holds a pending {call.tool!r} call whose {why}; nothing ran; "
            "ask again to see the code again", path=where,
        )  # fmt: skip


def act_on_answer(
    store: Store, call: PendingCall, tool: ClientTool, answer: object
) -> tuple[str, Turn]:
    """Compute a claimed answer's output (it runs code, say) and put it in the turn."""
    try:
        output = tool.get_tool_output(call.arguments, answer)
    except KeyboardInterrupt:
        turn = set_tool_output(store, call, "The user interrupted the run; it did not finish.")
        if turn.status == "streaming":
            store.update_turn(call.thread_id, call.turn, status="interrupted")
        raise
    return output, set_tool_output(store, call, output)


def set_tool_output(store: Store, call: PendingCall, output: str) -> Turn:
    """Put ``output`` in the tool message that answers ``call``; the turn as saved."""
    turn = store.get(call.thread_id).turns[call.turn]
    messages = [
        {**m, "content": output} if m.get("tool_call_id") == call.call_id else m
        for m in turn.messages
    ]
    return store.update_turn(call.thread_id, call.turn, messages=messages)


def abandon_pending(store: Store, thread: Thread) -> list[PendingCall]:
    """A new question while calls wait: the model is told there was no answer."""
    if not thread.turns or thread.turns[-1].status != "suspended":
        return []
    index = len(thread.turns) - 1
    turn = thread.turns[index]
    store.update_turn(
        thread.id, index, messages=closed(turn), pending=[], status="interrupted"
    )
    thread.turns[index] = store.get(thread.id).turns[index]
    return list(turn.pending)


def closed(turn: Turn) -> list[dict[str, Any]]:
    """A turn's messages, with any unanswered tool call given a 'no answer' result."""
    messages = list(turn.messages)
    done = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    unanswered = "The person did not answer this question."
    for call in turn.pending:
        if call.call_id not in done and not call.asks_budget:  # the model made no such call
            closing = Message("tool", unanswered, tool_call_id=call.call_id, name=call.tool)
            messages.append(closing.to_dict())
    if turn.answer and not any(m.get("role") == "assistant" for m in messages):
        messages.append(Message("assistant", turn.answer).to_dict())  # no messages kept
    return messages


def retryable(turn: Turn) -> bool:
    """Whether a turn may be asked again: it failed, was interrupted, or a budget stopped it."""
    stopped = turn.status == "incomplete" and turn.finish_reason == BUDGET_REASON
    return turn.status in ("failed", "interrupted") or stopped


def stop_at_budget(store: Store, call: PendingCall) -> list[Event]:
    """The person said no to going past a budget: the turn ends with what it has."""
    note = "stopped at the budget: you chose not to go on (%chat --retry asks again)"
    turn = store.update_turn(call.thread_id, call.turn, status="incomplete", error=note,
                             finish_reason=BUDGET_REASON, finished=time.time())  # fmt: skip
    return [TurnFinished(call.thread_id, call.turn, turn.answer, "incomplete", turn.model or "",
                         reported(turn), finish_reason=BUDGET_REASON, note=note)]


def reported(turn: Turn) -> Usage | None:
    """What the turn's requests reported so far, checked (None: nothing)."""
    usage = Usage.from_dict(turn.usage)
    return None if usage.prompt_tokens is None and usage.completion_tokens is None else usage


def thread_history(
    thread: Thread, *, upto: int, history_limit: int | None, clean: bool = True
) -> ChatHistory:
    """The thread's first ``upto`` turns as a ChatHistory, unanswered calls closed."""
    settings = thread.settings or {}
    history = ChatHistory(
        system=thread.system,
        limit=settings.get("history_limit", history_limit),
        strategy=settings.get("strategy", "window"),
    )
    for index in history_turns(thread, upto):
        turn = thread.turns[index]
        history.chat_as_user(turn.query, context=turn.context)
        for message in closed(turn):
            history.append(message)
    if clean:
        history.clean()
    return history


def history_turns(thread: Thread, upto: int) -> list[int]:
    """The indexes of the first ``upto`` turns a history holds: all but failed unanswered ones."""
    return [i for i, turn in enumerate(thread.turns[:upto])
            if not (turn.status == "failed" and not turn.answer)]  # fmt: skip


def abandoned_view(thread: Thread) -> Thread:
    """``thread`` as :func:`abandon_pending` would leave it, the store untouched (a preview)."""
    if not thread.turns or thread.turns[-1].status != "suspended":
        return thread
    last = dataclasses.replace(thread.turns[-1], messages=closed(thread.turns[-1]), pending=[],
                               status="interrupted")  # fmt: skip
    return dataclasses.replace(thread, turns=[*thread.turns[:-1], last])


def resume_point(turn: Turn) -> tuple[list[dict[str, Any]], str]:
    """The messages and text a failed turn goes on from: through its last tool result."""
    messages = list(turn.messages)
    while messages and messages[-1].get("role") != "tool":
        messages.pop()
    rounds = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
    return messages, "\n\n".join(text for text in rounds if text)


def finish_outside(
    store: Store, thread: Thread, call: PendingCall, result: ToolResult
) -> list[Event]:
    """End an outside agent's turn once its call's result is in; the events that say so.

    A tool that acts later (a change the notebook's front end applies) left
    :data:`ACTING_OUTPUT` as its output: the turn stays open until
    :func:`complete_outside` gets the result.
    """
    if result.output == ACTING_OUTPUT:  # the store's turn stays open for the front end's reply
        sent = "Sent to the notebook's front end; its reply ends the call."
        return [result, TurnFinished(thread.id, call.turn, sent, "complete", thread.model)]
    turn = complete_outside(store, call, None)
    return [result, TurnFinished(thread.id, call.turn, turn.answer, "complete", thread.model)]


def complete_outside(store: Store, call: PendingCall, output: str | None) -> Turn:
    """Put ``output`` (if given) in an outside call's turn and end it; the turn as saved."""
    if output is not None:
        set_tool_output(store, call, output)
    turn = store.get(call.thread_id).turns[call.turn]
    result = next((str(m.get("content") or "") for m in turn.messages
                   if m.get("tool_call_id") == call.call_id), "")  # fmt: skip
    said = turn.answered[0].shown if turn.answered else ""
    answer = f"The person answered: {said}." if said else ""
    code = _called_code(turn, call.call_id)
    if code and not said.startswith(("reject", "run the edited")):  # an edit's result shows it
        answer += f"\n\nWhat they approved:\n\n{fence(code, 'python')}"
    if result:  # the audit: what came of it, as the agent reads it
        answer += f"\n\n{fence(result, 'text')}"
    messages = [*turn.messages, Message("assistant", answer).to_dict()]
    return store.update_turn(call.thread_id, call.turn, status="complete", answer=answer,
                             messages=messages, finished=time.time())  # fmt: skip


def called(turn: Turn, call_id: str | None = None) -> ToolCall | None:
    """The tool call ``call_id`` (or the first one) as the turn's messages keep it."""
    for message in turn.messages:
        for data in message.get("tool_calls") or ():
            try:
                call = ToolCall.from_dict(data)
            except RecordError:
                return None
            if call_id is None or call.id == call_id:
                return call
    return None


def call_arguments(call: ToolCall | None) -> dict[str, Any]:
    """A stored call's arguments as a dict ({} when they are not a JSON object)."""
    try:
        loaded = json.loads(call.arguments) if call is not None else {}
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _called_code(turn: Turn, call_id: str) -> str:
    """The ``code`` argument of the call ``call_id`` as the turn's messages keep it."""
    return str(call_arguments(called(turn, call_id)).get("code", ""))
