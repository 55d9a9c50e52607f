"""Chat histories: messages kept apart from the system prompt, and how they are cleaned up.

A :class:`ChatHistory` holds user, assistant and tool messages; the system
prompt sits beside them and is never cleaned. When ``limit`` is set (by default
from ``NBCHAT_HISTORY_LIMIT``), its cleanup strategy trims the messages, but
only when asked: ``clean=True`` on the add methods, or :meth:`ChatHistory.clean`.
Here too is the windowing that fits a history to a token budget
(:meth:`ChatHistory.window`, :func:`sent_tokens`). A message is
:mod:`nbchat.base.messages`, the strategies :mod:`._cleanup`, the Markdown and HTML views
:mod:`._transcript`; their public names are offered here as well.

>>> history = ChatHistory(system="You are terse.", limit=4)
>>> history.add_question_answer("What is 2+2?", "4")
>>> [m["role"] for m in history.messages]
['system', 'user', 'assistant']
>>> history.add_question_answer("And 3+3?", "6", clean=True)  # 4 messages reach the limit
>>> len(history), history.system
(0, 'You are terse.')
"""

from __future__ import annotations

import enum
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from ..base.config import ENV_HISTORY_LIMIT, parse_history_limit
from ..base.content import CONTEXT_NOTE, ContextItem, estimate_tokens
from ..base.errors import InputError
from ..base.events import ToolCall
from ..base.messages import ROLES, Message, Role, to_message, wire_messages
from ._cleanup import (
    STRATEGIES,
    CleanupStrategy,
    ClearStrategy,
    StrategyLike,
    WindowStrategy,
    split_turns,
)
from ._transcript import transcript_html, transcript_markdown

__all__ = [
    "ROLES",
    "STRATEGIES",
    "ChatHistory",
    "CleanupStrategy",
    "ClearStrategy",
    "Message",
    "Role",
    "StrategyLike",
    "Window",
    "WindowStrategy",
    "estimate_tokens",
    "sent_tokens",
    "split_turns",
]


class _Default(enum.Enum):
    FROM_ENV = "from NBCHAT_HISTORY_LIMIT"


class ChatHistory:
    """User, assistant and tool messages, a system prompt held apart, and a cleanup rule.

    Parameters
    ----------
    messages
        :class:`Message` objects or OpenAI-format dicts (no ``system`` role).
    system
        The system prompt; sent first, never cleaned, not counted in ``len()``.
    limit
        Cleanup threshold in messages; ``None`` or 0 means never clean. Defaults
        to ``NBCHAT_HISTORY_LIMIT`` (unset: no limit). Nothing is cleaned until
        :meth:`clean` runs, directly or through ``clean=True``.
    strategy
        ``"clear"`` (the default: empty the history when it holds ``limit``
        messages or more), ``"window"`` (drop the oldest whole turns until at
        most ``limit`` remain), or any object with
        ``apply(messages, limit) -> messages``.
    """

    def __init__(
        self,
        messages: Iterable[Message | Mapping[str, Any]] = (),
        *,
        system: str | None = None,
        limit: int | None | Literal[_Default.FROM_ENV] = _Default.FROM_ENV,
        strategy: StrategyLike = "clear",
    ) -> None:
        self.system = system
        if limit is _Default.FROM_ENV:
            limit = parse_history_limit(os.environ.get(ENV_HISTORY_LIMIT))
        self.limit = limit
        self.strategy = strategy
        self._messages: list[Message] = []
        self.extend(messages)

    @property
    def system(self) -> str | None:
        """The system prompt, or None; an empty prompt is not sent."""
        return self._system

    @system.setter
    def system(self, value: str | None) -> None:
        if value is not None and not isinstance(value, str):
            raise InputError(f"the system prompt must be a string or None, got {value!r}")
        self._system = value

    @property
    def limit(self) -> int | None:
        """The cleanup threshold in messages; None or 0 means never clean."""
        return self._limit

    @limit.setter
    def limit(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"limit must be a whole number of messages or None, got {value!r}")
        if value is not None and value < 0:
            raise InputError(f"limit must be 0 or more (0 or None: no cleanup), got {value}")
        self._limit = value

    @property
    def strategy(self) -> CleanupStrategy:
        """The cleanup strategy; set it by name (``"clear"``, ``"window"``) or as an object."""
        return self._strategy

    @strategy.setter
    def strategy(self, value: StrategyLike) -> None:
        if isinstance(value, str):
            if value not in STRATEGIES:
                raise InputError(
                    f"unknown cleanup strategy {value!r}; use one of: {', '.join(STRATEGIES)}"
                )
            value = STRATEGIES[value]
        elif not callable(getattr(value, "apply", None)):
            raise InputError(
                f"a cleanup strategy must be one of {', '.join(STRATEGIES)} or an object "
                f"with apply(messages, limit), got {value!r}"
            )
        self._strategy = value

    def _strategy_name(self) -> str | None:
        return next((n for n, s in STRATEGIES.items() if s == self._strategy), None)

    def chat_as_user(
        self, message: str, clean: bool = False, *, context: Iterable[ContextItem] = ()
    ) -> None:
        """Add a user message, with objects attached as ``context``; ``clean``: then clean."""
        self.append(Message("user", message, context=tuple(context)))
        if clean:
            self.clean()

    def chat_as_llm(self, message: str, clean: bool = False) -> None:
        """Add an assistant message; with ``clean``, then apply the cleanup strategy."""
        self.append(Message("assistant", message))
        if clean:
            self.clean()

    def add_question_answer(self, question: str, answer: str, clean: bool = False) -> None:
        """Add a user question and the assistant's answer; with ``clean``, then clean once."""
        pair = [Message("user", question), Message("assistant", answer)]
        self.extend(pair)
        if clean:
            self.clean()

    def add_tool_call(self, calls: Sequence[ToolCall], content: str = "") -> None:
        """Add an assistant message that asks for one or more tool calls."""
        if not calls:
            raise InputError("add_tool_call needs at least one ToolCall")
        self.append(Message("assistant", content, tool_calls=tuple(calls)))

    def add_tool_result(self, call_id: str, output: str, name: str | None = None) -> None:
        """Add a tool message holding the output of the call ``call_id``."""
        self.append(Message("tool", output, tool_call_id=call_id, name=name))

    def append(self, message: Message | Mapping[str, Any]) -> None:
        """Add one message (a Message or an OpenAI-format dict) at the end."""
        self._messages.append(to_message(message))

    def extend(self, messages: Iterable[Message | Mapping[str, Any]]) -> None:
        """Add several messages; none is added if any of them is invalid."""
        self._messages.extend([to_message(m) for m in messages])

    def clean(self) -> None:
        """Apply the cleanup strategy now; nothing happens when the limit is None or 0."""
        if self._limit:
            kept = self._strategy.apply(list(self._messages), self._limit)
            self._messages = [to_message(m) for m in kept]

    def clear(self) -> None:
        """Remove every message; the system prompt, limit and strategy stay."""
        self._messages.clear()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation in OpenAI format, the system prompt first when there is one."""
        return wire_messages(self._system, self._messages)

    def turns(self) -> list[list[Message]]:
        """The messages grouped into turns (see :func:`split_turns`)."""
        return split_turns(self._messages)

    def window(self, max_tokens: int) -> Window:
        """The system prompt and the newest whole turns that fit in ``max_tokens``.

        Tokens are estimated (:func:`estimate_tokens`). The oldest turns go
        first; a tool call stays with its results; the last turn is kept even
        when it alone is over the budget. This history is left unchanged: the
        window is a new one, for one request.
        """
        turns = split_turns(self._messages)
        total = estimate_tokens(self._system) if self._system else 0
        kept = 0
        for turn in reversed(turns):
            cost = sum(_message_tokens(m) for m in turn)
            if kept and total + cost > max_tokens:
                break
            total += cost
            kept += 1
        start = len(turns) - kept
        messages = [m for turn in turns[start:] for m in turn]
        return Window(self._with_messages(messages), dropped_turns=start, tokens=total)

    def copy(self) -> ChatHistory:
        """An independent copy: changing one never changes the other."""
        return self._with_messages(self._messages)

    def _with_messages(self, messages: Iterable[Message]) -> ChatHistory:
        return ChatHistory(
            messages, system=self._system, limit=self._limit, strategy=self._strategy
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with the system prompt, limit, strategy name and messages."""
        name = self._strategy_name()
        if name is None:
            raise InputError(
                f"a custom cleanup strategy ({type(self._strategy).__name__}) cannot be "
                f"saved; set strategy to one of: {', '.join(STRATEGIES)} first"
            )
        return {
            "system": self._system,
            "limit": self._limit,
            "strategy": name,
            "messages": [m.to_dict() for m in self._messages],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatHistory:
        """A history from :meth:`to_dict` output; a missing limit comes from the environment."""
        if not isinstance(data, Mapping):
            raise InputError(f"a saved ChatHistory must be a dict, got {type(data).__name__}")
        limit = data.get("limit", _Default.FROM_ENV)
        return cls(
            data.get("messages") or (),
            system=data.get("system"),
            limit=limit,
            strategy=data.get("strategy", "clear"),
        )

    def to_json(self) -> str:
        """The history as a JSON string (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> ChatHistory:
        """A history from :meth:`to_json` output."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise InputError(f"not a saved ChatHistory (invalid JSON): {exc}") from exc
        return cls.from_dict(data)

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._messages))

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> ChatHistory: ...
    def __getitem__(self, index: int | slice) -> Message | ChatHistory:
        """A message by index, or a new history (same system, limit, strategy) for a slice."""
        if isinstance(index, slice):
            return self._with_messages(self._messages[index])
        return self._messages[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChatHistory):
            return NotImplemented
        return (self._messages, self._system, self._limit, self._strategy) == (
            other._messages,
            other._system,
            other._limit,
            other._strategy,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = [f"{len(self._messages)} messages in {len(self.turns())} turns"]
        if self._system:
            parts.append("system prompt")
        name = self._strategy_name() or type(self._strategy).__name__
        parts += [f"limit={self._limit}", f"strategy={name!r}"]
        return f"<ChatHistory: {', '.join(parts)}>"

    def to_markdown(self) -> str:
        """The conversation as Markdown for a file; turns are separated by rules.

        Message text keeps its Markdown, with any raw HTML in it shown as text.
        """
        return transcript_markdown(self._system, self.turns())

    def _repr_html_(self) -> str:
        """The conversation for notebooks, through the safe renderer."""
        return transcript_html(self._system, self.turns())


@dataclass(frozen=True)
class Window:
    """What :meth:`ChatHistory.window` selected: the history sent, what was left out."""

    history: ChatHistory
    dropped_turns: int = 0
    tokens: int = 0


_MESSAGE_OVERHEAD = 4  # role and framing tokens chat templates add to every message


_IMAGE_TOKENS = 800  # what vision models charge for one picture of MAX_SIDE pixels, about


def sent_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """The estimated tokens of messages as a request holds them (system prompt included)."""
    total = 0
    for message in messages:
        if message.get("role") == "system":
            total += _system_tokens(str(message.get("content") or ""))
        else:
            total += _message_tokens(Message.from_dict(message))
    return total


def history_tokens(history: ChatHistory) -> int:
    """The estimated tokens of ``history`` as a request holds it: what :func:`sent_tokens`
    counts of ``history.messages``, without making them dicts first."""
    system = _system_tokens(history.system) if history.system else 0
    return system + sum(_message_tokens(message) for message in history)


def _system_tokens(prompt: str) -> int:
    return _MESSAGE_OVERHEAD + estimate_tokens(prompt)


def _message_tokens(message: Message) -> int:
    """What ``message`` costs as sent: its text, its attached context, its tool calls."""
    tokens = _MESSAGE_OVERHEAD + estimate_tokens(message.content)
    if message.context:
        tokens += estimate_tokens(CONTEXT_NOTE)
        for item in message.context:
            tokens += estimate_tokens(item.as_text())
            tokens += _IMAGE_TOKENS if item.image is not None else 0
    for call in message.tool_calls:
        tokens += _MESSAGE_OVERHEAD + estimate_tokens(call.name) + estimate_tokens(call.arguments)
    return tokens
