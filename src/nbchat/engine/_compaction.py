"""Compaction: a long thread sends a summary of its oldest turns instead of forgetting them.

With the ``summarize`` window (``Chat(window="summarize")``, a thread's own
``window`` setting, ``%config ChatMagics.window``, ``NBCHAT_WINDOW``), a
thread that no longer fits the model's window sends, in place of its oldest
turns, a summary the model wrote of them, joined to the system prompt. The
turns stay in the store; the :class:`Summary` is kept in the thread's settings
with how many turns it covers and a digest of them, so it is made once and
reused (also by another process) until those turns change. It is written from
the stored turns only, with no tools offered; a reply that failed, was cut,
or called a tool is not used, and the oldest turns are dropped as before. Each
request is checked against the budgets first (:mod:`._budget`): one that would
cross a budget is not sent, and its usage counts toward the question's cost.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..base._delimiters import block
from ..base.content import estimate_tokens
from ..base.errors import ConfigError, NbchatError
from ..base.events import ReplyFinished, TextDelta, ToolCallRequested, UsageReported
from ..base.messages import Message, wire_messages
from ..llm import LLMClient
from ..store.base import Thread
from ._budget import Spending
from ._endings import ending_of, prompt_budget, wire_tokens
from ._pending import closed, history_turns
from .history import ChatHistory

Window = Literal["drop", "summarize"]
WINDOWS: tuple[Window, ...] = ("drop", "summarize")
SUMMARY_TOKENS = 600  # the longest summary asked for (a longer reply is cut, so not used)
SETTING = "summary"  # the key of the summary in a thread's settings
SUMMARY_PROMPT = (
    "You summarise conversations so they can go on without their early part. Write a "
    "faithful summary of the conversation given to you: the person's goals and questions, "
    "the facts, numbers, names, code and decisions that came up, tool results as they were "
    "reported, and what is still open. Never invent results. Plain prose or bullet points, "
    "at most {words} words."
)
SUMMARY_REQUEST = "Write the summary now."
PREAMBLE = (
    "The start of this conversation ({turns}) is not repeated here; below is a summary of it, "
    "written earlier. The thread keeps those turns in full."
)


def summary_tokens(context_size: int) -> int:
    """The longest summary for a model with ``context_size``: an eighth of it, at most 600."""
    return max(64, min(SUMMARY_TOKENS, context_size // 8))


def check_window(value: object, source: str = "window") -> Window:
    """``value`` as a window name, or ConfigError naming the choices."""
    for window in WINDOWS:
        if value == window:
            return window
    raise ConfigError(f"{source} must be one of {', '.join(WINDOWS)}, got {value!r}")


@dataclass(frozen=True)
class Summary:
    """The model's summary of a thread's first ``covers`` turns, and what it was made from."""

    text: str
    covers: int  # the turns 0 .. covers-1 of the thread
    digest: str  # of those turns as a history holds them
    model: str
    tokens: int  # estimated
    made: float  # when (time.time())

    @property
    def turns(self) -> tuple[int, ...]:
        return tuple(range(self.covers))

    def system_text(self) -> str:
        """What joins the system prompt: a preamble, then the summary in its own block."""
        span = "turn 1" if self.covers == 1 else f"turns 1–{self.covers}"
        return f"{PREAMBLE.format(turns=span)}\n{block('context', self.text, source='summary')}"

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "covers": self.covers, "digest": self.digest,
                "model": self.model, "tokens": self.tokens, "made": self.made}  # fmt: skip

    @classmethod
    def from_dict(cls, data: object) -> Summary | None:
        """A saved summary, checked like user input; None when it is not one."""
        if not isinstance(data, Mapping):
            return None
        text, covers, digest = data.get("text"), data.get("covers"), data.get("digest")
        if not (isinstance(text, str) and text.strip() and isinstance(digest, str)):
            return None
        if isinstance(covers, bool) or not isinstance(covers, int) or covers < 1:
            return None
        model, tokens, made = data.get("model"), data.get("tokens"), data.get("made")
        return cls(text, covers, digest, str(model or ""),
                   tokens if isinstance(tokens, int) else estimate_tokens(text),
                   float(made) if isinstance(made, (int, float)) else 0.0)  # fmt: skip


def digest(thread: Thread, covers: int) -> str:
    """A digest of the first ``covers`` turns as a history holds them (changes when they do)."""
    turns = [
        {"query": thread.turns[i].query,
         "context": [item.to_dict() for item in thread.turns[i].context],
         "messages": closed(thread.turns[i])}
        for i in history_turns(thread, covers)
    ]  # fmt: skip
    data = json.dumps(turns, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode()).hexdigest()


def current_summary(thread: Thread, upto: int) -> Summary | None:
    """The thread's saved summary, when it covers some of its first ``upto`` turns and those
    are as they were; else None."""
    summary = Summary.from_dict((thread.settings or {}).get(SETTING))
    if summary is None or summary.covers > upto:
        return None
    return summary if digest(thread, summary.covers) == summary.digest else None


def with_summary(history: ChatHistory, thread: Thread, upto: int, summary: Summary
                 ) -> ChatHistory:  # fmt: skip
    """``history`` (the thread's first ``upto`` turns, then the question) with the covered
    turns replaced by ``summary``, which joins the end of the system prompt."""
    included = history_turns(thread, upto)
    turns = history.turns()
    earlier = len(turns) - 1  # the question is the last
    offset = len(included) - earlier  # turns a history limit already cleaned away
    covered = sum(1 for i in included if i < summary.covers)
    start = max(0, covered - offset)
    kept = [m for turn in turns[start:] for m in turn]
    system = "\n\n".join(p for p in (history.system, summary.system_text()) if p)
    return ChatHistory(kept, system=system, limit=history.limit, strategy=history.strategy)


@dataclass(frozen=True)
class Summarizer:
    """What making a summary needs: the endpoint, the model, its window, the options, and
    what the question may spend (each request is checked first, its usage counted)."""

    llm: LLMClient
    model: str
    context_size: int
    options: Mapping[str, Any]
    spending: Spending | None = None


def summarize(thread: Thread, covers: int, maker: Summarizer,
              start: Summary | None = None) -> Summary | None:  # fmt: skip
    """The model's summary of the first ``covers`` turns; None when a reply could not be used.

    One request when the turns fit the model's window; else one per part that
    fits, each given the summary so far. ``start`` (a current summary of fewer
    turns) is gone on from rather than made again.
    """
    done = start.text if start is not None and start.covers <= covers else ""
    first = start.covers if done and start is not None else 0
    for part in _parts(thread, first, covers, maker, done):
        text = _ask(maker, _request(part, done, maker))
        if text is None:
            return None
        done = text
    if not done:
        return None
    return Summary(done, covers, digest(thread, covers), maker.model, estimate_tokens(done),
                   time.time())  # fmt: skip


def _parts(thread: Thread, first: int, covers: int, maker: Summarizer,
           done: str) -> Iterator[str]:  # fmt: skip
    """The covered turns as transcript text, in parts that each fit one summary request."""
    limit = summary_tokens(maker.context_size)
    room = prompt_budget(maker.context_size, {"max_tokens": limit}) - (
        estimate_tokens(SUMMARY_PROMPT) + limit + 64)  # the summary so far goes along
    room = max(room, 256)
    part: list[str] = []
    size = 0
    for index in history_turns(thread, covers):
        if index < first:
            continue
        text = _turn_text(thread, index)[: room * 4]  # one huge turn is cut, not left out
        cost = estimate_tokens(text)
        if part and size + cost > room:
            yield "\n\n".join(part)
            part, size = [], 0
        part.append(text)
        size += cost
    if part:
        yield "\n\n".join(part)


def _turn_text(thread: Thread, index: int) -> str:
    """One stored turn as the summariser reads it: the question, its context, replies, results."""
    turn = thread.turns[index]
    lines = [f"Turn {index + 1}, the person: {turn.query}"]
    lines += [f"(attached {item.summary}) {item.text}" for item in turn.context]
    for data in closed(turn):
        message = Message.from_dict(data)
        if message.role == "tool":
            lines.append(f"Result of {message.name or 'a tool'}: {message.content}")
        elif message.content or message.tool_calls:
            calls = "; ".join(f"called {c.name}({c.arguments})" for c in message.tool_calls)
            lines.append(f"The assistant: {' '.join(p for p in (message.content, calls) if p)}")
    return "\n".join(lines)


def _request(part: str, done: str, maker: Summarizer) -> list[dict[str, Any]]:
    words = summary_tokens(maker.context_size) * 2 // 3
    so_far = f"The summary so far:\n{block('context', done, source='summary')}\n\n" if done else ""
    body = f"{so_far}The conversation to summarise:\n{block('context', part, source='thread')}"
    return wire_messages(SUMMARY_PROMPT.format(words=words), [
        Message("user", body), Message("assistant", "Understood."),
        Message("user", SUMMARY_REQUEST),
    ])  # fmt: skip


def _ask(maker: Summarizer, messages: list[dict[str, Any]]) -> str | None:
    """The reply's text when the model finished it, called no tool and wrote something."""
    options = {**maker.options, "max_tokens": summary_tokens(maker.context_size)}
    spending = maker.spending
    if spending is not None:  # OverBudget: the summary is not made
        options = {**spending.admit(wire_tokens(messages), options, maker.model,
                                    purpose="summary")}  # fmt: skip
    parts: list[str] = []
    reason: str | None = None
    try:
        for event in maker.llm.stream(messages, model=maker.model, options=options):
            if type(event) is TextDelta:
                parts.append(event.text)
            elif type(event) is ToolCallRequested:
                return None
            elif type(event) is ReplyFinished:
                reason = event.finish_reason
            elif type(event) is UsageReported and spending is not None:
                spending.add(event.usage, maker.model, side=True)
    except NbchatError:
        return None
    text = "".join(parts).strip()
    return text if text and ending_of(reason) == "complete" else None


def summary_covers(history: ChatHistory, thread: Thread, upto: int, budget: int,
                   limit: int = SUMMARY_TOKENS) -> int:  # fmt: skip
    """How many leading turns of ``thread`` to summarise so that ``history`` (its question
    last) fits ``budget`` tokens with room to spare: all but the newest turns that fit half
    of it beside a summary of ``limit`` tokens, so the summary serves the questions to come
    too (0: none)."""
    included = history_turns(thread, upto)
    offset = len(included) - (len(history.turns()) - 1)  # turns a history limit cleaned away
    dropped = history.window(max(0, budget // 2 - limit)).dropped_turns
    covered = offset + dropped
    return included[covered - 1] + 1 if covered > 0 else 0
