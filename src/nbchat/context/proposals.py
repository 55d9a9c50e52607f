"""A proposed change to a cell's text as numbered chunks, and exactly the chunks accepted.

A proposal replaces a cell's *base* text (what the cell held when the change
was proposed) by the model's text. :func:`chunks` splits the difference into
the line ranges that differ, numbered from 1; :func:`apply` lands any subset
of them on the base, leaving every other line byte for byte as it was; and
:func:`unified` writes the difference as a unified diff whose hunks are the
same numbered chunks, each character that draws nothing or moves the text
written as its escape (as every code view of nbchat shows it), so what the
person reads is what lands.

>>> [c.number for c in chunks("a\\nb\\nc\\n", "A\\nb\\nC\\n")]
[1, 2]
>>> apply("a\\nb\\nc\\n", "A\\nb\\nC\\n", {2})
'a\\nb\\nC\\n'
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Collection
from dataclasses import dataclass

from ..base._visible import escape_hidden

__all__ = ["Chunk", "apply", "chunks", "digest", "unified"]

CONTEXT = 3  # unchanged lines shown around a chunk


@dataclass(frozen=True)
class Chunk:
    """Lines ``start`` to ``start + len(old)`` of the base, replaced by ``new``."""

    number: int
    start: int
    old: tuple[str, ...]
    new: tuple[str, ...]
    new_start: int

    @property
    def summary(self) -> str:
        """The chunk in a few words: where it is and what it does."""
        where = f"line {self.start + 1}" if len(self.old) <= 1 else \
            f"lines {self.start + 1}-{self.start + len(self.old)}"  # fmt: skip
        if not self.old:
            return f"chunk {self.number}: adds {_lines(len(self.new))} after line {self.start}"
        if not self.new:
            return f"chunk {self.number}: removes {where}"
        return f"chunk {self.number}: replaces {where} with {_lines(len(self.new))}"


def _lines(count: int) -> str:
    return f"{count} line{'s' * (count != 1)}"


def _split(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def chunks(base: str, proposed: str) -> list[Chunk]:
    """The ranges where ``proposed`` differs from ``base``, numbered from 1 in order."""
    old, new = _split(base), _split(proposed)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    found: list[Chunk] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            found.append(Chunk(len(found) + 1, i1, tuple(old[i1:i2]), tuple(new[j1:j2]), j1))
    return found


def apply(base: str, proposed: str, accepted: Collection[int]) -> str:
    """``base`` with the chunks numbered in ``accepted`` changed as ``proposed`` says."""
    old = _split(base)
    out: list[str] = []
    at = 0
    for chunk in chunks(base, proposed):
        out += old[at:chunk.start]
        out += chunk.new if chunk.number in accepted else chunk.old
        at = chunk.start + len(chunk.old)
    out += old[at:]
    return "".join(out)


def digest(text: str) -> str:
    """A short fingerprint of a cell's text: a proposal is bound to the text it was made on."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def unified(base: str, proposed: str, label: str = "cell") -> str:
    """The difference as a unified diff, one hunk per numbered chunk, hidden characters escaped.

    Each hunk's header names its chunk (``@@ -3,2 +3,3 @@ chunk 1``); a line without
    a final newline says so, as ``diff`` does.
    """
    old = _split(base)
    out = [f"--- {label} (now)\n", f"+++ {label} (proposed)\n"]
    found = chunks(base, proposed)
    shown_to = 0  # context stops at what the hunk before showed: no line is shown twice
    for at, chunk in enumerate(found):
        end = chunk.start + len(chunk.old)
        ceiling = found[at + 1].start if at + 1 < len(found) else len(old)
        before = old[max(shown_to, chunk.start - CONTEXT):chunk.start]
        after = old[end:min(ceiling, end + CONTEXT)]
        shown_to = end + len(after)
        first = chunk.start - len(before)
        new_first = chunk.new_start - len(before)
        size_old = len(before) + len(chunk.old) + len(after)
        size_new = len(before) + len(chunk.new) + len(after)
        out.append(f"@@ -{_range(first, size_old)} +{_range(new_first, size_new)} @@ "
                   f"chunk {chunk.number}\n")  # fmt: skip
        out += [_line(" ", line) for line in before]
        out += [_line("-", line) for line in chunk.old]
        out += [_line("+", line) for line in chunk.new]
        out += [_line(" ", line) for line in after]
    return "".join(out)


def _range(start: int, size: int) -> str:
    return f"{start + 1 if size else start},{size}"


def _line(mark: str, line: str) -> str:
    body = line[:-1] if line.endswith("\n") else line
    text = mark + escape_hidden(body) + "\n"
    return text if line.endswith("\n") else text + "\\ No newline at end of cell\n"
