"""A history as people read it: Markdown for a file, safe HTML for a notebook.

Long text folds into a ``<details>`` block, tool results show their first
lines, tool calls their signature; every piece of message text goes through
the safe renderer (:mod:`nbchat.base.markup`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..base import markup
from ..base.content import context_line
from ..base.events import ToolCall
from ..base.markup import markdown_source as markup_source
from ..base.messages import Message


def transcript_markdown(system: str | None, turns: Sequence[Sequence[Message]]) -> str:
    """The conversation as Markdown; turns are separated by rules."""
    blocks: list[str] = []
    if system:
        blocks += ["**System**", _collapse(_quote(markup_source(system)), system)]
    for i, turn in enumerate(turns):
        if i:
            blocks.append("---")
        for message in turn:
            blocks += _render(message)
    if not turns:
        blocks.append("*No messages yet.*")
    return "\n\n".join(blocks) + "\n"


def transcript_html(system: str | None, turns: Sequence[Sequence[Message]]) -> str:
    """The conversation as HTML for notebooks, through the safe renderer."""
    blocks: list[markup.SafeHTML] = []
    if system:
        blocks += [_label("System"), _folded(markup.element(
            "blockquote", markup.markdown(system)), system)]  # fmt: skip
    for i, turn in enumerate(turns):
        if i:
            blocks.append(markup.element("hr"))
        for message in turn:
            blocks += _render_html(message)
    if not turns:
        blocks.append(markup.element("p", markup.element("em", "No messages yet.")))
    return markup.styled(markup.join(blocks))


_LONG_CHARS = 2000
_LONG_LINES = 40
_RESULT_CHARS = 300
_RESULT_LINES = 5
_ARGS_CHARS = 80
_EMPTY = "*(empty)*"
_EMPTY_HTML = markup.element("p", markup.element("em", "(empty)"))


def _render(message: Message) -> list[str]:
    if message.role == "tool":
        label = "**Tool result**" + (f" {_code(message.name)}" if message.name else "")
        content = markup_source(_preview(message.content))
        return [label, _quote(content) if message.content else _EMPTY]
    label = "**You**" if message.role == "user" else "**Assistant**"
    content = markup_source(message.content)
    body = [_collapse(content, message.content)] if message.content else []
    calls = [f"Tool call: {_code(_signature(call))}" for call in message.tool_calls]
    if message.context:
        calls.append(f"*{markup.escape_inline(context_line(message.context))}*")
    return [label, *(body + calls or [_EMPTY])]


def _render_html(message: Message) -> list[markup.SafeHTML]:
    if message.role == "tool":
        label = _label("Tool result", message.name or "")
        body = markup.element("blockquote", markup.text(_preview(message.content), block=True))
        return [label, body if message.content else _EMPTY_HTML]
    label = _label("You" if message.role == "user" else "Assistant")
    blocks = [_folded(markup.markdown(message.content), message.content)] if message.content else []
    blocks += [markup.element("p", markup.join(
        [markup.text("Tool call:"), markup.code_inline(_signature(call))], " "))
        for call in message.tool_calls]
    if message.context:
        blocks.append(markup.element("p", markup.element("em", context_line(message.context))))
    return [label, *(blocks or [_EMPTY_HTML])]


def _label(text: str, name: str = "") -> markup.SafeHTML:
    parts = [markup.element("strong", text)] + ([markup.code_inline(name)] if name else [])
    return markup.element("p", markup.join(parts, " "))


def _long(text: str) -> str:
    """How long ``text`` is, when it is long enough to fold ("" when not)."""
    lines = text.count("\n") + 1
    if len(text) <= _LONG_CHARS and lines <= _LONG_LINES:
        return ""
    return f"Long text: {lines:,} line{'s' * (lines > 1)}, {len(text):,} characters"


def _collapse(markdown: str, text: str) -> str:
    """``markdown`` folded into a <details> block when ``text`` is long."""
    summary = _long(text)
    if not summary:
        return markdown
    return f"<details><summary>{summary}</summary>\n\n{markdown}\n\n</details>"


def _folded(body: markup.SafeHTML, text: str) -> markup.SafeHTML:
    summary = _long(text)
    return markup.details(summary, body, cls="nbchat-reasoning") if summary else body


def _preview(text: str) -> str:
    """The first few lines of ``text``, saying how much was left out."""
    end = -1
    for _ in range(_RESULT_LINES):
        end = text.find("\n", end + 1)
        if end == -1:
            break
    cut = min(len(text) if end == -1 else end, _RESULT_CHARS)
    if cut >= len(text):
        return text
    return f"{text[:cut].rstrip()}\n… ({len(text) - cut:,} more characters)"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _signature(call: ToolCall) -> str:
    """``name(key=value, ...)`` for JSON-object arguments, else ``name(raw arguments)``."""
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if isinstance(args, dict):
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    else:
        shown = call.arguments
    if len(shown) > _ARGS_CHARS:
        shown = shown[: _ARGS_CHARS - 1] + "…"
    return f"{call.name}({shown})"


def _code(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
