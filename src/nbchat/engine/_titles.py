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

A reply that names nothing ("3 to 5") is not a title either
(:func:`names_something`), and small models are not asked at all: their
titles ("Ale-Linde, Auld Le D") read worse than the question, from whose words
:func:`question_title` makes one.

>>> question_title("Please give three ideas for a name for a small bakery.")
'Give three ideas'
>>> question_title("What is the capital of Scotland?")
'Capital of Scotland'
>>> question_title("What is 2+2?")
'What is 2+2'
"""

from __future__ import annotations

import re

from ..llm._think import split_think

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
_FILLER = {"please", "hey", "hi", "hello", "can you", "could you", "would you", "will you"}
_WORD = re.compile(r"[\w'’+-]+")
_ASKING = re.compile(
    r"^(?:(?:please|can you|could you)\s+)?(?:(?:what|how|why|which|who|where|when)\s+"
    r"(?:is|are|was|were|does|do|did|can|could|should|would)\s+(?:i\s+|we\s+|you\s+)?|"
    r"(?:tell me|give me|show me)\s+(?:about\s+)?)(?:(?:the|a|an)\s+)?",
    re.IGNORECASE,
)
_LETTERS = re.compile(r"[^\W\d_]{3,}")
_REQUEST_WORDS = {"word", "words", "title", "titles", "conversation"}


def clean_title(text: str) -> str:
    """The title in a model's reply (2–5 words, no quotes or preamble), or "" if there is none."""
    answer, _ = split_think(text)
    for line in answer.splitlines():
        candidate = _candidate(line)
        if candidate is None:
            continue
        return _shaped(candidate)
    return ""


def question_title(query: str) -> str:
    """A title from the question itself: its first clause's first words, filler left out."""
    clause = re.split(r"(?<=[.?!:;])\s|\n", query.strip(), maxsplit=1)[0]
    words = _WORD.findall(clause)
    asked = _WORD.findall(_ASKING.sub("", " ".join(words)))
    if len(asked) >= MIN_WORDS:  # "What is the capital of Scotland" → "capital of Scotland"
        words = asked
    while len(words) > MIN_WORDS:
        if " ".join(words[:2]).lower() in _FILLER:
            words = words[2:]
        elif words[0].lower() in _FILLER:
            words = words[1:]
        else:
            break
    words = words[:MAX_WORDS]
    while len(words) > MIN_WORDS and words[-1].lower() in _DANGLING:
        words.pop()
    title = " ".join(words)[:MAX_CHARS] or "Untitled"
    return title[:1].upper() + title[1:]


def names_something(title: str) -> bool:
    """Whether ``title`` holds a word, not only numbers, symbols or the request's own words.

    "3 to 5" and "2+2 = 4*2" come back from small models asked for a title.
    """
    return any(word.lower() not in _REQUEST_WORDS for word in _LETTERS.findall(title))


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
