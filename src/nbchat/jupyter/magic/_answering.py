"""``%chat --answer [CALL] VALUE``: which waiting client-tool call a typed answer is for.

:func:`tool_answer` reads the line against the calls waiting in the store and
says which thread and call the value answers, and whether answering runs a
notebook tool (then the magics answer with the Chat that offers those tools).
Sending the answer and rendering the resumed turn stay with the magics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ...context.cell_tools import CELL_TOOLS
from ...context.plan import PLAN_TOOL

if TYPE_CHECKING:
    from ...engine.chat import Chat

NOTEBOOK_TOOLS = ("run_code", PLAN_TOOL, *CELL_TOOLS)
_HANDLE = re.compile(r"\A(\d{1,9})\.\d{1,9}\Z")  # an outside agent's call: thread.turn


@dataclass(frozen=True)
class ToolAnswer:
    """A typed answer, placed: its thread, its call (None: the thread's waiting ones), its value."""

    thread_id: int
    call_id: str | None
    value: str
    runs_notebook_tool: bool


def tool_answer(chat: Chat, thread: int | None, text: str) -> ToolAnswer:
    """Place ``text`` (``VALUE`` or ``CALL VALUE``) among the calls waiting in ``thread``.

    ``CALL`` is a call's id, or an outside agent's call handle (``3.0``).

    ``text`` is not empty. Without a thread: the one thread where calls wait;
    more than one is an error.
    """
    first, _, rest = text.partition(" ")
    handle = _HANDLE.match(first)
    if rest.strip() and handle is not None:  # an outside agent's call, by its handle: any thread
        calls = chat.pending_calls(int(handle.group(1)))
        handles = {f"{c.thread_id}.{c.turn}": c for c in calls if c.tool.startswith("agent_")}
        if first in handles:
            call = handles[first]
            return ToolAnswer(thread_id=call.thread_id, call_id=call.call_id,
                              value=_unquote_value(rest.strip()), runs_notebook_tool=False)
    calls = chat.pending_calls(thread)
    if thread is None:
        threads = sorted({call.thread_id for call in calls})
        if len(threads) > 1:
            raise UsageError(f"calls wait for an answer in threads {threads}; "
                             f"say which: %chat -t ID --answer VALUE")
        thread = threads[0] if threads else None
    if thread is None:
        raise UsageError("no client-tool call is waiting for an answer")
    call_id = first if rest.strip() and first in {c.call_id for c in calls} else None
    value = _unquote_value(rest.strip() if call_id else text)
    answered = [c for c in calls if c.thread_id == thread and call_id in (None, c.call_id)]
    runs = any(c.tool in NOTEBOOK_TOOLS for c in answered)
    return ToolAnswer(thread_id=thread, call_id=call_id, value=value, runs_notebook_tool=runs)


def proposal_answers(chat: Chat, thread: int | None, text: str) -> list[ToolAnswer] | None:
    """``accept|reject [CELL…]`` for the waiting proposals: every one, or those on the cells
    named; None when ``text`` is not such an answer (one call's answer: :func:`tool_answer`)."""
    word, _, rest = text.strip().partition(" ")
    verb = word.lower().rstrip(":")
    if verb not in ("accept", "reject", "run"):
        return None
    calls = [c for c in chat.pending_calls(thread) if c.tool in CELL_TOOLS]
    if thread is None and len({c.thread_id for c in calls}) > 1:
        return None  # tool_answer says which threads wait
    cells = {str(c.prompt.extra.get("cell_id") or c.call_id): c for c in calls}
    named = rest.split()
    if named and all(name in cells for name in named):
        chosen = [cells[name] for name in named]
        value = verb
    elif len(calls) > 1 and (not named or verb == "reject"):
        chosen, value = calls, text.strip()  # Accept all / Reject all (a reason goes to each)
    else:
        return None
    return [ToolAnswer(c.thread_id, c.call_id, value, runs_notebook_tool=True) for c in chosen]


def answer_all_but_last(chat: Chat, answers: list[ToolAnswer]) -> None:
    """Give every answer but the last: the turn waits on for the others, nothing to show."""
    for answer in answers[:-1]:
        for _ in chat.iter_answer_tool_call(answer.thread_id, answer.value,
                                            call_id=answer.call_id):  # fmt: skip
            pass


def _unquote_value(text: str) -> str:
    """``"a b"`` or ``'a b'`` as typed in ``--answer`` loses its quotes."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
