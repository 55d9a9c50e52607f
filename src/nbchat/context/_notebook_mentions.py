"""``@notebook``, ``@cell N`` and ``@cells A-B`` in a question: which of the notebook to attach.

``@notebook`` is every cell; ``@cell 3`` the cell at index 3 (0-based, as
``read_cells`` and the cells' ``index`` count them); ``@cells 2-5`` cells 2 to
5, both included. They are found as ``@name`` mentions are: never in inline
code or a fenced block, never glued to a word. ``@notebook`` always means the
notebook, even when a variable is called ``notebook`` (attach that one with
``@notebook.`` attributes, or rename it); ``@cell`` and ``@cells`` mean cells only
when a number follows, else they are ordinary mentions of variables.

>>> [(m.first, m.last) for m in find_notebook_mentions("why is @cells 2-4 slow? see @cell 7")]
[(2, 4), (7, 7)]
>>> find_notebook_mentions("use `@notebook` literally") == ()
True
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..base.errors import InputError

__all__ = ["NotebookMention", "find_notebook_mentions", "notebook_spans"]

_SPECIAL = re.compile(
    r"(?<![\w@.`)\]}])@(?:(?P<notebook>notebook)(?![\w@.\[(])"
    r"|(?P<cells>cells?)[ \t]+(?P<first>\d{1,7})(?:[ \t]*-[ \t]*(?P<last>\d{1,7}))?(?![\w@]))"
)
_CODE = re.compile(r"(?ms)^[ \t]*(```|~~~).*?(^[ \t]*\1[ \t]*$|\Z)|(`+)(?:(?!\3).)+?\3")
_LOOSE = re.compile(r"(?<![\w@.`)\]}])@cells?[ \t]+\d+[ \t]*-[ \t]*(?![ \t\d])")


@dataclass(frozen=True)
class NotebookMention:
    """One mention of the notebook: cells ``first`` to ``last`` (None: every cell)."""

    first: int | None
    last: int | None
    start: int
    end: int

    @property
    def label(self) -> str:
        """How the person wrote it, as the preview and the context line name it."""
        if self.first is None:
            return "notebook"
        return f"cell {self.first}" if self.first == self.last else \
            f"cells {self.first}-{self.last}"  # fmt: skip


def find_notebook_mentions(text: str) -> tuple[NotebookMention, ...]:
    """The notebook mentions of ``text`` outside code, in order, each once.

    Raises :class:`~nbchat.base.errors.InputError` for a range that ends before it
    starts (``@cells 5-2``) or lacks its end (``@cells 5-``), naming the fix.
    """
    code = [match.span() for match in _CODE.finditer(text)]
    outside = [m for m in _SPECIAL.finditer(text) if not _inside(m.start(), code)]
    loose = next((m for m in _LOOSE.finditer(text) if not _inside(m.start(), code)), None)
    if loose is not None:
        raise InputError(f"{loose.group().strip()!r} has no last cell; write @cells A-B "
                         "(both included), as in @cells 2-5")  # fmt: skip
    found: dict[tuple[int | None, int | None], NotebookMention] = {}
    for match in outside:
        first = last = None
        if match.group("cells"):
            first = int(match.group("first"))
            last = int(match.group("last")) if match.group("last") else first
            if last < first:
                raise InputError(f"@cells {first}-{last} ends before it starts; write the "
                                 f"lower cell first, as in @cells {last}-{first}")  # fmt: skip
        found.setdefault((first, last), NotebookMention(first, last, *match.span()))
    return tuple(found.values())


def notebook_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` mentions the notebook (so ``@name`` mentions leave those alone)."""
    return [match.span() for match in _SPECIAL.finditer(text)]


def _inside(at: int, spans: list[tuple[int, int]]) -> bool:
    return any(low <= at < high for low, high in spans)
