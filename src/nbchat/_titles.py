"""Turning what a model answered to "give this conversation a title" into a title.

Small models wrap the title in preambles ("Here's a possible 3 to 5 word
title:"), quotes and Markdown, answer with a sentence about the request, or go
on past five words. :func:`clean_title` keeps the title (the 3–5 words asked
for; two are accepted, a single word is not a title) or returns "" when what is
left is not one, so the caller falls back to the question's first words.

>>> clean_title("Here's a possible 3 to 5 word title:\\n\\n**Sorting Dicts By Value**")
'Sorting Dicts By Value'
>>> clean_title("To answer the user's question, I'll respond with a title")
''
"""

from __future__ import annotations

import re

from .llm._think import split_think

MIN_WORDS = 2
MAX_WORDS = 5
MAX_CHARS = 80

_PREAMBLE = re.compile(
    r"^(sure|certainly|okay|ok|of course|absolutely|here('s| is| are)|a (possible|good|short|"
    r"suitable)|possible|suggested|the title|title|to answer|i('ll| will| would| am|'m| can)|"
    r"as an ai|based on|this conversation|for this)\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»]{3,80})[\"“”«»]")
_TRIM = "\"'“”‘’`*#_ \t-–—>"
_DANGLING = {"a", "an", "and", "by", "for", "in", "of", "on", "or", "the", "to", "with"}


def clean_title(text: str) -> str:
    """The title in a model's reply (2–5 words, no quotes or preamble), or "" if there is none."""
    answer, _ = split_think(text)
    for line in answer.splitlines():
        candidate = _candidate(line)
        if candidate is None:
            continue
        return _shaped(candidate)
    return ""


def _candidate(line: str) -> str | None:
    """The title part of one line; None when the line holds no title (blank, preamble)."""
    quoted = _QUOTED.search(line)
    line = line.strip().strip(_TRIM)
    if not line:
        return None
    if quoted and _PREAMBLE.match(line):
        return quoted.group(1)
    head, colon, tail = line.partition(":")
    if colon and (_PREAMBLE.match(head.strip(_TRIM)) or len(head.split()) > MAX_WORDS):
        tail = tail.strip().strip(_TRIM)
        return tail or None
    if _PREAMBLE.match(line):
        return None
    return line


def _shaped(candidate: str) -> str:
    if "?" in candidate:
        return ""  # a question back, not a title
    candidate = re.sub(r"[.!,;:…]+$", "", candidate.strip().strip(_TRIM)).strip(_TRIM)
    if _PREAMBLE.match(candidate):
        return ""
    words = candidate.split()[:MAX_WORDS]
    while words and words[-1].lower().strip(_TRIM) in _DANGLING:
        words.pop()
    if len(words) < MIN_WORDS:
        return ""
    return re.sub(r"[,;:]+$", "", " ".join(words))[:MAX_CHARS]
