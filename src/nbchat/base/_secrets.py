"""Secrets kept out of text nbchat sends or shows: the keys it uses, secret-named variables.

A cell, a variable or a run's output may hold a key, and a server may echo
one. :func:`scrub` replaces the keys this process uses (each given to
:func:`remember`) and the values of environment variables named like a
secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, in any case).
Values shorter than eight characters are left alone: they are placeholders
("ollama", "none") or ordinary words, and replacing them would garble text.

>>> import os
>>> os.environ["EXAMPLE_TOKEN"] = "tok-1234567890"
>>> scrub("token = 'tok-1234567890'; n = 'none'")
"token = '[redacted]'; n = 'none'"
>>> del os.environ["EXAMPLE_TOKEN"]
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET = 8
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)

_remembered: frozenset[str] = frozenset()  # replaced whole, so a reader never sees it change
_remembering = threading.Lock()


def remember(secret: str | None) -> None:
    """Have :func:`scrub` replace ``secret`` from now on (a key this process uses)."""
    global _remembered
    if secret and len(secret.strip()) >= MIN_SECRET:
        with _remembering:
            _remembered = _remembered | {secret.strip()}


def scrub(text: str) -> str:
    """``text`` without the remembered keys nor the values of secret-named variables."""
    done = scrub_names(text)
    noted = _noted.get()
    if noted is not None and done.names:
        noted.append(done)
    return done.text


@dataclass(frozen=True)
class Scrubbed:
    """Text after :func:`scrub`, and the names of the variables whose values it replaced.

    A key nbchat uses that no variable names is ``KEY_IN_USE``; never the value.
    """

    text: str
    names: tuple[str, ...] = ()


KEY_IN_USE = "a key nbchat uses"


def known_secrets() -> dict[str, str]:
    """The values :func:`scrub` replaces now, each with the name it goes by."""
    named: dict[str, str] = {}  # value -> the first name it goes by
    for name, value in sorted(os.environ.items()):
        if SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET:
            named.setdefault(value.strip(), name)
    for secret in _remembered:
        named.setdefault(secret, KEY_IN_USE)
    return named


def scrub_names(text: str, named: dict[str, str] | None = None) -> Scrubbed:
    """What :func:`scrub` makes of ``text``, with the names of what it replaced (nothing noted).

    ``named`` is :func:`known_secrets` once for many texts.
    """
    named = known_secrets() if named is None else named
    found: list[str] = []
    for secret in sorted(named, key=len, reverse=True):  # a key inside a longer one
        if secret in text:
            text = text.replace(secret, REDACTED)
            found.append(named[secret])
    return Scrubbed(text, tuple(dict.fromkeys(found)))


@contextmanager
def noting_scrubs() -> Iterator[list[Scrubbed]]:
    """Within the block, every :func:`scrub` that replaced something (this thread or task)."""
    noted: list[Scrubbed] = []
    token = _noted.set(noted)
    try:
        yield noted
    finally:
        _noted.reset(token)


_noted: ContextVar[list[Scrubbed] | None] = ContextVar("nbchat_noted_scrubs", default=None)


# The user (and password) of a URL: scheme://USERINFO@host, stopping at the path.
_USERINFO = re.compile(r"(?<=://)[^\s/?#@]+(?=@)")


def redacted_repr(record: Any) -> str:
    """A dataclass's repr with the user and password of every URL in it replaced."""
    shown = ", ".join(
        f"{f.name}={redact_url(repr(getattr(record, f.name)))}" for f in fields(record) if f.repr
    )
    return f"{type(record).__name__}({shown})"


def redact_url(text: str) -> str:
    """``text`` with the user and password of every URL in it replaced: ``https://[redacted]@host``."""
    return _USERINFO.sub(REDACTED, text)


def scrub_pieces(text: str) -> str:
    """:func:`scrub`, and every piece of a known secret at least MIN_SECRET characters long.

    A cut (a library's column width, a budget) can leave the start or the end of a
    secret, which :func:`scrub` no longer recognises: any run of text that is part
    of one, from MIN_SECRET characters on, is replaced too. One search of ``text``
    per MIN_SECRET-long window of each secret: for text already cut to a budget.
    """
    text = scrub(text)
    spans: list[tuple[int, int]] = []
    for secret in known_secrets():  # any order: the pieces found are merged
        for start in range(len(secret) - MIN_SECRET + 1):
            window = secret[start : start + MIN_SECRET]
            at = text.find(window)
            while at != -1:
                spans.append((at, at + MIN_SECRET))
                at = text.find(window, at + 1)
    if not spans:
        return text
    parts, kept = [], 0
    for begin, end in _merged(spans):
        parts += [text[kept:begin], REDACTED]
        kept = end
    return "".join(parts) + text[kept:]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one, in order."""
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


def cut_scrubbed(text: str, cut: Callable[[str], str]) -> str:
    """``cut(text)`` with secrets scrubbed before the cut, and any piece of one after it.

    >>> import os
    >>> os.environ["EXAMPLE_TOKEN"] = "tok-1234567890"
    >>> cut_scrubbed("token tok-1234567890", lambda text: text[:12])
    'token [redac'
    >>> scrub_pieces("token tok-123456")  # what a cut before the scrub would have left
    'token [redacted]'
    >>> del os.environ["EXAMPLE_TOKEN"]
    """
    return scrub_pieces(cut(scrub(text)))


def excerpt(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, secrets scrubbed before the cut."""
    return cut_scrubbed(text, lambda whole: whole[:limit])
