"""Threads as text: the ``%chat --list`` table, ``--show`` and the ``--export`` formats.

Pure functions from store records to strings and notebook JSON; the magics
display or write them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from .context import context_line
from .store import SearchHit, Thread, ThreadInfo, Turn

_STATUS_NOTES = {
    "interrupted": "_(interrupted)_",
    "failed": "_(failed{error})_",
    "suspended": "_(waiting for an answer to a tool call)_",
    "streaming": "_(still being written, or its writer stopped)_",
    "incomplete": "_(incomplete: the model stopped before the end{error})_",
}


def threads_table(threads: Sequence[ThreadInfo], current: int | None) -> tuple[str, str]:
    """The threads as a Markdown table and as plain text; ``*`` marks the current one."""
    rows = [
        (f"{t.id}{' *' if t.id == current else ''}", t.title or "(untitled)", t.model,
         str(t.turns), _when(t.updated))
        for t in threads
    ]
    head = ("id", "title", "model", "turns", "updated")
    markdown = [_md_row(head), "|" + "---|" * len(head)] + [_md_row(r) for r in rows]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    plain = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    ]
    return "\n".join(markdown), "\n".join(plain)


def search_table(hits: Sequence[SearchHit], text: str) -> tuple[str, str]:
    """Search hits as a Markdown table (the match in bold) and as plain text."""
    rows = [(str(h.thread_id), h.title or "(untitled)", str(h.turn), h.snippet(text)) for h in hits]
    head = ("thread", "title", "turn", "where")
    markdown = [_md_row(head), "|" + "---|" * len(head)] + [_md_row(r) for r in rows]
    plain = [f"{t:>6}  {title}  turn {turn}: {where.replace('**', '')}"
             for t, title, turn, where in rows]  # fmt: skip
    return "\n".join(markdown), "\n".join(plain)


def answer_markdown(turn: Turn) -> str:
    """A turn's answer: its text rounds, with each client-tool question and the person's answer."""
    answers = {done.call_id: done for done in turn.answered}
    parts: list[str] = []
    for message in turn.messages:
        if message.get("role") == "assistant":
            parts.append(str(message.get("content") or "").strip())
        elif message.get("role") == "tool" and message.get("tool_call_id") in answers:
            done = answers[message["tool_call_id"]]
            question = " ".join(done.question.split())
            answer = _markdown_escaped(_inline(done.shown))
            parts.append(f"> *{question}* → **{answer}**" if question else f"> **{answer}**")
    text = "\n\n".join(part for part in parts if part)
    # Messages are written when a turn ends; while it streams, only the answer is.
    return text if text and turn.status != "streaming" else turn.answer


def thread_markdown(thread: Thread) -> str:
    """A thread's conversation: its title, then each question and answer."""
    parts = [f"### {_inline(thread.title or 'Untitled')}",
             f"_thread {thread.id} · {_inline(thread.model)} · {len(thread.turns)} turns_"]
    if thread.system:
        parts.append(f"**System:** {thread.system}")
    settings = thread.settings or {}
    if settings.get("options"):
        parts.append(f"**Options:** {_options_line(settings['options'])}")
    if "builtin_tools" in settings:
        parts.append(f"**Built-in tools:** {'on' if settings['builtin_tools'] else 'off'}")
    for turn in thread.turns:
        parts.append(f"**You:** {turn.query}")
        if turn.context:
            parts.append(f"_{_inline(context_line(turn.context))}_")
        if turn.reasoning:
            parts.append(reasoning_block(turn.reasoning, done=True))
        parts.append(answer_markdown(turn) or "_(no answer)_")
        note = _STATUS_NOTES.get(turn.status)
        if note:
            reason = turn.error or (f"finish reason {turn.finish_reason}"
                                    if turn.status == "incomplete" and turn.finish_reason else "")
            parts.append(note.format(error=f": {_inline(reason)}" if reason else ""))
    return "\n\n".join(parts)


def _options_line(options: dict[str, Any]) -> str:
    return ", ".join(f"`{key}={json.dumps(value)}`" for key, value in sorted(options.items()))


def thread_notebook(thread: Thread) -> dict[str, Any]:
    """A thread as an nbformat 4.5 notebook: one Markdown cell per query and per answer."""
    cells = [_cell(f"# {thread.title or 'Untitled'}", thread.id, None, "title")]
    for index, turn in enumerate(thread.turns):
        shown = f"\n\n_{_inline(context_line(turn.context))}_" if turn.context else ""
        cells.append(_cell(f"**You:** {turn.query}{shown}", thread.id, index, "user"))
        cells.append(_cell(answer_markdown(turn) or "_(no answer)_", thread.id, index, "assistant"))
    return {
        "cells": cells,
        "metadata": {"nbchat": {"thread": thread.id, "model": thread.model}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def thread_json(thread: Thread) -> str:
    return json.dumps(thread_notebook(thread), indent=1, ensure_ascii=False) + "\n"


def models_list(models: Sequence[str], default: str | None) -> tuple[str, str]:
    """The endpoint's models as a Markdown list and as plain text."""
    marks = [f"{m} (default)" if m == default else m for m in models]
    if not marks:
        return "_the endpoint lists no models_", "the endpoint lists no models"
    return "\n".join(f"- `{m}`" for m in marks), "\n".join(marks)


def _cell(source: str, thread: int, turn: int | None, role: str) -> dict[str, Any]:
    suffix = "title" if turn is None else f"{turn}-{role}"
    return {
        "cell_type": "markdown",
        "id": f"nbchat-{thread}-{suffix}",
        "metadata": {"nbchat": {"thread": thread, "turn": turn, "role": role}},
        "source": source,
    }


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_inline(c).replace("|", "\\|") for c in cells) + " |"


def _inline(text: str) -> str:
    return " ".join(str(text).split())


def _markdown_escaped(text: str) -> str:
    for char in "\\`*_[]<>#|":
        text = text.replace(char, "\\" + char)
    return text


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else ""


def reasoning_block(text: str, *, done: bool) -> str:
    """The model's thinking as a collapsed, dimmed block (a quote inside <details>)."""
    summary = "Thought" if done else "Thinking…"
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in text.strip().splitlines())
    return f"<details><summary><i>{summary}</i></summary>\n\n{quoted}\n\n</details>"
