"""A string field of a JSON object read while the object is still being written.

A tool call's arguments stream as pieces of one JSON object; what a view shows
before the call is complete is one of its string fields as far as it has come:
:func:`partial_string` reads ``{"cell_id": "c1", "source": "x = 1\\ny`` as
``source`` = ``"x = 1\\ny"``. The scanning is the json module's own (in C), so
reading a long prefix again at each update costs little.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from typing import Any

__all__ = ["partial_string"]

_DECODER = json.JSONDecoder(strict=False)
_scan_value = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_scan_string: Any = json.decoder.scanstring  # type: ignore[attr-defined]
_SPACE = re.compile(r"[ \t\n\r]*")
# A trailing escape not yet whole: a lone backslash, or \u with fewer than four hex digits.
_CUT_ESCAPE = re.compile(r"(\\+)(u[0-9a-fA-F]{0,3})?$")


def partial_string(text: str, key: str, *, whole: bool = False) -> str | None:
    """The string value of top-level ``key`` in the JSON object ``text`` begins, as far as it goes.

    ``text`` is a prefix of a JSON object (or all of it). None while the key has
    not come yet, when its value is not a string, or when what came is not the
    start of a JSON object. A half-written escape at the end is left out until
    it is whole (a ``\\u`` pair's first half too), so the value only ever grows.
    ``whole``: only a value whose closing quote has come (an id, say), else None.
    """
    at = _skip(text, 0)
    if not text.startswith("{", at):
        return None
    at = _skip(text, at + 1)
    while at < len(text) and text[at] == '"':
        try:
            name, at = _scan_string(text, at + 1, False)
        except ValueError:
            return None  # the key itself is not whole yet
        at = _skip(text, at)
        if not text.startswith(":", at):
            return None
        at = _skip(text, at + 1)
        if name == key:
            return _string_at(text, at, whole)
        try:
            _, at = _scan_value(text, at)
        except (StopIteration, ValueError):
            return None  # another field's value, not whole yet
        at = _skip(text, at)
        if not text.startswith(",", at):
            return None
        at = _skip(text, at + 1)
    return None


def _string_at(text: str, at: int, whole: bool) -> str | None:
    if not text.startswith('"', at):
        begun = at == len(text) and not whole
        return "" if begun else None  # its value has not begun, or is no string
    try:
        return str(_scan_string(text, at + 1, False)[0])  # whole
    except ValueError:
        if whole:
            return None
    raw = text[at + 1 :]
    cut = _CUT_ESCAPE.search(raw)
    if cut and (len(cut.group(1)) % 2 == 1):  # an odd run: its last backslash starts an escape
        raw = raw[: cut.end(1) - 1]
    try:
        value = str(_scan_string(raw + '"', 0, False)[0])
    except ValueError:
        return None  # not JSON string text (an unknown escape, say)
    if value and "\ud800" <= value[-1] <= "\udbff":
        value = value[:-1]  # the first half of a pair: the second is on its way
    return value


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at
