"""Project instructions: an ``AGENTS.md`` or ``.nbchat.md`` near the notebook, when you opt in.

With ``%config ChatMagics.instructions = "auto"`` (or ``NBCHAT_INSTRUCTIONS=auto``)
the nearest such file, in the notebook's folder or a parent up to your home
folder, is added to the system prompt of each question, cut to a token
budget, and the cell's context line names it. In one folder ``.nbchat.md``
wins over ``AGENTS.md``.

A file is followed only from folders you own that nobody else may write,
and only if it is yours and nobody else may write it: a shared folder
someone else controls cannot give the model orders. The search stops at
the first folder that fails this.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..base._delimiters import block
from ..base.content import CHARS_PER_TOKEN, fit

__all__ = ["FILE_NAMES", "Instructions", "find_instructions"]

FILE_NAMES = (".nbchat.md", "AGENTS.md")
BUDGET = 2000  # tokens
_PREAMBLE = (
    "The user keeps these project instructions beside their notebook; follow them where "
    "they apply to the question."
)


@dataclass(frozen=True)
class Instructions:
    """The file found and its text, cut to the budget."""

    path: Path
    text: str

    @property
    def summary(self) -> str:
        """How the context line names it: ``instructions: AGENTS.md (~120 tokens)``."""
        return f"instructions: {self.path} (~{len(self.text) // CHARS_PER_TOKEN:,} tokens)"

    def system_text(self) -> str:
        """What joins the system prompt: a preamble, then the file in its own block."""
        return f"{_PREAMBLE}\n{block('context', self.text, source=self.path.name)}"


def find_instructions(
    folder: str | os.PathLike[str], *, stop: str | os.PathLike[str] | None = None,
    budget: int = BUDGET,
) -> Instructions | None:  # fmt: skip
    """The nearest instructions file from ``folder`` up to ``stop`` (default: the home folder).

    Outside ``stop`` the search goes up to the filesystem's root. None when
    no file is found before a folder that is not safely yours.
    """
    here = Path(folder).resolve()
    limit = Path(stop).resolve() if stop is not None else Path.home().resolve()
    for place in [here, *here.parents]:
        if not _is_safe(place, directory=True):
            return None
        for name in FILE_NAMES:
            path = place / name
            if path.is_file() and _is_safe(path, directory=False):
                text = path.read_text(encoding="utf-8", errors="replace").strip()
                return Instructions(path, fit(text, budget)) if text else None
        if place == limit:
            return None
    return None


def _is_safe(path: Path, *, directory: bool) -> bool:
    """Owned by this user (root's own system folders too, for directories) and not writable
    by group or others; a sticky shared folder like /tmp is not."""
    try:
        info = path.stat()
    except OSError:
        return False
    if not hasattr(os, "getuid"):  # Windows: ownership is ACLs; the home folder bounds it
        return True
    owners = {os.getuid(), 0} if directory else {os.getuid()}
    return info.st_uid in owners and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
