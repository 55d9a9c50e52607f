"""Typed records that cross module boundaries: tool calls, prompts, pending and answered calls.

Dicts exist only where these meet the store or the wire: ``to_dict`` /
``from_dict`` convert, and ``from_dict`` checks what it reads like user input
(a damaged store file raises :class:`RecordError`, which the store reports as
:class:`~nbchat.base.errors.StoreCorrupt` naming the file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _visible

HOSTED_MODEL = "agent:"  # a hosted coding agent's threads and turns: "agent:claude"

class RecordError(ValueError):
    """A record read back from a store or the wire is not one nbchat wrote."""


@dataclass(frozen=True)
class ToolCall:
    """One call the LLM asked for: its id, the tool's name and the raw JSON arguments."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The call in OpenAI message format."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read an OpenAI-format call; raises RecordError when it is not one."""
        fn = _mapping(data, "tool call").get("function")
        fn = _mapping(fn, "tool call's function")
        name, call_id = fn.get("name"), data.get("id")
        if not isinstance(name, str) or not name or not isinstance(call_id, str):
            raise RecordError("a tool call without a name or an id")
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            args = json.dumps(args)
        return cls(id=call_id, name=name, arguments=args)


MAX_TOKEN_COUNT = 1_000_000_000
"""The largest token count believed: 100 times the largest context window offered today
(10 million tokens), so a turn's nine requests summed stay far below it, while a count
no model could have used (an endpoint's bug or a hostile one) is dropped as unknown."""

_COUNT_NAMES = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")


def token_count(value: object) -> int | None:
    """``value`` as a token count: a whole number from 0 to MAX_TOKEN_COUNT, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return value
    return None


@dataclass(frozen=True)
class Usage:
    """Token counts an endpoint reported, when it reports them.

    ``prompt_tokens`` is the whole input; ``cache_read_tokens`` and
    ``cache_write_tokens`` are the parts of it read from and written to the
    endpoint's prompt cache (priced apart), None when the endpoint says nothing.
    Every count is checked here, whatever it came from (a wire format, a stored
    turn): one that is not a whole number from 0 to :data:`MAX_TOKEN_COUNT` is
    None (unknown), never shown nor priced, and cached parts larger than the
    whole input are dropped too.
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in _COUNT_NAMES:
            object.__setattr__(self, name, token_count(getattr(self, name)))
        cached = (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)
        if self.prompt_tokens is not None and cached > self.prompt_tokens:
            object.__setattr__(self, "cache_read_tokens", None)
            object.__setattr__(self, "cache_write_tokens", None)

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)

    @property
    def is_empty(self) -> bool:
        """No count is known."""
        return all(getattr(self, name) is None for name in _COUNT_NAMES)

    def to_dict(self) -> dict[str, int]:
        """The counts the endpoint reported, as stored with a turn."""
        counts = {name: getattr(self, name) for name in _COUNT_NAMES}
        return {name: value for name, value in counts.items() if value is not None}

    @classmethod
    def from_dict(cls, data: object) -> Usage:
        """The counts of a stored turn's usage (or any mapping), each checked; none if not one."""
        if not isinstance(data, Mapping):
            return cls()
        return cls(*(token_count(data.get(name)) for name in _COUNT_NAMES))

    def __add__(self, other: Usage) -> Usage:
        """The counts of two replies of one turn, summed (None stays None only on both sides)."""
        return Usage(*(_sum(a, b) for a, b in zip(_counts(self), _counts(other), strict=True)))


def _counts(usage: Usage) -> tuple[int | None, ...]:
    return tuple(getattr(usage, name) for name in _COUNT_NAMES)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass(frozen=True)
class Prompt:
    """What a front end shows for a client-tool call.

    ``kind`` picks the controls: ``"choice"`` one button per option,
    ``"confirm"`` Yes/No, ``"text"`` (and anything else) a text box.
    ``markdown`` is rendered above the question; ``extra`` keeps whatever
    else a custom tool's ``prompt()`` returned.
    """

    kind: str
    question: str
    options: tuple[str, ...] = ()
    placeholder: str = ""
    markdown: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {**self.extra, "kind": self.kind, "question": self.question}
        if self.options:
            data["options"] = list(self.options)
        if self.placeholder:
            data["placeholder"] = self.placeholder
        if self.markdown:
            data["markdown"] = self.markdown
        return data

    @classmethod
    def from_dict(cls, data: object, *, default_question: str = "") -> Prompt:
        """A prompt from a tool's ``prompt()`` dict or a stored one; RecordError if malformed."""
        data = _mapping(data, "prompt")
        kind = data.get("kind", "text")
        question = data.get("question") or default_question
        options = data.get("options", ())
        if not isinstance(kind, str) or not isinstance(question, str):
            raise RecordError("a prompt whose kind or question is not text")
        if not isinstance(options, list | tuple):
            raise RecordError("a prompt whose options are not a list")
        if kind == "choice" and not options:
            raise RecordError("a choice prompt without options")
        known = ("kind", "question", "options", "placeholder", "markdown")
        return cls(
            kind=kind,
            question=question,
            options=tuple(str(option) for option in options),
            placeholder=str(data.get("placeholder") or ""),
            markdown=str(data.get("markdown") or ""),
            extra={k: v for k, v in data.items() if k not in known},
        )


BUDGET_TOOL = "over_budget"  # the tool name of a budget's own question (nbchat.engine._budget)
BUDGET_CALL_ID = "nbchat-budget-"  # how the ids of those questions start


@dataclass(frozen=True)
class PendingCall:
    """A client-tool call waiting for the person's answer."""

    thread_id: int
    turn: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    prompt: Prompt

    @property
    def call(self) -> ToolCall:
        return ToolCall(self.call_id, self.tool, json.dumps(self.arguments))

    @property
    def asks_budget(self) -> bool:
        """Whether this is a budget's question (go on past it?), not a call the model made."""
        return self.tool == BUDGET_TOOL and self.call_id.startswith(BUDGET_CALL_ID)

    @property
    def shows_arguments(self) -> bool:
        """Whether the prompt shows the call's whole arguments (an MCP tool's, say)."""
        return self.prompt.extra.get("view") == "arguments"

    @property
    def arguments_text(self) -> str:
        """The arguments as a prompt shows them, every character: what the call is sent."""
        return json.dumps(self.arguments, indent=2, ensure_ascii=False)

    @property
    def question(self) -> str:
        """The question with its options, as plain text (for terminals and logs).

        Safe to print: the model's text has its control characters written as
        escapes, and code or arguments awaiting a yes are shown whole, every
        hidden character as its escape, with a line naming them.
        """
        prompt = self.prompt
        text = _visible.for_terminal(" ".join(prompt.question.split())) or self.tool
        if prompt.kind == "code" and prompt.extra.get("diff"):  # an outside agent's edit
            diff = _visible.for_terminal(str(prompt.extra["diff"]).rstrip("\n"))
            shown = "\n".join("      " + line for line in diff.split("\n"))
            return f"{text}\n{shown}\n   (accept, accept 1 3 (those chunks), edit: NEW, " \
                "or reject: WHY)"  # fmt: skip
        if prompt.kind == "code":  # the person must see the code to answer
            code = _indented(str(self.arguments.get("code", "")), "This code holds")
            return f"{text}\n{code}\n   (run, reject: WHY, or edit: NEW CODE)"
        if prompt.extra.get("view") == "proposal":  # the change as a diff, chunks numbered
            return _proposal_text(text, prompt)
        if prompt.extra.get("view") == "plan":  # the numbered plan, to approve or edit
            plan = _visible.for_terminal(str(prompt.extra.get("plan") or "").rstrip("\n"))
            shown = "\n".join("      " + line for line in plan.split("\n"))
            return f"{text}\n{shown}\n   (approve, approve: THE PLAN AS YOU WANT IT, " \
                "or reject: WHY)"  # fmt: skip
        if self.shows_arguments:
            text += f"\n{_indented(self.arguments_text, 'These arguments hold')}\n  "
        if prompt.extra.get("detail"):  # what a request carries (an agent's diff, its command)
            shown = _visible.for_terminal(str(prompt.extra["detail"]).rstrip("\n"))
            text += "\n" + "\n".join("      " + line for line in shown.split("\n")) + "\n  "
        if prompt.options:
            text += f" (one of: {', '.join(_visible.for_terminal(o) for o in prompt.options)})"
        elif prompt.kind == "confirm":
            text += " (yes or no)"
        return text

    def to_dict(self) -> dict[str, Any]:
        """The stored form (thread and turn are where it is stored).

        The arguments are kept once: what a prompt shows and what an answer
        acts on are the same copy.
        """
        return {
            "call": {"id": self.call_id, "type": "function", "function": {"name": self.tool}},
            "arguments": self.arguments,
            "prompt": self.prompt.to_dict(),
        }

    @classmethod
    def from_dict(cls, thread_id: int, turn: int, data: object) -> PendingCall:
        """A stored pending call; RecordError when the entry is damaged."""
        data = _mapping(data, "pending call")
        call = ToolCall.from_dict(_mapping(data.get("call"), "pending call's call"))
        arguments = data.get("arguments")
        if not isinstance(arguments, dict):
            raise RecordError(f"pending call {call.id!r} has no arguments")
        prompt = Prompt.from_dict(data.get("prompt"), default_question=call.name)
        return cls(thread_id, turn, call.id, call.name, dict(arguments), prompt)


@dataclass(frozen=True)
class AnsweredCall:
    """A client-tool call the person answered: what was asked and what they said."""

    call_id: str
    tool: str
    question: str
    answer: Any
    by: str = ""
    at: float = 0.0

    @property
    def shown(self) -> str:
        """The answer as a person reads it."""
        if isinstance(self.answer, bool):
            return "yes" if self.answer else "no"
        if isinstance(self.answer, Mapping) and isinstance(self.answer.get("action"), str):
            return _decision_shown(self.answer)  # a proposal's or a plan's decision
        return " ".join(str(self.answer).split())

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id, "tool": self.tool, "question": self.question,
            "answer": _jsonable(self.answer), "by": self.by, "at": self.at,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: object) -> AnsweredCall:
        data = _mapping(data, "answered call")
        call_id, tool = data.get("call_id"), data.get("tool")
        if not isinstance(call_id, str) or not isinstance(tool, str):
            raise RecordError("an answered call without its id or tool")
        at = data.get("at", 0.0)
        return cls(
            call_id, tool, str(data.get("question") or ""), data.get("answer"),
            str(data.get("by") or ""), float(at) if isinstance(at, int | float) else 0.0,
        )  # fmt: skip


def _decision_shown(decision: Mapping[str, Any]) -> str:
    """A decision in words: what was accepted (which chunks), approved, run or rejected, why."""
    action, reason = str(decision["action"]), " ".join(str(decision.get("reason") or "").split())
    chunks, of = decision.get("chunks"), decision.get("of")
    if action == "accept" and isinstance(chunks, list) and isinstance(of, int) and \
            chunks and len(chunks) < of:  # fmt: skip
        return f"accepted chunk{'s' * (len(chunks) != 1)} {', '.join(map(str, chunks))} of {of}"
    words = {"accept": "accepted", "approve": "approved", "run": "run", "reject": "rejected",
             "edit": "run the edited code"}.get(action, action[:20])  # fmt: skip
    if action == "approve" and decision.get("edited"):
        words += " as edited"
    return f"{words}: {reason}" if reason and action == "reject" else words


def _proposal_text(question: str, prompt: Prompt) -> str:
    """A proposal in plain text: where it lands, its diff (hidden characters escaped), answers."""
    where = _visible.for_terminal(str(prompt.extra.get("where") or ""))
    diff = _visible.for_terminal(str(prompt.extra.get("diff") or "").rstrip("\n"))
    shown = "\n".join("      " + line for line in diff.split("\n")) if diff else ""
    chunks = prompt.extra.get("chunks")
    some = ", accept 1 3 (those chunks)" if isinstance(chunks, int) and chunks > 1 else ""
    words = "run" if prompt.extra.get("op") == "execute_cell" else "accept"
    return "\n".join(p for p in (f"{question}\n   {where}", shown) if p) + \
        f"\n   ({words}{some}, or reject: WHY)"  # fmt: skip


def _indented(source: str, lead: str) -> str:
    """``source`` indented under a question, hidden characters as escapes, then a warning."""
    lines = _visible.escape_hidden(source.rstrip("\n")).split("\n")
    shown = "\n".join("      " + line for line in lines)
    warning = _visible.summary(source, lead=lead)
    return f"{shown}\n   ‼ {warning}" if warning else shown


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RecordError(f"a {what} that is not an object")
    return value


def _jsonable(value: object) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return str(value)
