"""A thread's turns as the panel shows them: one message record per turn, and a text view.

The browser gets each turn as a small dict (see :func:`message`): the
question as plain text (the front end sets it with ``textContent``), the
answer as HTML made by :mod:`nbchat.base.markup`, and the model, time and usage
as plain text. :func:`conversation_view` is the same turns as one piece of
safe HTML and plain text, for code and tests that read what the panel shows.
:func:`context_gauge` is the gauge: the context the last answered turn used
against the model's size.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from ...base import markup
from ...base.errors import NbchatError
from ...base.records import Usage
from ...engine._endings import BUDGET_REASON
from ...engine._usage import Price, turn_usage_line
from ...store.base import Thread, Turn
from ..cell._views import answer_markdown

__all__ = ["STATUS_LABELS", "context_gauge", "conversation_view", "message", "thread_view"]

STATUS_LABELS = {
    "interrupted": "(interrupted)",
    "suspended": "(waiting for your answer below)",
    "streaming": "",
}
EMPTY = "No thread selected. Ask something below to start one."
NO_TURNS = "No questions yet in this thread. Ask something below."


def _label(turn: Turn) -> str:
    if turn.status == "failed":
        return f"{markup.MARK_PROBLEM} {turn.error or 'the answer failed'}"
    if turn.status == "incomplete" and turn.finish_reason == BUDGET_REASON:
        return f"{markup.MARK_CUT} stopped by the budget: {turn.error or 'it would be crossed'}"
    return STATUS_LABELS.get(turn.status, "")


def _answer_html(turn: Turn, answer: str) -> markup.SafeHTML:
    """The answer, its reasoning collapsed above it, and its status label."""
    label = _label(turn)
    return markup.join([
        markup.details("Reasoning", markup.markdown(turn.reasoning)) if turn.reasoning.strip()
        else markup.SafeHTML(""),
        markup.markdown(answer),
        markup.text(label, cls="nbchat-error" if turn.status == "failed" else "nbchat-dim",
                    block=True) if label else markup.SafeHTML(""),
    ])


def message(turn: Turn, index: int, prices: Mapping[str, Price],
            undoable: bool = False) -> dict[str, Any]:  # fmt: skip
    """What the browser shows of one turn; only ``html`` is HTML, and markup made it.

    ``undoable``: the turn changed the notebook and is not undone (its footer offers Undo).
    """
    answer = answer_markdown(turn).strip()
    started = time.strftime("%H:%M", time.localtime(turn.started)) if turn.started else ""
    return {
        "index": index,
        "query": turn.query.strip(),
        "html": str(_answer_html(turn, answer)),
        "model": turn.model or "",
        "time": started,
        "usage": turn_usage_line(turn, prices, named=False),  # the model has its own line
        "status": turn.status,
        "undo": index if undoable and turn.status != "suspended" else None,
    }


def conversation_view(thread: Thread) -> tuple[markup.SafeHTML, str]:
    """A thread's turns as safe HTML and plain text: each question, then its answer."""
    if not thread.turns:
        return markup.text(NO_TURNS, cls="nbchat-dim", block=True), NO_TURNS
    bodies, plains = [], []
    for turn in thread.turns:
        answer = answer_markdown(turn).strip()
        label = _label(turn)
        by = [markup.element("strong", "Assistant")]
        if turn.model:
            by.append(markup.element("i", turn.model))
        bodies.append(markup.join([
            markup.element("p", markup.element("strong", "You")),
            markup.element("blockquote", markup.text(turn.query.strip(), block=True)),
            markup.element("p", markup.join(by, " · ")),
            _answer_html(turn, answer),
        ]))
        plains.append("\n\n".join(p for p in (f"You: {turn.query.strip()}",
                                               f"Assistant: {answer}", label) if p))
    return markup.join(bodies, "\n<hr>\n"), "\n---\n".join(plains)


def thread_view(
    thread: Thread | None, shown: int, prices: Mapping[str, Price]
) -> tuple[markup.SafeHTML, str]:
    """The last ``shown`` turns, each with its usage line: safe HTML and plain text."""
    if thread is None:
        return markup.text(EMPTY, cls="nbchat-dim", block=True), EMPTY
    if not thread.turns:
        return conversation_view(thread)
    bodies, plains = [], []
    for turn in thread.turns[-shown:]:
        body, plain = conversation_view(dataclasses.replace(thread, turns=[turn]))
        line = turn_usage_line(turn, prices)
        if line:
            body = markup.join([body, markup.element("p", markup.element("small", line),
                                                     cls="nbchat-dim")])
            plain += f"\n{line}"
        bodies.append(body)
        plains.append(plain)
    return markup.join(bodies, "\n<hr>\n"), "\n---\n".join(plains)


def context_gauge(
    thread: Thread, context_size: Callable[[str], int | None]
) -> dict[str, Any]:
    """The context the last answered turn used, against the model's size.

    The thread's cost is in its usage totals (the Σ line), not here again.
    ``context_size(model)`` is the model's context window (None or an
    :class:`~nbchat.NbchatError` when the endpoint does not say).
    """
    gauge: dict[str, Any] = {}
    counted = ((turn, Usage.from_dict(turn.usage)) for turn in reversed(thread.turns))
    last, usage = next(((t, u) for t, u in counted if u.prompt_tokens is not None), (None, None))
    if usage is None or usage.prompt_tokens is None:
        return gauge
    gauge["used"] = usage.prompt_tokens + (usage.completion_tokens or 0)
    if usage.cache_read_tokens:
        gauge["cached"] = usage.cache_read_tokens
    model = (last.model if last is not None else None) or thread.model
    try:
        size = context_size(model) if model else None
    except NbchatError:
        size = None
    if size:
        gauge["size"] = size
    return gauge
