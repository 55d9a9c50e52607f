"""Code as escaped HTML with token classes: Python by one regular expression, the rest by Pygments.

Answers are mostly Python, and Pygments' Python lexer costs about half a
millisecond a block: one compiled pattern does the same job some ten times
faster, with Pygments' class names, so the stylesheet and the allowlist are
those of :mod:`nbchat.base.markup`. Every other language goes to Pygments.
Only :func:`nbchat.base.markup.code` calls this; the output is escaped text
and ``<span class="…">`` elements, nothing else.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import re

from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

PYTHON = frozenset({"python", "py", "python3", "py3", "ipython", "ipython3", "pycon", "sage"})
PLAIN = frozenset({"", "text", "plain", "txt", "none", "output"})

_NAMES = {
    **{word: "k" for word in keyword.kwlist},
    **{word: "k" for word in keyword.softkwlist if word != "_"},
    **{word: "kn" for word in ("import", "from")},
    **{word: "kc" for word in ("True", "False", "None")},
    **{word: "ow" for word in ("and", "or", "not", "in", "is")},
    **{word: "nb" for word in dir(builtins) if not word.startswith("_") and word[0].islower()},
    **{word: "bp" for word in ("self", "cls", "Ellipsis", "NotImplemented")},
}
_DEFINES = {"def": "nf", "class": "nc"}
# Matched in text already escaped (only &, < and > are), so text that is no token
# needs no work; "&lt;" and its kin are operators, never a "&", a name and a ";".
_PYTHON_TOKEN = re.compile(
    r"(?P<c1>#[^\n]*)"
    r"|(?P<s>(?<![\w])(?:[rRbBuUfF]{1,2})?(?:'''[\s\S]*?(?:'''|\Z)|\"\"\"[\s\S]*?(?:\"\"\"|\Z)"
    r"|'(?:\\.|[^'\\\n])*'?|\"(?:\\.|[^\"\\\n])*\"?))"
    r"|\b(?P<define>def|class)(?P<space>\s+)(?P<defined>[^\W\d]\w*)"
    r"|\b(?P<word>" + "|".join(sorted(_NAMES, key=len, reverse=True)) + r")\b"
    r"|(?P<m>(?<![\w.])(?:0[xXoObB][0-9a-fA-F_]+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d+)?j?"
    r"|\.\d[\d_]*(?:[eE][+-]?\d+)?j?))"
    r"|(?P<o>&(?:lt|gt|amp);=?|\*\*=?|//=?|-&gt;|:=|[-+*/%|^~=!@]=?)"
)
_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def highlight(source: str, language: str | None) -> str:
    """``source`` as escaped HTML, its tokens in ``<span class=…>`` when ``language`` is known."""
    name = (language or "").strip().lower()
    if name in PLAIN:
        return source.translate(_ESCAPE)
    if name in PYTHON:
        return _PYTHON_TOKEN.sub(_python_token, source.translate(_ESCAPE))
    return _pygments(source, name)


def _python_token(match: re.Match[str]) -> str:
    kind, token = match.lastgroup, match.group()
    if kind == "word":
        return f'<span class="{_NAMES[token]}">{token}</span>'
    if kind == "defined":
        defines, name = match.group("define"), match.group("defined")
        return (f'<span class="k">{defines}</span>{match.group("space")}'
                f'<span class="{_DEFINES[defines]}">{name}</span>')
    if kind == "s":
        kind = "s2" if token.endswith('"') else "s1"
    return f'<span class="{kind}">{token}</span>'


def _pygments(source: str, name: str) -> str:
    try:
        lexer = get_lexer_by_name(name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return source.translate(_ESCAPE)
    return pygments_highlight(source, lexer, _formatter())


@functools.lru_cache(maxsize=1)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True)
