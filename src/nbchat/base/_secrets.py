"""Secrets kept out of text nbchat sends or shows: keys, tokens, secret-named variables.

A cell, a variable or a run's output may hold a key, and a server may echo
one. :func:`scrub` replaces

- the keys this process uses (each given to :func:`remember`), the Jupyter
  server's token among them where the server runs nbchat;
- the values of environment variables named like a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, in any case: ``JUPYTER_TOKEN`` too);
- every token in Jupyter's runtime files this process can read (the
  ``token`` of each ``jpserver-*.json`` and ``nbserver-*.json``, the ``key``
  of each kernel's connection file), which open a server's API or a kernel
  around any gate;
- whatever has the shape of an nbchat agent token (:data:`AGENT_TOKEN`),
  whoever's it is, and the value of a URL's query parameter named like a
  secret (``?token=…``, ``&api_key=…``).

Values shorter than eight characters are left alone: they are placeholders
("ollama", "none") or ordinary words, and replacing them would garble text.

>>> import os
>>> os.environ["EXAMPLE_TOKEN"] = "tok-1234567890"
>>> scrub("token = 'tok-1234567890'; n = 'none'")
"token = '[redacted]'; n = 'none'"
>>> scrub("http://127.0.0.1:8888/?token=0123abcd")
'http://127.0.0.1:8888/?token=[redacted]'
>>> del os.environ["EXAMPLE_TOKEN"]
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_runtime_dir

REDACTED = "[redacted]"
MIN_SECRET = 8
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
KEY_IN_USE = "a key nbchat uses"
JUPYTER_TOKEN = "a Jupyter server's token"
KERNEL_KEY = "a kernel's connection key"
AGENT_TOKEN_NAME = "an nbchat agent token"
URL_SECRET = "a secret in a URL"
SETTLED_NS = 1_000_000_000  # a runtime folder this long unchanged is not listed again

AGENT_TOKEN_PREFIX = "nbchat_agent_"
AGENT_TOKEN = re.compile(rf"{AGENT_TOKEN_PREFIX}([0-9a-f]{{8}})_([A-Za-z0-9_-]{{32,64}})")
"""An nbchat agent token: the prefix, its id, its random part (``nbchat.agents.tokens``)."""

# Shapes scrubbed wherever they appear, with the group replaced and the name it goes by.
_SHAPES: tuple[tuple[re.Pattern[str], int, str], ...] = (
    (AGENT_TOKEN, 0, AGENT_TOKEN_NAME),
    (re.compile(r"(?<=[?&#])[\w.-]*?(?:token|key|secret|password|passwd|signature|sig)="
                r"(?!\[redacted\])([\w.~%+/=-]+)", re.IGNORECASE), 1, URL_SECRET),
)  # fmt: skip
# What a cut leaves of an agent token: its prefix, with some of its id at least.
_AGENT_PIECE = re.compile(rf"{AGENT_TOKEN_PREFIX}[0-9a-f]{{1,8}}(?:_[A-Za-z0-9_-]*)?")

_remembered: dict[str, str] = {}  # replaced whole, so a reader never sees it change
_remembering = threading.Lock()


def remember(secret: str | None, name: str = KEY_IN_USE) -> None:
    """Have :func:`scrub` replace ``secret`` from now on (a key this process uses)."""
    global _remembered
    if secret and len(secret.strip()) >= MIN_SECRET:
        with _remembering:
            _remembered = {secret.strip(): name, **_remembered}


def scrub(text: str) -> str:
    """``text`` without any secret this module knows (see above)."""
    done = scrub_names(text)
    noted = _noted.get()
    if noted is not None and done.names:
        noted.append(done)
    return done.text


@dataclass(frozen=True)
class Scrubbed:
    """Text after :func:`scrub`, and the names of what it replaced.

    A variable's name, or what a secret no variable names is (``KEY_IN_USE``,
    ``JUPYTER_TOKEN`` …); never the value.
    """

    text: str
    names: tuple[str, ...] = ()


def known_secrets() -> dict[str, str]:
    """The values :func:`scrub` replaces now, each with the name it goes by.

    Besides these, :func:`scrub` replaces the shapes of secrets (agent tokens,
    a URL's ``?token=``) wherever they appear.
    """
    named: dict[str, str] = {}  # value -> the first name it goes by
    for name, value in sorted(os.environ.items()):
        if SECRET_NAME.search(name) and len(value.strip()) >= MIN_SECRET:
            named.setdefault(value.strip(), name)
    for secret, name in _remembered.items():
        named.setdefault(secret, name)
    for secret, name in _runtime.secrets():
        named.setdefault(secret, name)
    return named


def scrub_names(text: str, named: dict[str, str] | None = None) -> Scrubbed:
    """What :func:`scrub` makes of ``text``, with the names of what it replaced (nothing noted).

    ``named`` is :func:`known_secrets` once for many texts.
    """
    spans = _spans(text, known_secrets() if named is None else named)
    if not spans:
        return Scrubbed(text)
    names = [name for _, _, name in sorted(spans)]
    return Scrubbed(_replaced(text, _merged([(b, e) for b, e, _ in spans])),
                    tuple(dict.fromkeys(names)))  # fmt: skip


def scrub_around(before: str, after: str) -> tuple[str, str]:
    """``before`` and ``after`` scrubbed as one text (pieces too), split back where they met.

    For the code on either side of a cursor: a secret that straddles it is
    replaced whole, its ``[redacted]`` at the end of ``before``.

    >>> import os
    >>> os.environ["EXAMPLE_TOKEN"] = "tok-1234567890"
    >>> scrub_around("key = 'tok-12345", "67890'")
    ("key = '[redacted]", "'")
    >>> del os.environ["EXAMPLE_TOKEN"]
    """
    text, cut = before + after, len(before)
    named = known_secrets()
    found = [(begin, end) for begin, end, _ in _spans(text, named)]
    head, tail, kept = [], [], 0  # kept: where what is left of ``after`` starts
    for begin, end in _merged(found + _piece_spans(text, named)):
        if end <= cut:
            head.append((begin, end))
        elif begin >= cut:
            tail.append((begin - cut - kept, end - cut - kept))
        else:
            head.append((begin, cut))
            kept = end - cut
    return _replaced(before, head), _replaced(after[kept:], tail)


def _spans(text: str, named: dict[str, str]) -> list[tuple[int, int, str]]:
    """Where ``text`` holds a known secret or a secret's shape, each with its name."""
    found: list[tuple[int, int, str]] = []
    for secret, name in named.items():
        at = text.find(secret)
        while at != -1:
            found.append((at, at + len(secret), name))
            at = text.find(secret, at + 1)
    for shape, group, name in _SHAPES:
        found += [(*match.span(group), name) for match in shape.finditer(text)]
    return found


def _replaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the merged, ordered ``spans`` replaced by ``[redacted]``."""
    parts, kept = [], 0
    for begin, end in spans:
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
    of one, from MIN_SECRET characters on, is replaced too, and so is the start of
    an agent token. One search of ``text`` per MIN_SECRET-long window of each
    secret: for text already cut to a budget.
    """
    text = scrub(text)
    spans = _piece_spans(text, known_secrets())
    return _replaced(text, _merged(spans)) if spans else text


def _piece_spans(text: str, secrets: dict[str, str]) -> list[tuple[int, int]]:
    """Where ``text`` holds a MIN_SECRET-long piece of a secret, or the head of an agent token."""
    spans = [match.span() for match in _AGENT_PIECE.finditer(text)]
    for secret in secrets:  # any order: the pieces found are merged
        for start in range(len(secret) - MIN_SECRET + 1):
            window = secret[start : start + MIN_SECRET]
            at = text.find(window)
            while at != -1:
                spans.append((at, at + MIN_SECRET))
                at = text.find(window, at + 1)
    return spans


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


class _RuntimeSecrets:
    """The tokens in Jupyter's runtime folder, read again only when a file or the folder changes.

    A scrub asks for them every time: one ``stat`` of the folder and of each
    file of the kinds below it held when last listed; the folder is listed
    again when its mtime changes, a file read again when its own does (and
    while either is less than a second old).
    """

    KINDS = {
        "jpserver-*.json": ("token", JUPYTER_TOKEN),
        "nbserver-*.json": ("token", JUPYTER_TOKEN),
        "kernel-*.json": ("key", KERNEL_KEY),
    }

    def __init__(self) -> None:
        # The folder, its mtime when listed, and each file's mtime and token: replaced whole,
        # so a thread never reads one listing's folder with another's files.
        self._seen: tuple[str, int, dict[Path, tuple[int, tuple[str, str] | None]]] = ("", 0, {})

    def secrets(self) -> list[tuple[str, str]]:
        """Each token found, with the name it goes by."""
        folder = jupyter_runtime_dir()
        try:
            stamp = os.stat(folder).st_mtime_ns
        except OSError:
            return []
        listed, listed_at, known = self._seen
        # A change in the same clock tick as the last look leaves the mtime as it was: what
        # changed within the last second is looked at again.
        now = time.time_ns()
        files = list(known) if (listed, listed_at) == (folder, stamp) and \
            now - stamp > SETTLED_NS else \
            [path for kind in self.KINDS for path in Path(folder).glob(kind)]  # fmt: skip
        seen: dict[Path, tuple[int, tuple[str, str] | None]] = {}
        for path in files:
            try:
                mtime = path.stat().st_mtime_ns
            except OSError:
                continue  # gone since it was listed
            before = known.get(path)
            settled = before is not None and before[0] == mtime and now - mtime > SETTLED_NS
            seen[path] = before if settled and before is not None else (mtime, self._read(path))
        self._seen = (folder, stamp, seen)
        return [found for _, found in seen.values() if found is not None]

    def _read(self, path: Path) -> tuple[str, str] | None:
        field, name = next(v for kind, v in self.KINDS.items() if path.match(kind))
        try:
            value = json.loads(path.read_bytes()).get(field)
        except (OSError, ValueError, AttributeError):
            return None  # unreadable, half written, or not an object: read again when it changes
        if isinstance(value, str) and len(value.strip()) >= MIN_SECRET:
            return value.strip(), name
        return None


_runtime = _RuntimeSecrets()
