"""``@name`` mentions in a question: which objects the person wants attached.

A mention is ``@`` followed by a reference as ``{name}`` interpolation reads
them (``@df``, ``@model.coef_``, ``@In[3]``, ``@Out[4]``,
``@config['model']``). Not a mention: an ``@`` inside inline code or a fenced
code block (a decorator, a matrix product), in an e-mail address, or glued
to a word or another reference (``a@b``, ``x@@y``), and not the notebook's own
mentions (``@notebook``, ``@cell 3``, ``@cells 2-5``: :mod:`._notebook_mentions`).
The question's text is never changed: mentions only say what to attach.

>>> [m.reference for m in find_mentions("Why is @df.price skewed? ask ana@example.com")]
['df.price']
>>> find_mentions("use `@property` here")
()
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._interpolate import _REFERENCE, resolve
from ._notebook_mentions import notebook_spans

_MENTION = re.compile(rf"(?<![\w@.`)\]}}])@(?P<reference>{_REFERENCE})(?![\w@])")
_CODE = re.compile(r"(?ms)^[ \t]*(```|~~~).*?(^[ \t]*\1[ \t]*$|\Z)|(`+)(?:(?!\3).)+?\3")


@dataclass(frozen=True)
class Mention:
    """One ``@reference`` in a question, where it is."""

    reference: str
    start: int
    end: int


@dataclass(frozen=True)
class ResolvedMentions:
    """The mentioned objects found in a namespace, and the references that were not."""

    found: tuple[tuple[str, Any], ...]
    unresolved: tuple[str, ...]


def find_mentions(text: str) -> tuple[Mention, ...]:
    """The ``@references`` of ``text`` outside code, in order, each once."""
    code = [match.span() for match in _CODE.finditer(text)]
    code += notebook_spans(text)  # @notebook, @cell 3, @cells 2-5: the notebook's own
    seen: dict[str, Mention] = {}
    for match in _MENTION.finditer(text):
        start, end = match.span()
        if any(low <= start < high for low, high in code):
            continue
        reference = match.group("reference")
        seen.setdefault(reference, Mention(reference, start, start + 1 + len(reference)))
    return tuple(seen.values())


def resolve_mentions(text: str, namespace: Mapping[str, Any]) -> ResolvedMentions:
    """Each mention of ``text`` looked up in ``namespace``: (reference, object) or unresolved."""
    found: list[tuple[str, Any]] = []
    unresolved: list[str] = []
    for mention in find_mentions(text):
        ok, value = resolve(mention.reference, namespace)
        if ok:
            found.append((mention.reference, value))
        else:
            unresolved.append("@" + mention.reference)
    return ResolvedMentions(tuple(found), tuple(unresolved))
