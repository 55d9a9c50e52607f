"""Cleanup strategies: how a ChatHistory is trimmed when it reaches its limit.

A strategy is any object with ``apply(messages, limit) -> messages``; the two
built in are named in :data:`STRATEGIES`. The window strategy drops whole
turns (:func:`split_turns`), so a tool call stays with its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

from ..base.messages import Message


@runtime_checkable
class CleanupStrategy(Protocol):
    """How a history is trimmed: the messages to keep, given the messages and the limit."""

    def apply(self, messages: list[Message], limit: int) -> list[Message]: ...


@dataclass(frozen=True)
class ClearStrategy:
    """Empty the history once it holds ``limit`` messages or more (reaching the limit is >=)."""

    name: ClassVar[str] = "clear"

    def apply(self, messages: list[Message], limit: int) -> list[Message]:
        """No messages if ``len(messages) >= limit``, else all of them; limit 0 keeps all."""
        return [] if limit and len(messages) >= limit else list(messages)


@dataclass(frozen=True)
class WindowStrategy:
    """Drop the oldest whole turns until at most ``limit`` messages remain.

    A tool call and its results always stay or go together. If the last turn
    alone holds more than ``limit`` messages it is kept whole, so the result
    may exceed the limit. Limit 0 keeps everything.
    """

    name: ClassVar[str] = "window"

    def apply(self, messages: list[Message], limit: int) -> list[Message]:
        """The newest whole turns that fit in ``limit`` messages (at least the last turn)."""
        turns = split_turns(messages)
        total = len(messages)
        while limit and len(turns) > 1 and total > limit:
            total -= len(turns.pop(0))
        return [message for turn in turns for message in turn]


STRATEGIES: dict[str, CleanupStrategy] = {"clear": ClearStrategy(), "window": WindowStrategy()}


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into turns: a turn starts at each user message.

    Except a user message that falls between a tool call and its result: it
    stays in the call's turn, so a call and its result are never split apart.
    Messages before the first user message form a turn of their own.
    """
    last_result = {m.tool_call_id: i for i, m in enumerate(messages) if m.role == "tool"}
    turns: list[list[Message]] = []
    open_until = -1  # index of the last result an earlier tool call is still waiting for
    for i, message in enumerate(messages):
        if not turns or (message.role == "user" and i > open_until):
            turns.append([])
        turns[-1].append(message)
        for call in message.tool_calls:
            open_until = max(open_until, last_result.get(call.id, -1))
    return turns



StrategyLike = Literal["clear", "window"] | CleanupStrategy
