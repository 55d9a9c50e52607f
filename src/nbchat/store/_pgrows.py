"""The PostgreSQL store's rows, both ways: a turn row read back, changes and searches written.

:class:`~nbchat.store.postgres.PostgresStore` says what each operation does in
one transaction; this module knows the columns: which are ``jsonb`` and which
text (escaped as :mod:`nbchat.store._pg` says), how a row becomes a
:class:`~nbchat.store.base.Turn` (checked like user input, since anyone with
the database may have written it), and how a search becomes a condition.
"""

from __future__ import annotations

import re
from typing import Any

from ..base.content import ContextItem
from ..base.records import AnsweredCall, PendingCall, RecordError
from ._pg import dec_json, dec_text, enc_json, enc_text
from .base import STATUSES, Turn

TURN_COLUMNS = (
    "idx, query, answer, messages::text, status, pending::text, answered::text, error, "
    "model, usage::text, started, finished, writer, options::text, finish_reason, reasoning, "
    "context::text"
)
_JSON_FIELDS = ("messages", "pending", "answered", "usage", "options")
_TEXT_FIELDS = ("answer", "error", "model", "finish_reason", "reasoning")


def turn_from_row(tid: int, row: tuple[Any, ...], live: set[int]) -> Turn:
    """The turn a row of :data:`TURN_COLUMNS` holds; "interrupted" if its writer is not live.

    A record nbchat did not write raises RecordError or ValueError (an
    InputError, from a damaged context item).
    """
    (index, query, answer, messages, status, pending, answered, error, model, usage,
     started, finished, writer, options, finish_reason, reasoning, context) = row  # fmt: skip
    messages, usage, options = dec_json(messages), dec_json(usage), dec_json(options)
    if not (options is None or isinstance(options, dict)):
        raise RecordError("options that are not an object")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RecordError("messages that are not a list of objects")
    if status not in STATUSES or not (usage is None or isinstance(usage, dict)):
        raise RecordError(f"a status or usage nbchat did not write ({status!r})")
    turn = Turn(
        query=dec_text(query) or "", answer=dec_text(answer) or "", messages=messages,
        status=status, error=dec_text(error), model=dec_text(model), usage=usage,
        started=started, finished=finished,
        pending=[PendingCall.from_dict(tid, index, e) for e in _list(pending)],
        answered=[AnsweredCall.from_dict(e) for e in _list(answered)],
        options=options, finish_reason=dec_text(finish_reason),
        reasoning=dec_text(reasoning) or "",
        context=[ContextItem.from_dict(item) for item in _list(context)],
    )  # fmt: skip
    if turn.status == "streaming" and writer not in live:
        turn.status = "interrupted"
    return turn


def encode_changes(changes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``SET`` list and its parameters for checked turn *changes*."""
    values = {
        name: enc_json(value)
        if name in _JSON_FIELDS
        else (enc_text(value) if name in _TEXT_FIELDS and value is not None else value)
        for name, value in changes.items()
    }
    sets = ", ".join(
        f"{name} = %({name})s::jsonb" if name in _JSON_FIELDS else f"{name} = %({name})s"
        for name in values
    )
    return sets, values


def search_match(text: str) -> tuple[str, str]:
    """The condition on turns ``u`` that finds *text*, and its ``%(match)s`` parameter.

    Full-text on the index when *text* has word characters, else a substring.
    """
    words = tsquery(text)
    if words:
        return "u.words @@ to_tsquery('simple', %(match)s)", words
    return "u.query || ' ' || u.answer ILIKE %(match)s", f"%{_escape_like(text)}%"


def tsquery(text: str) -> str:
    """A ``to_tsquery('simple', …)`` string: every word of *text*, each as a prefix."""
    words = re.findall(r"\w+", text.casefold())
    return " & ".join(f"'{word}':*" for word in words)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _list(raw: str | None) -> list[Any]:
    value = dec_json(raw)
    if not isinstance(value, list):
        raise RecordError("a list of calls that is not a list")
    return value
