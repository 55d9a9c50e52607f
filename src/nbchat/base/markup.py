"""The one door through which model and endpoint text becomes what a person sees.

Answers, reasoning, titles, tool names and arguments, error bodies and model
names are *data*: JupyterLab does not sanitize the outputs of cells the person
ran, so any HTML that reaches an output runs in the page. Every surface (the
cell, ``--show``/``--list``/``--search``, the panel, prompts, exports) builds
what it shows from the pieces here, and nothing else makes HTML:

:func:`markdown`
    Markdown parsed by comrak (compiled) with raw HTML shown as text, code
    highlighted through :func:`code`, math kept for MathJax (``_markdown``),
    then an allowlist sanitizer (nh3): only
    the tags and attributes in :data:`TAGS` / :data:`ATTRIBUTES`, only
    ``http(s)``/``mailto`` links, images shown as links (a remote image would
    load, and leak, without a click).
:func:`text`, :func:`code`, :func:`details`, :func:`join`
    Escaped plain text, highlighted code with every line visible, a collapsed
    block, and a concatenation of pieces already made safe.
:func:`bundle`
    The mimebundle a display shows: the HTML (with the small stylesheet the
    pieces need) and a ``text/plain`` twin for terminals and diffs.
:func:`fence`, :func:`markdown_source`
    For Markdown that nbchat writes to files: a code fence longer than any
    backtick run inside, and model Markdown with its raw HTML neutralised.

>>> str(markdown("**hi** <img src=x onerror=alert(1)>"))
'<p><strong>hi</strong> &lt;img src=x onerror=alert(1)&gt;</p>\\n'
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable

import nh3
from markdown_it import MarkdownIt
from pygments.token import STANDARD_TYPES

from . import _highlight, _markdown, _visible
from ._visible import escape_hidden, for_terminal

__all__ = [
    "SafeHTML",
    "approval",
    "bundle",
    "code",
    "code_inline",
    "details",
    "element",
    "escape_hidden",
    "escape_inline",
    "fence",
    "for_terminal",
    "hidden_summary",
    "join",
    "markdown",
    "marked",
    "markdown_source",
    "sanitize",
    "styled",
    "table",
    "text",
]

# Marks from the WGL4 set, which every font draws: no output shows an empty box
# where no emoji font is installed (Debian's Chromium, many hub images).
MARK_TOOL = "►"
MARK_WAITING = "○"
MARK_STOPPED = "■"
MARK_PROBLEM = "‼"
MARK_QUESTION = "?"
MARK_CUT = "…"

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt",
    "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s",
    "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
})
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "details": {"open"}}
ALIGN = {"th": {"align": {"left", "right", "center"}}, "td": {"align": {"left", "right", "center"}}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
_TOKEN_CLASSES = frozenset(c for c in STANDARD_TYPES.values() if c)
CLASSES = {
    "span": _TOKEN_CLASSES | {"math", "mathjax_process", "tex2jax_process", "nbchat-dim",
                              "nbchat-error", "nbchat-ok", "nbchat-name", "nbchat-hidden",
                              "nbchat-line"},
    "div": frozenset({"math", "mathjax_process", "tex2jax_process", "nbchat-answer",
                      "nbchat-block", "nbchat-note", "nbchat-tool", "nbchat-error",
                      "nbchat-reason", "nbchat-approval", "mathjax_ignore", "tex2jax_ignore"}),
    "pre": frozenset({"nbchat-code", "nbchat-lines"}),
    "p": frozenset({"nbchat-note", "nbchat-error", "nbchat-dim", "nbchat-warning"}),
    "details": frozenset({"nbchat-reasoning", "nbchat-ran"}),
}
# Only our own rules, scoped to our outputs; colours from JupyterLab's theme variables.
STYLE = """<style>
.nbchat-md pre.nbchat-code{white-space:pre;overflow-x:auto;padding:6px 8px;
 background:var(--jp-cell-editor-background,#f7f7f7);border-radius:3px}
.nbchat-md .nbchat-dim,.nbchat-md .nbchat-note{color:var(--jp-ui-font-color2,#666)}
.nbchat-md .nbchat-error{color:var(--jp-error-color1,#d32f2f)}
.nbchat-md .nbchat-ok{color:var(--jp-success-color1,#388e3c)}
.nbchat-md details.nbchat-reasoning{color:var(--jp-ui-font-color2,#666)}
.nbchat-md details.nbchat-ran>summary{color:var(--jp-ui-font-color2,#666)}
.nbchat-md .k,.nbchat-md .kn,.nbchat-md .kc,.nbchat-md .kd,.nbchat-md .kr,.nbchat-md .ow
{color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold}
.nbchat-md .s,.nbchat-md .s1,.nbchat-md .s2,.nbchat-md .sd,.nbchat-md .sa,.nbchat-md .si
{color:var(--jp-mirror-editor-string-color,#ba2121)}
.nbchat-md .c,.nbchat-md .c1,.nbchat-md .cm,.nbchat-md .ch
{color:var(--jp-mirror-editor-comment-color,#408080);font-style:italic}
.nbchat-md .m,.nbchat-md .mi,.nbchat-md .mf{color:var(--jp-mirror-editor-number-color,#080)}
.nbchat-md .nb,.nbchat-md .bp{color:var(--jp-mirror-editor-builtin-color,#008000)}
.nbchat-md .nf,.nbchat-md .nc{color:var(--jp-mirror-editor-def-color,#00f)}
.nbchat-md .o{color:var(--jp-mirror-editor-operator-color,#aa22ff)}
.nbchat-md .nbchat-hidden{color:var(--jp-error-color1,#d32f2f);
 background:var(--jp-error-color3,#ffcdd2);border-radius:2px;font-weight:bold;
 white-space:nowrap;word-break:keep-all}
.nbchat-md .nbchat-warning{color:var(--jp-error-color1,#d32f2f);font-weight:bold}
.nbchat-md .math{display:inline-block;max-width:100%;contain:paint}
.nbchat-md div.math{display:block;overflow-x:auto;overflow-y:hidden}
.nbchat-md .nbchat-approval{contain:paint;max-width:100%}
.nbchat-md .nbchat-approval pre.nbchat-lines{max-height:70vh;overflow-y:auto}
.nbchat-md .nbchat-approval pre,.nbchat-md .nbchat-approval code{white-space:pre-wrap!important;
 overflow-wrap:anywhere!important;word-break:break-all!important;overflow-x:visible!important}
.nbchat-md pre.nbchat-lines{counter-reset:nbchat-line;padding-left:3.6em}
.nbchat-md .nbchat-lines .nbchat-line{display:block;counter-increment:nbchat-line;
 position:relative;min-height:1.2em}
.nbchat-md .nbchat-lines .nbchat-line::before{content:counter(nbchat-line);position:absolute;
 left:-3.3em;width:2.6em;text-align:right;color:var(--jp-ui-font-color3,#999);
 user-select:none}
</style>"""


# MathJax typesets only the math spans the renderer made (each clipped to its own box),
# never the rest of an output: text quoted from the model cannot become a painted box.
# While an answer streams not even those: it is typeset once, by its final render.
ROOT_CLASSES = "nbchat-md mathjax_ignore tex2jax_ignore"
MATH_CLASSES = _markdown.MATH_CLASSES


class SafeHTML(str):
    """HTML made by this module: escaped or sanitized, safe to show as it is."""

    __slots__ = ()


# ---------------------------------------------------------------- Markdown


@functools.lru_cache(maxsize=1)
def _cleaner() -> nh3.Cleaner:
    return nh3.Cleaner(
        tags=set(TAGS), attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        tag_attribute_values={k: {a: set(v) for a, v in d.items()} for k, d in ALIGN.items()},
        allowed_classes={k: set(v) for k, v in CLASSES.items()},
        url_schemes=set(URL_SCHEMES), url_relative="deny", strip_comments=True,
        clean_content_tags={"script", "style"}, link_rel="noopener noreferrer nofollow",
    )  # fmt: skip


def sanitize(fragment: str) -> SafeHTML:
    """``fragment`` with everything outside the allowlist removed."""
    return SafeHTML(_cleaner().clean(fragment))


def markdown(source: str) -> SafeHTML:
    """Model Markdown as sanitized HTML: raw HTML shows as text, links only http(s)/mailto.

    The text is rendered a top-level block at a time, each block cached, so a
    streaming answer re-rendered as it grows costs only its newest block.
    """
    if not source:
        return SafeHTML("")
    return SafeHTML("".join(_block_html(block) for block in _blocks(source)))


@functools.lru_cache(maxsize=2048)
def _block_html(block: str) -> str:
    return _INLINE_CODE.sub(_marked_inline, _markdown.render(block, code, _cleaner().clean))


# Inline code in an answer is code too: its hidden characters are marked, as in blocks.
_INLINE_CODE = re.compile(r"<code>([^<]*)</code>")


def _marked_inline(match: re.Match[str]) -> str:
    inner = match.group(1)
    if next(_visible.hidden_in(html.unescape(inner)), None) is None:
        return match.group(0)
    return f"<code>{marked(html.unescape(inner))}</code>"


def _blocks(source: str) -> list[str]:
    """``source`` cut at blank lines that end a top-level block (never inside a fence)."""
    lines = _newlines(source).split("\n")
    blocks: list[str] = []
    start, fence_mark = 0, ""
    for index, line in enumerate(lines):
        opened = _markdown.FENCE.match(line)
        if fence_mark:
            fence_mark = "" if _markdown.closes_fence(fence_mark, line) else fence_mark
            continue
        if opened:
            fence_mark = opened.group(1)
            continue
        if line.strip() or index + 1 >= len(lines) or index == start:
            continue
        following = lines[index + 1]
        if following.strip() and not following[0].isspace() and following.strip() != "$$":
            blocks.append("\n".join(lines[start:index]))
            start = index + 1
    blocks.append("\n".join(lines[start:]))
    return [block.rstrip("\n") for block in blocks if block.strip()]


def _newlines(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------- pieces


def text(value: str, *, cls: str | None = None, block: bool = False) -> SafeHTML:
    """``value`` as escaped text, in a ``<span>`` (or a ``<p>`` with ``block``) of class ``cls``."""
    escaped = html.escape(str(value)).replace("\n", "<br>\n")
    tag = "p" if block else "span"
    if cls is None and not block:
        return SafeHTML(escaped)
    attr = f' class="{html.escape(cls)}"' if cls else ""
    return SafeHTML(f"<{tag}{attr}>{escaped}</{tag}>")


def element(tag: str, body: SafeHTML | str = "", *, cls: str | None = None) -> SafeHTML:
    """``body`` (text is escaped; pieces from here are kept) inside an allowed ``tag``."""
    if tag not in TAGS:
        raise ValueError(f"{tag!r} is not a tag nbchat shows")
    inner = body if isinstance(body, SafeHTML) else text(body)
    attr = f' class="{html.escape(cls)}"' if cls else ""
    return SafeHTML(f"<{tag}{attr}>{inner}</{tag}>")


def code_inline(value: str) -> SafeHTML:
    """``value`` as inline code, escaped, its hidden characters marked."""
    return SafeHTML(f"<code>{marked(value)}</code>")


def table(head: Iterable[str], rows: Iterable[Iterable[SafeHTML | str]]) -> SafeHTML:
    """A table: ``head`` as escaped text, each cell escaped unless it is a piece from here."""
    heads = "".join(str(element("th", cell)) for cell in head)
    body = "".join(
        "<tr>" + "".join(str(element("td", cell)) for cell in row) + "</tr>\n" for row in rows
    )
    return SafeHTML(
        f"<table>\n<thead><tr>{heads}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"
    )


def code(source: str, language: str | None = "python") -> SafeHTML:
    """``source`` highlighted and escaped, every line shown, hidden characters marked.

    A character that draws nothing or reorders the text around it (see
    :func:`approval`) is drawn as its escape in a marked span, so what a
    person reads, copies or inserts is what the code holds.
    """
    return _code(source, language or None)


@functools.lru_cache(maxsize=1024)
def _code(source: str, language: str | None) -> SafeHTML:
    # Cached: a streaming answer shows the same finished code blocks at every update.
    body = _highlighted(source, language)
    return SafeHTML(f'<pre class="nbchat-code"><code>{body}</code></pre>\n')


def _highlighted(source: str, language: str | None) -> str:
    """``source`` as highlighted HTML, its hidden characters marked where they stood."""
    marked, hidden = _stand_in(source)
    body = _highlight.highlight(marked, language)
    return _mark(body, hidden) if hidden else body


_TRAILING_BREAKS = re.compile(r"(?:\r?\n)+\Z")
_STAND_IN = "\ufdd0"  # a noncharacter, itself hidden: the source never holds it unmarked


def _stand_in(source: str) -> tuple[str, list[str]]:
    """``source`` with each hidden character replaced by the stand-in, and the characters."""
    hidden: list[str] = []
    parts = []
    for run, is_hidden in _visible.split_hidden(source):
        if is_hidden:
            hidden.append(run)
            parts.append(_STAND_IN)
        else:
            parts.append(run)
    return "".join(parts), hidden


def _mark(body: str, hidden: list[str]) -> str:
    chars = iter(hidden)
    return re.sub(_STAND_IN, lambda _: _hidden_span(next(chars)), body)


def _hidden_span(char: str) -> str:
    return f'<span class="nbchat-hidden">{html.escape(_visible.escape(char))}</span>'


def marked(value: str) -> SafeHTML:
    """``value`` as escaped text with its hidden characters marked (a question awaiting a yes)."""
    return SafeHTML("".join(_hidden_span(run) if is_hidden else html.escape(run)
                            for run, is_hidden in _visible.split_hidden(str(value))))


def approval(source: str, language: str | None = "python", *, lead: str = "This code holds",
             note: str = "") -> SafeHTML:
    """Code or arguments awaiting a yes, drawn so that what is seen is what runs.

    Every line numbered and wrapped (nothing runs off the edge), hidden
    characters marked with a warning line naming them, nothing typeset as
    math (``note``, the reason, is often quoted from the code), and nothing
    inside able to paint outside its box.
    """
    source = _TRAILING_BREAKS.sub("", source)
    lines = _highlighted(source, language).rstrip("\n").split("\n")
    # Each line a block of its own: a copied selection gets one line break per line.
    numbered = "".join(f'<span class="nbchat-line">{line}</span>' for line in lines)
    parts = [SafeHTML(f'<pre class="nbchat-code nbchat-lines"><code>{numbered}</code></pre>\n')]
    warning = _visible.summary(source, lead=lead)
    if warning:
        parts.append(text(f"{MARK_PROBLEM} {warning}", cls="nbchat-warning", block=True))
    if note:
        parts.append(element("p", marked(note), cls="nbchat-dim"))
    return element("div", join(parts), cls="nbchat-approval mathjax_ignore tex2jax_ignore")


def hidden_summary(source: str, *, lead: str = "This code holds", escaped: bool = False) -> str:
    """The warning line :func:`approval` shows for ``source``, as text; "" if it has none."""
    return _visible.summary(source, lead=lead, escaped=escaped)


def details(summary: str, body: SafeHTML, *, cls: str = "nbchat-reasoning",
            is_open: bool = False) -> SafeHTML:
    """A collapsed block: ``summary`` as escaped text, ``body`` (already safe) inside."""
    opened = " open" if is_open else ""
    return SafeHTML(
        f'<details class="{html.escape(cls)}"{opened}><summary><i>{html.escape(summary)}'
        f"</i></summary>\n{body}</details>\n"
    )


def join(parts: Iterable[SafeHTML], separator: str = "\n") -> SafeHTML:
    """Pieces made by this module, one after another."""
    pieces = [part for part in parts if part]
    for part in pieces:
        if not isinstance(part, SafeHTML):
            raise TypeError(f"join takes pieces made by markup, not {type(part).__name__}")
    return SafeHTML(separator.join(pieces))


def styled(body: SafeHTML, *, typeset: bool = True) -> str:
    """``body`` with the stylesheet its pieces need: what an HTML widget's value is set to.

    With ``typeset=False`` the math stays as written (no class lets MathJax
    in): JupyterLab typesets an output each time it is replaced, so an answer
    re-shown as it streams is typeset once, by its final render.
    """
    if not isinstance(body, SafeHTML):
        raise TypeError("styled takes HTML made by nbchat.base.markup")
    if not body:
        return ""
    if typeset:
        return f'{STYLE}<div class="{ROOT_CLASSES}">{body}</div>'
    inert = body.replace(f'class="{MATH_CLASSES}"', 'class="math"')
    return f'{STYLE}<div class="{ROOT_CLASSES}">{inert}</div>'


def bundle(body: SafeHTML, plain: str, *, typeset: bool = True) -> dict[str, str]:
    """What a display shows: ``body`` as HTML (with our stylesheet) and ``plain`` as text.

    ``plain`` is what terminals, consoles and diffs show: its control
    characters are written as escapes (:func:`for_terminal`).
    """
    return {"text/html": styled(body, typeset=typeset) or "", "text/plain": for_terminal(plain)}


# ---------------------------------------------------------------- Markdown files


_BACKTICKS = re.compile(r"`+")
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~!&$])")


def fence(body: str, info: str = "") -> str:
    """``body`` as a fenced code block no backtick run inside can close (CommonMark)."""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    marks = "`" * max(3, longest + 1)
    info = info if "`" not in info else ""
    return f"{marks}{info}\n{body.rstrip(chr(10))}\n{marks}"


def escape_inline(value: str) -> str:
    """``value`` as one line of Markdown that renders as exactly that text (controls escaped)."""
    return _INLINE_SPECIAL.sub(r"\\\1", " ".join(for_terminal(str(value)).split()))


def markdown_source(source: str) -> str:
    """Model Markdown for a file: the same Markdown, its raw HTML shown as text.

    ``<`` outside code becomes ``&lt;``; if the parser still finds raw HTML
    (an edge of the code-span rules), every ``<`` is escaped instead. Control
    characters are written as escapes (:func:`for_terminal`): a file is read
    in terminals too.
    """
    source = for_terminal(_newlines(source))
    defanged = _defang(source)
    if _has_raw_html(defanged):
        defanged = source.replace("&", "&amp;").replace("<", "&lt;")
    return defanged


@functools.lru_cache(maxsize=1)
def _html_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _has_raw_html(source: str) -> bool:
    for token in _html_parser().parse(source):
        if token.type == "html_block":
            return True
        if any(child.type == "html_inline" for child in token.children or ()):
            return True
    return False


def _defang(source: str) -> str:
    source = _newlines(source)
    lines = source.split("\n")
    in_code = [False] * len(lines)
    for token in _html_parser().parse(source):
        if token.type in ("fence", "code_block") and token.map:
            for number in range(*token.map):
                in_code[number] = True
    out = [line if is_code else _defang_line(line)
           for line, is_code in zip(lines, in_code, strict=True)]
    return "\n".join(out)


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def _defang_line(line: str) -> str:
    pieces, at = [], 0
    for match in _CODE_SPAN.finditer(line):
        pieces.append(line[at:match.start()].replace("<", "&lt;"))
        pieces.append(match.group(0))
        at = match.end()
    pieces.append(line[at:].replace("<", "&lt;"))
    return "".join(pieces)
