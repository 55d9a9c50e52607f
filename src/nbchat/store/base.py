"""What every thread store shares: its records, the Store interface, the checks on writes.

:class:`Turn`, :class:`Thread`, :class:`ThreadInfo` and :class:`SearchHit` are
what a store hands out, whichever engine keeps them (TinyDB files in
:mod:`nbchat.store`, PostgreSQL in :mod:`nbchat.store.postgres`). The ``_check_*``
helpers refuse bad input with an InputError before anything is written, so
both engines refuse the same things in the same words; :func:`_claim_changes`
is the one rule, for both, of what answering a pending call changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from numbers import Integral, Real
from typing import Any, Protocol, TypeVar

from ..base.content import ContextItem
from ..base.errors import AlreadyAnswered, InputError, NoPendingCall, ThreadNotFound
from ..base.records import AnsweredCall, PendingCall, RecordError

SCHEMA = 1
STATUSES = ("streaming", "complete", "incomplete", "interrupted", "failed", "suspended")
TITLE_MAX = 200
KERNEL_KEY_MAX = 200
SPENDING_DAYS = 30  # a kernel's spending nobody added to for this long is forgotten
_UNSET: Any = object()
T = TypeVar("T")


@dataclass
class Turn:
    """One question and what the model did with it."""

    query: str
    answer: str = ""
    messages: list[dict] = field(default_factory=list)
    status: str = "streaming"
    pending: list[PendingCall] = field(default_factory=list)
    error: str | None = None
    model: str | None = None
    usage: dict | None = None
    started: float = 0.0
    finished: float | None = None
    answered: list[AnsweredCall] = field(default_factory=list)
    options: dict | None = None  # the generation options the turn was asked with
    finish_reason: str | None = None  # how the model's last reply ended, as it said
    reasoning: str = ""  # the model's thinking: kept, never sent back as context
    context: list[ContextItem] = field(default_factory=list)


@dataclass
class Thread:
    """A whole conversation: its settings and every turn, oldest first."""

    id: int
    user: str
    title: str
    model: str
    system: str | None
    created: float
    updated: float
    turns: list[Turn]
    settings: dict


@dataclass(frozen=True)
class ThreadInfo:
    """A thread's summary, as listed."""

    id: int
    title: str
    model: str
    turns: int
    created: float
    updated: float


@dataclass(frozen=True)
class SearchHit:
    """A turn whose query or answer contains the searched text."""

    thread_id: int
    title: str
    turn: int
    query: str
    answer: str

    def snippet(self, text: str, width: int = 100) -> str:
        """About *width* characters of the turn around *text* (or one of its words), in bold."""
        before, match, after = self.snippet_parts(text, width)
        return f"{before}**{match}**{after}" if match else before

    def snippet_parts(self, text: str, width: int = 100) -> tuple[str, str, str]:
        """The snippet as (before, the match, after); the match is "" when nothing matched."""
        body = " ".join(f"{self.query} — {self.answer}".split())
        lowered = body.lower()
        for needle in (" ".join(text.split()), *re.findall(r"\w+", text)):
            at = lowered.find(needle.lower()) if needle else -1
            if at >= 0:
                break
        else:
            return body[:width] + ("…" if len(body) > width else ""), "", ""
        end = at + len(needle)
        start = max(0, min(at - (width - len(needle)) // 2, len(body) - width))
        stop = max(end, start + width)
        return (
            f"{'…' if start else ''}{body[start:at]}", body[at:end],
            f"{body[end:stop]}{'…' if stop < len(body) else ''}",
        )


_TURN_KEYS = tuple(f.name for f in fields(Turn))
_INFO_KEYS = ("title", "model", "turns", "created", "updated")
_NUMBER = (int, float)
_HEADER_TYPES = (
    ("id", int),
    ("title", str),
    ("model", str),
    ("created", _NUMBER),
    ("updated", _NUMBER),
    ("settings", dict),
)


class Store(Protocol):
    """What every thread store does, whatever keeps the data (TinyDB, PostgreSQL).

    Every method is one atomic operation for one user (``user``): what it has
    returned survives the process being killed and is seen at once by other
    processes. Thread ids are sequential per user and never reused. Records
    read back are checked; damaged ones raise StoreCorrupt naming
    :meth:`location` and are left as they are. Beside the threads it keeps
    what each of the user's kernels has spent, in dollars
    (:meth:`kernel_spent`, :meth:`add_kernel_spent`), so that a kernel's
    budget holds across its restarts; what nobody added to for
    ``SPENDING_DAYS`` days is forgotten.

    :meth:`stamp` (one thread) and :meth:`change_stamp` (all of the user's
    threads) are values that change whenever a write does, as cheap to read as
    the store allows, for a caller that follows another process's writes.
    """

    user: str

    def new_thread(
        self, model: str, *, system: str | None = None, title: str = "",
        settings: dict | None = None,
    ) -> int: ...  # fmt: skip
    def threads(self) -> list[ThreadInfo]: ...
    def thread_list(self) -> list[tuple[int, str]]: ...
    def thread_details(self, thread_id: int) -> list[tuple[str, str]]: ...
    def get(self, thread_id: int) -> Thread: ...
    def update_thread_title(
        self, thread_id: int, title: str, *, if_untitled: bool = False
    ) -> bool: ...
    def update_thread(
        self, thread_id: int, *, model: str | None = None, system: str | None = ...,
        settings: dict | None = None,
    ) -> None: ...  # fmt: skip
    def delete_thread(self, thread_id: int) -> None: ...
    def search(self, text: str) -> list[SearchHit]: ...
    def append_response(
        self, thread_id: int, query: str, answer: str, title: str | None = None
    ) -> int: ...
    def start_turn(
        self,
        thread_id: int,
        query: str,
        *,
        model: str | None = None,
        context: Sequence[ContextItem] = (),
    ) -> int: ...
    def update_turn(self, thread_id: int, turn: int, **changes: Any) -> Turn: ...
    def claim_call(
        self, thread_id: int, turn: int, call_id: str, *, output: str, answer: AnsweredCall
    ) -> Turn: ...
    def location(self, thread_id: int | None = None) -> str: ...
    def kernel_spent(self, kernel: str) -> float: ...
    def add_kernel_spent(self, kernel: str, amount: float) -> float: ...
    def stamp(self, thread_id: int) -> object: ...
    def change_stamp(self) -> object: ...


def _not_found(user: str, thread_id: object) -> ThreadNotFound:
    return ThreadNotFound(
        f"invalid thread id {thread_id} for user {user!r}; see your threads with %chat --list",
        thread_id=thread_id,
        user=user,
    )


def _check_id(thread_id: object, user: str) -> int:
    """A thread id: a whole number from 1 (below 2**63, what a database's bigint holds)."""
    if isinstance(thread_id, bool) or not isinstance(thread_id, Integral):
        raise InputError(
            f"a thread id is a whole number such as 3, got {thread_id!r}; "
            f"see your threads with %chat --list"
        )
    if not 1 <= int(thread_id) < 2**63:
        raise _not_found(user, thread_id)
    return int(thread_id)


def _check_user(user: object) -> str:
    if not isinstance(user, str) or not user.strip():
        raise InputError(f"user must be a non-empty string, got {user!r}; set NBCHAT_USER")
    return user


def _check_type(value: object, name: str, kind: type[T]) -> T:
    if not isinstance(value, kind):
        raise InputError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _check_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError(f"the query must be a non-empty string, got {query!r:.60}")
    return query


def _check_model(model: object) -> str:
    if not isinstance(model, str) or not model.strip():
        raise InputError(f"model must name a model, such as 'gpt-4o-mini', got {model!r}")
    return model.strip()


def _check_optional_str(value: object, name: str) -> str | None:
    return None if value is None else _check_type(value, name, str)


def _check_title(title: object, *, allow_empty: bool = False) -> str:
    text = " ".join(_check_type(title, "title", str).split())
    if not text and not allow_empty:
        raise InputError("the title is empty; give the thread a few words as its title")
    if len(text) > TITLE_MAX:
        raise InputError(f"the title has {len(text)} characters; keep it to {TITLE_MAX} or fewer")
    return text


def _check_kernel(kernel: object) -> str:
    if not isinstance(kernel, str) or not kernel.strip() or len(kernel) > KERNEL_KEY_MAX:
        raise InputError(f"a kernel is named by a non-empty string of at most {KERNEL_KEY_MAX} "
                         f"characters, got {kernel!r:.60}")  # fmt: skip
    return kernel


def _check_amount(amount: object) -> float:
    dollars = float(amount) if isinstance(amount, Real) and not isinstance(amount, bool) else -1.0
    if not 0 <= dollars < float("inf"):
        raise InputError(f"an amount spent is dollars of 0 or more, got {amount!r}")
    return dollars


def _check_index(turn: object) -> int:
    if isinstance(turn, bool) or not isinstance(turn, Integral) or turn < 0:
        raise InputError(f"a turn index is a whole number from 0, got {turn!r}")
    return int(turn)


def _check_json(value: object, name: str, kind: type[T]) -> T:
    _check_type(value, name, kind)
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(
            f"{name} must be plain JSON data (dict, list, str, number): {exc}"
        ) from None


def _check_dict_list(value: object, name: str) -> list[dict]:
    if not all(isinstance(item, dict) for item in _check_type(value, name, list)):
        raise InputError(f"{name} must be a list of dicts (OpenAI-format messages or calls)")
    return _check_json(value, name, list)


def _check_records(name: str, entries: list[dict]) -> None:
    read = {"pending": lambda e: PendingCall.from_dict(0, 0, e), "answered": AnsweredCall.from_dict}
    try:
        for entry in entries if name in read else ():
            read[name](entry)
    except RecordError as exc:
        raise InputError(f"{name} must hold {name} call records: {exc}") from None


def _check_turn_field(name: str, value: Any) -> Any:
    if name in ("pending", "answered") and isinstance(value, list):
        value = [item.to_dict() if hasattr(item, "to_dict") else item for item in value]
    if name in ("messages", "pending", "answered"):
        checked = _check_dict_list(value, name)
        _check_records(name, checked)
        return checked
    if name == "status":
        if value not in STATUSES:
            raise InputError(f"status must be one of {', '.join(STATUSES)}; got {value!r}")
        return value
    if name in ("error", "model", "answer", "finish_reason", "reasoning"):
        is_required = name in ("answer", "reasoning")
        return _check_type(value, name, str) if value is not None or is_required else None
    if name == "options":
        return None if value is None else _check_json(value, "options", dict)
    if name == "usage":
        return None if value is None else _check_json(value, "usage", dict)
    if name == "finished":
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real)):
            raise InputError(f"finished must be epoch seconds or None, got {value!r}")
        return None if value is None else float(value)
    allowed = (
        "answer, messages, status, pending, answered, error, usage, finished, model, "
        "options, finish_reason, reasoning"
    )
    raise InputError(f"update_turn cannot change {name!r}; it changes: {allowed}")


def _claim_changes(
    current: Turn, tid: int, call_id: str, output: str, answer: AnsweredCall
) -> dict[str, Any]:
    """The changes to *current* that record *answer* to its pending call *call_id*.

    The call's entry moves to ``answered``, the tool message with *output*
    joins the messages (not for a budget's question, which the model did not
    ask) and, once no call waits any more, the turn turns
    "streaming". A call answered already raises AlreadyAnswered (naming the
    answer that won); one that does not wait raises NoPendingCall.
    """
    won = next((done for done in current.answered if done.call_id == call_id), None)
    if won is not None:
        raise AlreadyAnswered(
            f"already answered: call {call_id!r} in thread {tid} was answered "
            f"({won.shown}) by someone else first; nothing was sent again",
            thread_id=tid,
            call_id=call_id,
            answer=won.shown,
        )
    waiting = [call for call in current.pending if call.call_id == call_id]
    if current.status != "suspended" or not waiting:
        raise NoPendingCall(f"no call {call_id!r} waits for an answer in thread {tid}")
    pending = [c.to_dict() for c in current.pending if c.call_id != call_id]
    tool_message = {
        "role": "tool", "tool_call_id": call_id, "name": waiting[0].tool, "content": output,
    }  # fmt: skip
    result = [] if waiting[0].asks_budget else [tool_message]  # the model made no such call
    return {
        "messages": [*current.messages, *result],
        "pending": pending,
        "answered": [*(a.to_dict() for a in current.answered), answer.to_dict()],
        "status": "suspended" if pending else "streaming",
    }
