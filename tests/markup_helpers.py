"""Reading what nbchat shows: the HTML of an output, and the text a person sees in it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from nbchat.base import markup

WRAPPER = f'{markup.STYLE}<div class="{markup.ROOT_CLASSES}">'
BLOCKS = frozenset({
    "blockquote", "br", "dd", "details", "div", "dl", "dt", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "li", "ol", "p", "pre", "summary", "table", "tbody", "thead", "tr", "ul",
})
CELLS = frozenset({"td", "th"})


def body(html: str) -> str:
    """The HTML inside nbchat's wrapper: what :func:`nbchat.base.markup.styled` was given."""
    assert html.startswith(WRAPPER) and html.endswith("</div>"), html[:200]
    return html[len(WRAPPER):-len("</div>")]


def visible(html: str) -> str:
    """The text a person sees: no stylesheet, no tags, entities as characters.

    Blocks start new lines, table cells are joined by `` | ``, and outside
    ``<pre>`` whitespace collapses as a browser collapses it; empty lines go.
    """
    reader = _Reader()
    reader.feed(html)
    reader.close()
    lines = (line.strip(" ") if not _pre_line(line) else line.rstrip(" ")
             for line in "".join(reader.parts).split("\n"))
    return "\n".join(line.removeprefix(_PRE) for line in lines if line.removeprefix(_PRE).strip())


def typeset_math(html: str) -> list[str]:
    """The math MathJax would typeset in ``html``, by its rules (JupyterLab's settings).

    A subtree of class ``mathjax_ignore`` is skipped unless an element inside it
    has class ``mathjax_process``; ``pre`` and ``code`` are never looked into.
    """
    finder = _MathFinder()
    finder.feed(html)
    finder.close()
    return finder.found


class _MathFinder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, whether math here is typeset)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr", "img"):
            return
        classes = set((dict(attrs).get("class") or "").split())
        on = self.stack[-1][1] if self.stack else True
        if "mathjax_ignore" in classes:
            on = False
        if "mathjax_process" in classes:
            on = True
        self.stack.append((tag, on and tag not in ("pre", "code", "style", "script")))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if (not self.stack or self.stack[-1][1]) and "$" in data:
            self.found.extend(re.findall(r"\$\$.+?\$\$|\$[^$]+\$", data, re.S))


def shows(data: dict[str, Any]) -> dict[str, Any]:
    """A bundle with its ``text/html`` read as :func:`body`, its other keys as they are."""
    return {key: body(value) if key == "text/html" else value for key, value in data.items()}


_PRE = "\x00"  # marks a line that came from inside <pre>, whose indentation counts


def _pre_line(line: str) -> bool:
    return line.startswith(_PRE)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0
        self.pre = 0
        self.first_cell = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self.skip += 1
        elif tag in BLOCKS:
            self.parts.append("\n")
            if tag == "tr":
                self.first_cell = True
            if tag == "pre":
                self.pre += 1
                self.parts.append(_PRE)
        elif tag in CELLS:
            if not self.first_cell:
                while self.parts and not self.parts[-1].strip():
                    self.parts.pop()  # the markup's own line breaks between cells
                self.parts.append(" | ")
            self.first_cell = False

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self.skip -= 1
        elif tag in BLOCKS:
            if tag == "pre":
                self.pre -= 1
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self.pre:
            self.parts.append(data.replace("\n", "\n" + _PRE))
        else:
            self.parts.append(re.sub(r"\s+", " ", data))
