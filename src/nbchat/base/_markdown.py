"""One block of model Markdown as HTML, before the sanitizer: the parser and what follows it.

The parser is comrak (CommonMark and GitHub's tables and strikethrough,
compiled) with raw HTML *escaped*, so it shows as text, and with its dollar
math (Pandoc's rules: ``$5 and $10`` stays prices, ``$…$`` in code stays
code). What comrak writes is then made into what nbchat shows: math as
MathJax's ``$…$`` inside ``<span class="math">`` or ``<div class="math">``,
code blocks through the ``code`` callback (the one highlighter), images as
links. Only :mod:`nbchat.base.markup` calls this, and it sanitizes the result.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable
from typing import Any

import comrak

# The classes of a math element: MathJax, kept out of the rest of an output, typesets these.
MATH_CLASSES = "math mathjax_process tex2jax_process"
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CodeRenderer = Callable[[str, "str | None"], str]

_CODE_BLOCK = re.compile(r'<pre><code(?: class="language-([^"]*)")?>([^<]*)</code></pre>\n')
_IMAGE = re.compile(r'<img src="([^"]*)" alt="([^"]*)"(?: title="[^"]*")? />')
_MARKS = [chr(point) for point in range(0xE000, 0xE100)]  # private use: not in answers
_MATH = re.compile(r'(<p>)?<span data-math-style="(inline|display)">([^<]*)</span>(?(1)</p>)')


@functools.lru_cache(maxsize=1)
def _options() -> dict[str, Any]:
    extensions = comrak.ExtensionOptions()
    extensions.table = extensions.strikethrough = extensions.math_dollars = True
    rendering = comrak.RenderOptions()
    rendering.escape = True  # raw HTML as text, never as markup
    return {"extension_options": extensions, "render_options": rendering}


def render(block: str, code: CodeRenderer, clean: Callable[[str], str]) -> str:
    """``block`` (Markdown) as HTML cleaned by ``clean``: math kept, code through ``code``.

    Code blocks are held out of ``clean`` and put back after it: what ``code``
    makes is escaped text in spans (safe as made), and half of the HTML.
    """
    out = comrak.render_markdown(block, **_options())
    if "<img " in out:
        out = _IMAGE.sub(_image, out)
    if "data-math-style" in out:
        out = _MATH.sub(_math, out)
    if "<pre><code" not in out:
        return clean(out)
    mark = next((m for m in _MARKS if m not in block), "")
    if not mark:
        return clean(_CODE_BLOCK.sub(functools.partial(_code_block, code), out))
    held: list[str] = []
    out = clean(_CODE_BLOCK.sub(functools.partial(_hold, code, mark, held), out))
    return re.sub(f"<pre>{mark}(\\d+){mark}</pre>\n?", lambda m: held[int(m[1])], out)


def closes_fence(fence: str, line: str) -> bool:
    """Whether ``line`` closes a code block opened by the run of marks ``fence``."""
    closing = FENCE.match(line)
    return closing is not None and closing.group(1)[0] == fence[0] and \
        len(closing.group(1)) >= len(fence) and not line.strip(" `~")


def _code_block(code: CodeRenderer, match: re.Match[str]) -> str:
    return code(html.unescape(match[2]), html.unescape(match[1] or "") or None)


def _hold(code: CodeRenderer, mark: str, held: list[str], match: re.Match[str]) -> str:
    held.append(_code_block(code, match))
    return f"<pre>{mark}{len(held) - 1}{mark}</pre>\n"


def _image(match: re.Match[str]) -> str:
    return f'<a href="{match[1]}">[image: {match[2] or "image"}]</a>'


def _math(match: re.Match[str]) -> str:
    in_paragraph, style, tex = match[1], match[2], match[3]  # tex is escaped already
    if style == "display":
        return f'<div class="{MATH_CLASSES}">$${tex}$$</div>'
    span = f'<span class="{MATH_CLASSES}">${tex}$</span>'
    return f"<p>{span}</p>" if in_paragraph else span
