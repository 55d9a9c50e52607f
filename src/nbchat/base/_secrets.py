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
from dataclasses import fields
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
    known = _remembered | {
        value.strip()
        for name, value in os.environ.items()
        if SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET
    }
    for secret in sorted(known, key=len, reverse=True):  # a key inside a longer one
        text = text.replace(secret, REDACTED)
    return text


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
