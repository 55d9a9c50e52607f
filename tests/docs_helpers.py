"""The code blocks of the documentation pages, and the site's hook modules, for the docs tests.

A fenced block runs unless the line before it is an ``<!-- illustrative: why -->``
comment: Python blocks in an IPython shell against the scripted server, JSON
blocks through ``json.loads`` (and nbchat's MCP configuration reader when they
are an ``mcp.json``). Any other language must be marked.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
ILLUSTRATIVE = re.compile(r"^<!-- illustrative: \S.*-->$")
FENCE = re.compile(r"^(`{3,})(\w*)\s*$")
RUNNABLE = ("python", "json")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, its text, where it starts, and its mark."""

    page: Path
    line: int
    language: str
    code: str
    illustrative: bool

    def __str__(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line} ({self.language or 'no language'})"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i] == opening.group(1))
        marked = index > 0 and bool(ILLUSTRATIVE.match(lines[index - 1]))
        found.append(Block(page, index + 1, opening.group(2), "\n".join(lines[index + 1:end]),
                           marked))
        index = end + 1
    return found


def hook(name: str) -> ModuleType:
    """The site's hook module ``docs/hooks/<name>.py``, imported from its file."""
    path = DOCS / "hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
