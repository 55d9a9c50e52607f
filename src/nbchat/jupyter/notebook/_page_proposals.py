"""The waiting proposals, drawn in the notebook by the lab extension, and answered there.

The kernel tells the page holding its notebook which cell changes wait for an
answer (``{"op": "proposals", "proposals": [...]}`` on the ``nbchat.notebook``
comm, the whole list each time: after each cell run, after the page says
hello, after an answer). Each carries the cell, the base text, the proposed
text and the chunks as :func:`nbchat.context.proposals.chunks` numbers them,
with their offsets, so the page's diff has the chunks the kernel lands. The
kernel starts telling once it has the notebook tools (the first ``--agent``
question or answer to one): a plain question loads none of this.

While the side panel's model writes an ``edit_cell`` call, the page is sent the
cell's new source as it grows (:mod:`._streamed_proposals`), to draw, not answer.

The page answers ``{"op": "answer", "thread", "call_id", "value"}`` (``value``
as ``%chat --answer`` takes it: ``accept``, ``{"action": "accept", "chunks":
[1, 3]}``, ``reject``). The answer goes through the call's prompt where one is
shown (the cell that asked, or the side panel, which opens on the thread if
need be), so the resumed turn streams where the person expects it, and the
store's claim makes it count once, whichever tab or kernel answers first.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from ...agents.gate import TOOL_PREFIX
from ...base.errors import NbchatError
from ...context.cell_tools import CELL_TOOLS, proposed_text
from ...context.proposals import chunks
from .._loaded import chat_of, notebook_chat_of, on_turn_end, on_turn_events
from ..agents._kernel import is_mine
from ._lab_bridge import NotebookBridge, register_target
from ._streamed_proposals import StreamedEdits

_WATCHED: set[int] = set()
AGENT_TOOLS = tuple(TOOL_PREFIX + tool for tool in ("insert_cell", "edit_cell", "delete_cell",
                                                   "move_cell"))  # fmt: skip


def watch(shell: Any) -> None:
    """Keep this kernel's page told of its proposals, and take the page's answers."""
    if getattr(shell, "kernel", None) is None or id(shell) in _WATCHED:
        return
    _WATCHED.add(id(shell))
    NotebookBridge.on_op("answer", lambda data: _answer(shell, data))
    NotebookBridge.on_op("hello", lambda data: publish(shell))
    shell.events.register("post_run_cell", lambda result: publish(shell))
    on_turn_end(lambda: publish(shell))  # the panel's turns run in no cell
    on_turn_events(lambda: _streamed(shell))  # edits drawn as they are written
    register_target()  # a reloaded page opens its own comm here
    bridge = NotebookBridge.for_kernel()
    if bridge is not None:
        bridge.open()


def waiting(chat: Any) -> list[dict[str, Any]]:
    """The cell changes waiting for an answer, oldest first, as the page draws them."""
    found = []
    here = os.environ.get("JPY_SESSION_NAME", "")
    for call in chat.pending_calls(None):
        extra = dict(call.prompt.extra)
        if call.tool in AGENT_TOOLS:  # an outside agent's change to this kernel's notebook
            if not is_mine(call.arguments.get("notebook")):
                continue
            tool = call.tool.removeprefix(TOOL_PREFIX)
            base = str(call.arguments.get("saved") or "")
            proposed = proposed_text(tool, {"source": call.arguments.get("code")}, base)
            extra["cell_id"] = call.arguments.get("cell_id") or ""
        elif call.tool not in CELL_TOOLS or extra.get("notebook", here) != here:
            continue  # another notebook's proposal: drawn and answered there
        else:
            tool, base = call.tool, str(extra.get("base", ""))
            proposed = proposed_text(tool, call.arguments, base)
        found.append({
            "thread": call.thread_id, "turn": call.turn, "call_id": call.call_id,
            "tool": tool, "cell_id": extra.get("cell_id") or "",
            "index": call.arguments.get("index"),
            "cell_type": call.arguments.get("cell_type") or "code",
            "why": call.prompt.question, "base": base, "proposed": proposed,
            "chunks": [_offsets(chunk, base, proposed) for chunk in chunks(base, proposed)],
        })  # fmt: skip
    return found


def publish(shell: Any) -> None:
    """Send the page the proposals waiting now (nothing when no page holds the notebook)."""
    bridge = NotebookBridge.for_kernel()
    if bridge is None or not bridge.is_attached:
        return
    with contextlib.suppress(Exception):  # a damaged store must not break every cell run
        bridge.notify({"op": "proposals", "proposals": waiting(chat_of(shell))})


def _streamed(shell: Any) -> StreamedEdits | None:
    """What sends a panel's turn's edit calls to the page as they are written.

    Made in a kernel even before a page has answered: the turn that loads the
    notebook tools opens the connection, and the page answers while it streams
    (until then, :meth:`NotebookBridge.notify` drops what is sent).
    """
    bridge = NotebookBridge.for_kernel()
    if bridge is None:
        return None
    return StreamedEdits(bridge.notify, lambda: publish(shell))


def _answer(shell: Any, data: dict[str, Any]) -> None:
    from ..cell.prompts import pending_prompts

    thread, call_id, value = data.get("thread"), data.get("call_id"), data.get("value")
    if not isinstance(thread, int) or not isinstance(call_id, str) or value is None:
        return
    chat = notebook_chat_of(shell)
    prompts = [p for p in pending_prompts(thread) if p.call.call_id == call_id]
    if not prompts:
        from ..panel._side import side_area_unavailable, side_panel

        if side_area_unavailable() is None:  # the thread in the side panel, with its prompts
            side_panel(chat, thread_id=thread)
            prompts = [p for p in pending_prompts(thread) if p.call.call_id == call_id]
    try:
        if prompts:
            prompts[0].submit(value)  # its errors show in the prompt
        else:
            for _ in chat.iter_answer_tool_call(thread, value, call_id=call_id):
                pass
    except NbchatError:
        pass  # already answered, stale (shown again on its new text), another notebook's
    finally:
        publish(shell)


def _offsets(chunk: Any, base: str, proposed: str) -> dict[str, int]:
    """A chunk's number and where it is, in characters of the base and the proposed text."""
    old_lines = base.splitlines(keepends=True)
    new_lines = proposed.splitlines(keepends=True)
    from_a = sum(map(len, old_lines[:chunk.start]))
    from_b = sum(map(len, new_lines[:chunk.new_start]))
    return {"number": chunk.number, "from_a": from_a, "to_a": from_a + sum(map(len, chunk.old)),
            "from_b": from_b, "to_b": from_b + sum(map(len, chunk.new))}  # fmt: skip
