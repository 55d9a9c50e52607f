"""Chat histories: messages kept apart from the system prompt, and how they are cleaned up.

A :class:`ChatHistory` holds user, assistant and tool messages; the system
prompt sits beside them and is never cleaned. When ``limit`` is set (by default
from ``NBCHAT_HISTORY_LIMIT``), its cleanup strategy trims the messages, but
only when asked: ``clean=True`` on the add methods, or :meth:`ChatHistory.clean`.

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
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, get_args, overload, runtime_checkable

from ..base import markup
from ..base.config import ENV_HISTORY_LIMIT, parse_history_limit
from ..base.content import CONTEXT_NOTE, ContextItem, context_line, estimate_tokens
from ..base.errors import InputError
from ..base.events import ToolCall
from ..base.markup import markdown_source as markup_source

Role = Literal["user", "assistant", "tool"]
ROLES: tuple[str, ...] = get_args(Role)


@dataclass(frozen=True)
class Message:
    """One user, assistant or tool message (the system prompt is not a message)."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    context: tuple[ContextItem, ...] = field(default=(), repr=False)
    """Objects attached to a user question (sent apart from its text)."""

    def __post_init__(self) -> None:
        if self.role == "system":
            raise InputError(
                "the system prompt is not a message; set ChatHistory.system "
                "(or pass system=... to ChatHistory) instead"
            )
        if self.role not in ROLES:
            raise InputError(f"unknown message role {self.role!r}; use one of: {', '.join(ROLES)}")
        if not isinstance(self.content, str):
            raise InputError(
                f"{self.role} message content must be a string, got {type(self.content).__name__}"
            )
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "context", tuple(map(ContextItem.from_dict, self.context)))
        if self.context and self.role != "user":
            raise InputError(f"context belongs to user messages, not {self.role} messages")
        self._check_tool_fields()

    def _check_tool_fields(self) -> None:
        if self.tool_calls and self.role != "assistant":
            raise InputError(f"only assistant messages have tool_calls, not {self.role} messages")
        for call in self.tool_calls:
            if not isinstance(call, ToolCall):
                raise InputError(f"tool_calls must hold ToolCall objects, got {call!r}")
        if self.role == "tool" and not (self.tool_call_id and isinstance(self.tool_call_id, str)):
            raise InputError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and (self.tool_call_id is not None or self.name is not None):
            raise InputError(f"tool_call_id and name belong to tool messages, not {self.role}")
        if self.name is not None and not isinstance(self.name, str):
            raise InputError(f"a tool message's name must be a string, got {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The message in OpenAI chat format."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            data["name"] = self.name
        if self.context:
            data["context"] = [item.to_dict() for item in self.context]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """A message from an OpenAI-format dict; assistant ``content: None`` reads as ""."""
        if not isinstance(data, Mapping):
            raise InputError(f"a message must be a dict in OpenAI format, got {data!r}")
        if "role" not in data:
            raise InputError(f"a message needs a role ({', '.join(ROLES)}), got {dict(data)!r}")
        content: Any = data.get("content")
        calls = [
            call if isinstance(call, ToolCall) else _tool_call_from_dict(call)
            for call in data.get("tool_calls") or ()
        ]
        return cls(
            role=data["role"],
            content="" if content is None and data["role"] == "assistant" else content,
            tool_calls=tuple(calls),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
            context=tuple(data.get("context") or ()),
        )


def _tool_call_from_dict(data: object) -> ToolCall:
    if not isinstance(data, Mapping) or not isinstance(data.get("function"), Mapping):
        raise InputError(
            f"a tool call must look like {{'id': ..., 'function': {{'name': ..., "
            f"'arguments': ...}}}}, got {data!r}"
        )
    return ToolCall.from_dict(dict(data))


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


class _Default(enum.Enum):
    FROM_ENV = "from NBCHAT_HISTORY_LIMIT"


StrategyLike = Literal["clear", "window"] | CleanupStrategy


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
        self._messages.append(_to_message(message))

    def extend(self, messages: Iterable[Message | Mapping[str, Any]]) -> None:
        """Add several messages; none is added if any of them is invalid."""
        self._messages.extend([_to_message(m) for m in messages])

    def clean(self) -> None:
        """Apply the cleanup strategy now; nothing happens when the limit is None or 0."""
        if self._limit:
            kept = self._strategy.apply(list(self._messages), self._limit)
            self._messages = [_to_message(m) for m in kept]

    def clear(self) -> None:
        """Remove every message; the system prompt, limit and strategy stay."""
        self._messages.clear()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation in OpenAI format, the system prompt first when there is one."""
        head = [{"role": "system", "content": self._system}] if self._system else []
        return head + [m.to_dict() for m in self._messages]

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
        blocks: list[str] = []
        if self._system:
            blocks += ["**System**", _collapse(_quote(markup_source(self._system)), self._system)]
        for i, turn in enumerate(self.turns()):
            if i:
                blocks.append("---")
            for message in turn:
                blocks += _render(message)
        if not self._messages:
            blocks.append("*No messages yet.*")
        return "\n\n".join(blocks) + "\n"

    def _repr_html_(self) -> str:
        """The conversation for notebooks, through the safe renderer."""
        blocks: list[markup.SafeHTML] = []
        if self._system:
            blocks += [_label("System"), _folded(markup.element(
                "blockquote", markup.markdown(self._system)), self._system)]
        for i, turn in enumerate(self.turns()):
            if i:
                blocks.append(markup.element("hr"))
            for message in turn:
                blocks += _render_html(message)
        if not self._messages:
            blocks.append(markup.element("p", markup.element("em", "No messages yet.")))
        return markup.styled(markup.join(blocks))


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
            total += _MESSAGE_OVERHEAD + estimate_tokens(str(message.get("content") or ""))
        else:
            total += _message_tokens(Message.from_dict(message))
    return total


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


def _to_message(message: object) -> Message:
    if isinstance(message, Message):
        return message
    if isinstance(message, Mapping):
        return Message.from_dict(message)
    raise InputError(f"a message must be a Message or an OpenAI-format dict, got {message!r}")


_LONG_CHARS = 2000
_LONG_LINES = 40
_RESULT_CHARS = 300
_RESULT_LINES = 5
_ARGS_CHARS = 80
_EMPTY = "*(empty)*"
_EMPTY_HTML = markup.element("p", markup.element("em", "(empty)"))


def _render(message: Message) -> list[str]:
    if message.role == "tool":
        label = "**Tool result**" + (f" {_code(message.name)}" if message.name else "")
        content = markup_source(_preview(message.content))
        return [label, _quote(content) if message.content else _EMPTY]
    label = "**You**" if message.role == "user" else "**Assistant**"
    content = markup_source(message.content)
    body = [_collapse(content, message.content)] if message.content else []
    calls = [f"Tool call: {_code(_signature(call))}" for call in message.tool_calls]
    if message.context:
        calls.append(f"*{markup.escape_inline(context_line(message.context))}*")
    return [label, *(body + calls or [_EMPTY])]


def _render_html(message: Message) -> list[markup.SafeHTML]:
    if message.role == "tool":
        label = _label("Tool result", message.name or "")
        body = markup.element("blockquote", markup.text(_preview(message.content), block=True))
        return [label, body if message.content else _EMPTY_HTML]
    label = _label("You" if message.role == "user" else "Assistant")
    blocks = [_folded(markup.markdown(message.content), message.content)] if message.content else []
    blocks += [markup.element("p", markup.join(
        [markup.text("Tool call:"), markup.code_inline(_signature(call))], " "))
        for call in message.tool_calls]
    if message.context:
        blocks.append(markup.element("p", markup.element("em", context_line(message.context))))
    return [label, *(blocks or [_EMPTY_HTML])]


def _label(text: str, name: str = "") -> markup.SafeHTML:
    parts = [markup.element("strong", text)] + ([markup.code_inline(name)] if name else [])
    return markup.element("p", markup.join(parts, " "))


def _long(text: str) -> str:
    """How long ``text`` is, when it is long enough to fold ("" when not)."""
    lines = text.count("\n") + 1
    if len(text) <= _LONG_CHARS and lines <= _LONG_LINES:
        return ""
    return f"Long text: {lines:,} line{'s' * (lines > 1)}, {len(text):,} characters"


def _collapse(markdown: str, text: str) -> str:
    """``markdown`` folded into a <details> block when ``text`` is long."""
    summary = _long(text)
    if not summary:
        return markdown
    return f"<details><summary>{summary}</summary>\n\n{markdown}\n\n</details>"


def _folded(body: markup.SafeHTML, text: str) -> markup.SafeHTML:
    summary = _long(text)
    return markup.details(summary, body, cls="nbchat-reasoning") if summary else body


def _preview(text: str) -> str:
    """The first few lines of ``text``, saying how much was left out."""
    end = -1
    for _ in range(_RESULT_LINES):
        end = text.find("\n", end + 1)
        if end == -1:
            break
    cut = min(len(text) if end == -1 else end, _RESULT_CHARS)
    if cut >= len(text):
        return text
    return f"{text[:cut].rstrip()}\n… ({len(text) - cut:,} more characters)"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _signature(call: ToolCall) -> str:
    """``name(key=value, ...)`` for JSON-object arguments, else ``name(raw arguments)``."""
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        shown = call.arguments
    if len(shown) > _ARGS_CHARS:
        shown = shown[: _ARGS_CHARS - 1] + "…"
    return f"{call.name}({shown})"


def _code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
