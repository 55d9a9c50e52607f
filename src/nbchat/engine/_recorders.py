"""Recorders: where a turn's progress goes, the thread store or a ChatHistory.

The turn loop (:mod:`._turn`) writes through one of these and never knows
which, so the loop itself neither persists nor edits a history.
"""

from __future__ import annotations

import time
from typing import Any

from ..base.events import Usage
from ..base.messages import Message
from ..base.records import PendingCall
from ..store.base import Store
from ._turn import NullRecorder
from .history import ChatHistory


class ThreadRecorder:
    """Writes a turn's progress into the thread store."""

    def __init__(self, store: Store, thread_id: int, turn: int) -> None:
        self.store, self.thread_id, self.turn = store, thread_id, turn
        self.status: str | None = None  # how the turn ended, once it has

    def checkpoint(self, text: str, messages: list[Message]) -> None:
        self.store.update_turn(self.thread_id, self.turn, answer=text)

    def finish(
        self,
        status: str,
        text: str,
        messages: list[Message],
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
            messages=[message.to_dict() for message in messages],  # the store's form
            status=status,
            pending=list(pending or []),
            error=error,
            finish_reason=finish_reason,
            reasoning=reasoning,
            usage=None if usage is None else usage.to_dict(),
            finished=time.time(),
        )


class HistoryRecorder(NullRecorder):
    """Adds the question and the final answer to a ChatHistory."""

    def __init__(self, history: ChatHistory, question: str) -> None:
        self.history, self.question = history, question

    def finish(self, status: str, text: str, messages: list[Message], **_: Any) -> None:
        if status in ("complete", "incomplete", "interrupted") and text:
            self.history.add_question_answer(self.question, text, clean=True)
