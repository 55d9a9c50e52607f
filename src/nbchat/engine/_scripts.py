"""LLM, the thread-less twin of Chat for scripts: one in-memory ChatHistory, no store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._answer import AnswerText
from ._engine import _Engine
from .history import ChatHistory


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
