"""An agent's ``session/update`` notifications as nbchat's turn events.

Every front end already draws these events through the one safe renderer:
message chunks are :class:`TextDelta`, thoughts :class:`ReasoningDelta`
(folded), a tool call a line with its kind, title, places and status
(:class:`ToolCallRequested`, then :class:`ToolResult` with what it showed:
its text, or the diff it made in nbchat's diff form), and the plan one line
that is redrawn in place as a checklist. What an agent sends is bounded
here: an update of 10 MB shows its first characters and says how many were
left out. Nothing of it is ever read as markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...base._visible import escape_hidden
from ...base.events import Event, ReasoningDelta, TextDelta, ToolCallRequested, ToolResult
from ...base.records import ToolCall
from ...context.proposals import unified

SHOWN_MAX = 20_000  # characters of one tool call's output or diff shown
TEXT_MAX = 2_000_000  # characters of the agent's text kept in one turn
TITLE_MAX = 200
PLAN_CALL = "plan"  # the id of the plan's line: redrawn in place
_MARKS = {"completed": "☑", "in_progress": "◐", "pending": "☐"}


@dataclass
class TurnState:
    """What one turn has seen so far: its tools' names, the text kept, the calls in the store."""

    text_size: int = 0
    cut: bool = False
    names: dict[str, str] = field(default_factory=dict)  # tool call id -> its line's name
    calls: list[dict[str, Any]] = field(default_factory=list)  # the audit, for the store


def events_for(update: Any, state: TurnState) -> list[Event]:
    """The events one ``session/update`` stands for (none for what nbchat does not show)."""
    kind = getattr(update, "session_update", "")
    if kind == "agent_message_chunk":
        return _text(_block_text(update.content), state)
    if kind == "agent_thought_chunk":
        return [ReasoningDelta(_bounded(_block_text(update.content), SHOWN_MAX))]
    if kind in ("tool_call", "tool_call_update"):
        return _tool(update, state)
    if kind == "plan":
        return [_plan(update)]
    return []


def _text(text: str, state: TurnState) -> list[Event]:
    if state.cut or not text:
        return []
    room = TEXT_MAX - state.text_size
    if len(text) > room:
        state.cut = True
        text = text[:room] + f"\n\n… (the agent wrote more than {TEXT_MAX:,} characters; " \
                             "the rest is left out)"
    state.text_size += len(text)
    return [TextDelta(text)]


def _tool(update: Any, state: TurnState) -> list[Event]:
    call_id = str(update.tool_call_id)[:100]
    name = state.names.get(call_id)
    if name is None or getattr(update, "title", None):
        name = _name(update)
        state.names[call_id] = name
    call = ToolCall(call_id, name, _arguments(update))
    status = getattr(update, "status", None)
    shown = _shown(getattr(update, "content", None))
    entry = {"id": call_id, "name": name, "status": status or "pending"}
    _remember(state, entry)
    if status in ("completed", "failed"):
        output = shown or f"({status})"
        return [ToolResult(call, output, is_error=status == "failed", shown=shown)]
    return [ToolCallRequested(call)]


def _remember(state: TurnState, entry: dict[str, Any]) -> None:
    for known in state.calls:
        if known["id"] == entry["id"]:
            known.update(entry)
            return
    state.calls.append(entry)


def _name(update: Any, *, kind: bool = True) -> str:
    """The tool's line: its kind (unless ``kind`` is false), title and places, every
    character visible."""
    title = " ".join(str(getattr(update, "title", None) or "").split())
    places = [str(getattr(loc, "path", "")) for loc in getattr(update, "locations", None) or ()]
    where = f" ({', '.join(places[:3])}{', …' if len(places) > 3 else ''})" if places else ""
    named = f"{title or 'a tool'}{where}"
    if kind:
        named = f"{getattr(update, 'kind', None) or 'tool'}: {named}"
    return escape_hidden(_bounded(named, TITLE_MAX))


def _arguments(update: Any) -> str:
    raw = getattr(update, "raw_input", None)
    try:
        text = json.dumps(raw if raw is not None else {}, default=str)
    except (TypeError, ValueError):
        text = "{}"
    return text if len(text) <= SHOWN_MAX else json.dumps({"cut": text[:SHOWN_MAX]})


def _shown(content: Any) -> str:
    """What a tool call's content shows: its text, and its diffs in nbchat's unified form."""
    parts: list[str] = []
    for item in content or ():
        kind = getattr(item, "type", "")
        if kind == "diff":
            path = escape_hidden(str(item.path))
            parts.append(unified(item.old_text or "", item.new_text or "", label=path))
        elif kind == "content":
            parts.append(_block_text(item.content))
        elif kind == "terminal":
            parts.append(f"(terminal {escape_hidden(str(item.terminal_id))})")
    return _bounded("\n".join(part for part in parts if part), SHOWN_MAX)


def _plan(update: Any) -> ToolResult:
    lines = [f"{_MARKS.get(str(entry.status), '☐')} {' '.join(str(entry.content).split())}"
             for entry in update.entries]  # fmt: skip
    shown = _bounded(escape_hidden("\n".join(lines)), SHOWN_MAX)
    return ToolResult(ToolCall(PLAN_CALL, "plan"), shown or "(empty plan)", shown=shown)


def _block_text(block: Any) -> str:
    """A content block as text: text as it is; anything else named, never fetched."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind == "resource_link":
        return f"[{block.name}]({block.uri})"
    if kind in ("image", "audio"):
        return f"({kind})"
    if kind == "resource":
        return str(getattr(block.resource, "text", "") or "(a resource)")
    return ""


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit:,} more characters left out)"
