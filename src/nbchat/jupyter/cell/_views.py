"""Threads as what a person sees: the ``%chat --list`` table, ``--show`` and ``--export``.

Pure functions from store records to safe HTML (with a plain-text twin) and to
Markdown or notebook JSON for files; everything a model or an endpoint wrote
goes through :mod:`nbchat.base.markup`. The magics and the panel display them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ...base import markup
from ...base.content import context_line
from ...base.markup import SafeHTML
from ...base.records import HOSTED_MODEL
from ...engine._compaction import current_summary
from ...engine._endings import BUDGET_REASON
from ...store.base import SearchHit, Thread, ThreadInfo, Turn

_STATUS_NOTES = {
    "interrupted": "(interrupted)",
    "failed": "(failed{error})",
    "suspended": "(waiting for an answer to a tool call)",
    "streaming": "(still being written, or its writer stopped)",
    "incomplete": "(incomplete: the model stopped before the end{error})",
}
_BUDGET_NOTES = {  # a turn whose finish reason is the budget's
    "incomplete": "(stopped by the budget{error})",
    "suspended": "(waiting: going on would cross a budget; answer yes to go on)",
}


def threads_table(threads: Sequence[ThreadInfo], current: int | None) -> tuple[SafeHTML, str]:
    """The threads as an HTML table and as plain text; ``*`` marks the current one."""
    rows = [
        (f"{t.id}{' *' if t.id == current else ''}", _inline(t.title) or "(untitled)",
         _inline(t.model), str(t.turns), _when(t.updated))
        for t in threads
    ]
    head = ("id", "title", "model", "turns", "updated")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    plain = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    ]
    return markup.table(head, rows), "\n".join(plain)


def search_table(hits: Sequence[SearchHit], text: str) -> tuple[SafeHTML, str]:
    """Search hits as an HTML table (the match in bold) and as plain text."""
    rows, plain = [], []
    for hit in hits:
        before, match, after = hit.snippet_parts(text)
        where = markup.join(
            [markup.text(before), markup.element("strong", match) if match else SafeHTML(""),
             markup.text(after)], "")
        title = _inline(hit.title) or "(untitled)"
        rows.append((str(hit.thread_id), title, str(hit.turn), where))
        plain.append(f"{hit.thread_id:>6}  {title}  turn {hit.turn}: {before}{match}{after}")
    return markup.table(("thread", "title", "turn", "where"), rows), "\n".join(plain)


def answer_markdown(turn: Turn) -> str:
    """A turn's answer as Markdown: its text rounds, each client-tool question and answer.

    Model Markdown, to be shown only through :func:`nbchat.base.markup.markdown`
    (or written to a file through :func:`nbchat.base.markup.markdown_source`).
    """
    answers = {done.call_id: done for done in turn.answered}
    agent = (turn.model or "").startswith(HOSTED_MODEL)  # a hosted agent: what ran is the audit
    names = {call["id"]: call["function"]["name"] for message in turn.messages
             for call in message.get("tool_calls") or () if agent}  # fmt: skip
    parts: list[str] = []
    for message in turn.messages:
        if message.get("role") == "assistant":
            parts.append(str(message.get("content") or "").strip())
        elif message.get("role") == "tool" and message.get("tool_call_id") in answers:
            done = answers[message["tool_call_id"]]
            question = markup.escape_inline(done.question)
            answer = markup.escape_inline(done.shown)
            parts.append(f"> *{question}* → **{answer}**" if question else f"> **{answer}**")
        elif message.get("role") == "tool" and message.get("tool_call_id") in names:
            outcome = str(message.get("content") or "").split("\n", 1)[0]
            name = markup.escape_inline(str(names[message["tool_call_id"]]))
            parts.append(f"> {markup.MARK_TOOL} {name} → {markup.escape_inline(outcome)}")
    text = "\n\n".join(part for part in parts if part)
    # Messages are written when a turn ends; while it streams, only the answer is.
    return text if text and turn.status != "streaming" else turn.answer



Kind = Literal["title", "dim", "label", "markdown", "reasoning"]


@dataclass(frozen=True)
class Part:
    """One piece of a thread's view: what it is and its text (model text stays data)."""

    kind: Kind
    text: str
    label: str = ""


def thread_parts(thread: Thread) -> Iterator[Part]:
    """A thread's conversation, piece by piece: its title, then each question and answer."""
    yield Part("title", _inline(thread.title) or "Untitled")
    yield Part("dim", f"thread {thread.id} · {_inline(thread.model)} · {len(thread.turns)} turns")
    if thread.system:
        yield Part("label", thread.system, "System")
    settings = thread.settings or {}
    if settings.get("options"):
        yield Part("label", _options_line(settings["options"]), "Options")
    if "builtin_tools" in settings:
        yield Part("label", "on" if settings["builtin_tools"] else "off", "Built-in tools")
    for turn in thread.turns:
        yield Part("label", turn.query, "You")
        if turn.context:
            yield Part("dim", context_line(turn.context))
        if turn.reasoning:
            yield Part("reasoning", turn.reasoning)
        answer = answer_markdown(turn)
        yield Part("markdown", answer) if answer else Part("dim", "(no answer)")
        note = _STATUS_NOTES.get(turn.status)
        if turn.finish_reason == BUDGET_REASON and turn.status in _BUDGET_NOTES:
            note = _BUDGET_NOTES[turn.status]
        if note:
            reason = turn.error or (f"finish reason {turn.finish_reason}"
                                    if turn.status == "incomplete" and turn.finish_reason else "")
            yield Part("dim", note.format(error=f": {_inline(reason)}" if reason else ""))


def thread_html(thread: Thread) -> tuple[SafeHTML, str]:
    """A thread's conversation as safe HTML and as plain text (``%chat --show``).

    A current summary of its first turns (what a long thread sends in their place)
    shows folded under the title; the turns themselves all show, as exports have them.
    """
    parts = list(thread_parts(thread))
    html = [_part_html(part) for part in parts]
    plain = [_plain(part) for part in parts]
    summary = current_summary(thread, len(thread.turns))
    if summary is not None:
        span = "turn 1" if summary.covers == 1 else f"turns 1–{summary.covers}"
        note = f"Summary of {span}, sent in their place when the thread outgrows the window"
        html.insert(1, markup.details(note, markup.markdown(summary.text), cls="nbchat-summary"))
        plain.insert(1, f"[{note}]\n{summary.text}")
    return markup.join(html), "\n\n".join(plain)


def _part_html(part: Part) -> SafeHTML:
    """One piece of a thread's view as safe HTML."""
    if part.kind == "title":
        return markup.element("h3", part.text)
    if part.kind == "dim":
        return markup.text(part.text, cls="nbchat-dim", block=True)
    if part.kind == "label":
        return markup.element("p", markup.join(
            [markup.element("strong", f"{part.label}:"), markup.text(part.text)], " "))
    if part.kind == "reasoning":
        return markup.details("Thought", markup.markdown(part.text))
    return markup.markdown(part.text)


def thread_markdown(thread: Thread) -> str:
    """A thread's conversation as Markdown for a file: model text with its raw HTML disarmed."""
    return "\n\n".join(_part_markdown(part) for part in thread_parts(thread))


def _part_markdown(part: Part) -> str:
    if part.kind == "title":
        return f"### {markup.escape_inline(part.text)}"
    if part.kind == "dim":
        return f"_{markup.escape_inline(part.text)}_"
    if part.kind == "label":
        return f"**{part.label}:** {markup.markdown_source(part.text)}"
    if part.kind == "reasoning":
        quoted = "\n".join(f"> {line}" if line.strip() else ">"
                           for line in markup.markdown_source(part.text).strip().splitlines())
        return f"<details><summary><i>Thought</i></summary>\n\n{quoted}\n\n</details>"
    return markup.markdown_source(part.text)


def _plain(part: Part) -> str:
    return f"{part.label}: {part.text}" if part.kind == "label" else part.text


def _options_line(options: dict[str, Any]) -> str:
    return ", ".join(f"{key}={json.dumps(value)}" for key, value in sorted(options.items()))


def thread_notebook(thread: Thread) -> dict[str, Any]:
    """A thread as an nbformat 4.5 notebook: one Markdown cell per query and per answer."""
    title = markup.escape_inline(thread.title or "Untitled")
    cells = [_cell(f"# {title}", thread.id, None, "title")]
    for index, turn in enumerate(thread.turns):
        shown = (f"\n\n_{markup.escape_inline(context_line(turn.context))}_"
                 if turn.context else "")
        query = markup.markdown_source(turn.query)
        cells.append(_cell(f"**You:** {query}{shown}", thread.id, index, "user"))
        answer = markup.markdown_source(answer_markdown(turn)) or "_(no answer)_"
        cells.append(_cell(answer, thread.id, index, "assistant"))
    return {
        "cells": cells,
        "metadata": {"nbchat": {"thread": thread.id, "model": thread.model}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def thread_json(thread: Thread) -> str:
    return json.dumps(thread_notebook(thread), indent=1, ensure_ascii=False) + "\n"


def models_list(models: Sequence[str], default: str | None) -> tuple[SafeHTML, str]:
    """The endpoint's models as an HTML list and as plain text."""
    marks = [f"{m} (default)" if m == default else m for m in models]
    if not marks:
        return markup.text("the endpoint lists no models", cls="nbchat-dim", block=True), (
            "the endpoint lists no models")
    items = markup.join(markup.element("li", markup.code_inline(mark)) for mark in marks)
    return markup.element("ul", items), "\n".join(marks)


def grouped_models_list(groups: Sequence[Any], default: str | None) -> tuple[SafeHTML, str]:
    """Each connected endpoint's models (``EndpointModels``), under its name, as HTML and text."""
    parts, plain = [], []
    for group in groups:
        body, text = models_list(group.models, default)
        if group.error:
            body, text = markup.text(group.error, cls="nbchat-dim", block=True), group.error
        parts.append(markup.join([markup.element("div", markup.element("b", group.label)),
                                  body]))  # fmt: skip
        plain.append(f"{group.label}:\n" + "\n".join(f"  {line}" for line in text.splitlines()))
    return markup.join(parts), "\n".join(plain)


def _cell(source: str, thread: int, turn: int | None, role: str) -> dict[str, Any]:
    suffix = "title" if turn is None else f"{turn}-{role}"
    return {
        "cell_type": "markdown",
        "id": f"nbchat-{thread}-{suffix}",
        "metadata": {"nbchat": {"thread": thread, "turn": turn, "role": role}},
        "source": source,
    }


def _inline(text: str) -> str:
    return " ".join(str(text).split())


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else ""


def reasoning_html(text: str, *, done: bool) -> SafeHTML:
    """The model's thinking as a collapsed, dimmed block."""
    return markup.details("Thought" if done else "Thinking…", markup.markdown(text.strip()))
