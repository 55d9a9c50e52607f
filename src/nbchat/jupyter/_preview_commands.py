"""``%chat --preview``: the request a question would send, shown in the cell, nothing sent.

The magic builds the question as for asking (its context, interpolation,
instructions, options) and hands it here instead of to the turn; the engine's
:meth:`~nbchat.engine.chat.Chat.preview` builds the request with the code
that sends it, and :mod:`._preview_view` shows it.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ..base import markup
from ._preview_view import preview_html

PREVIEWABLE = ("ask", "error", "fix", "continue")


def check_preview(form: str, opts: Any) -> None:
    """Refuse ``--preview`` where there is no question to preview, or with what saves."""
    if form not in PREVIEWABLE:
        raise UsageError(f"--preview shows what a question would send; --{form} sends no "
                         f"question: drop --preview")  # fmt: skip
    if opts.set or opts.builtin_tools:
        raise UsageError("--preview saves nothing: drop --set and --builtin-tools, or save "
                         "them first with %chat --set …")  # fmt: skip


def show_preview(
    owner: Any, chat: Any, question: str, opts: Any, options: dict[str, Any], items: list[Any]
) -> None:
    """Display the request ``question`` would send in the thread (or history) ``opts`` name."""
    if opts.history is not None:
        history = owner._user_history(opts.history, opts.system)
        preview = chat.preview_with_history(
            question, history, opts.model, options=options, context=items, mcp=opts.mcp,
            scrubbed=owner._noted,
        )  # fmt: skip
    else:
        fresh = opts.new or opts.system is not None or owner.thread_id is None
        thread = opts.thread if opts.thread is not None else None if fresh else owner.thread_id
        preview = chat.preview(
            thread, question, model=opts.model or (owner.model if fresh else None) or None,
            options=options, context=items, mcp=opts.mcp, system=opts.system or owner.system,
            scrubbed=owner._noted,
        )  # fmt: skip
    body, plain = preview_html(preview)
    display(markup.bundle(body, plain), raw=True, metadata={"nbchat": {"preview": True}})
