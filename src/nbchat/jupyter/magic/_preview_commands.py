"""What is sent: ``%chat --preview`` (the request a question would send, nothing sent) and
``%chat --compact`` (the summary long threads send in place of their oldest turns).

The magic builds the question as for asking (its context, interpolation,
instructions, options) and hands it here instead of to the turn; the engine's
:meth:`~nbchat.engine.chat.Chat.preview` builds the request with the code
that sends it, and :mod:`nbchat.jupyter.cell._preview_view` shows it.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ...base import markup
from ..cell._preview_view import preview_html
from ._context import user_history

PREVIEWABLE = ("ask", "error", "fix", "continue")


def check_preview(form: str, opts: Any) -> None:
    """Refuse ``--preview`` where there is no question to preview, or with what saves."""
    if form not in PREVIEWABLE:
        raise UsageError(f"--preview shows what a question would send; --{form} sends no "
                         f"question: drop --preview")  # fmt: skip
    if opts.set or opts.builtin_tools or opts.window:
        raise UsageError("--preview saves nothing: drop --set, --builtin-tools and --window, "
                         "or save them first with %chat --set …")  # fmt: skip


def show_preview(
    owner: Any, chat: Any, question: str, opts: Any, options: dict[str, Any], items: list[Any]
) -> None:
    """Display the request ``question`` would send in the thread (or history) ``opts`` name."""
    if opts.history is not None:
        history = user_history(owner.shell, opts.history, opts.system)
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


def compact_thread(owner: Any, opts: Any, text: str) -> None:
    """``--compact [-t ID]``: make (or reuse) the summary of the thread's oldest turns."""
    thread = opts.thread if opts.thread is not None else owner.thread_id
    if thread is None:
        raise UsageError("no current thread to compact; say which: %chat -t ID --compact")
    chat = owner.chat
    model = chat.store.get(thread).model
    if chat._is_small(model):
        print(f"{model} is too small to summarise well: thread {thread} drops its oldest "
              f"turns from what is sent instead (the thread keeps them).")  # fmt: skip
        return
    summary = chat.compact(thread)
    if summary is None:
        print(f"Nothing to summarise: thread {thread} fits {model}'s window (or its window "
              f"is unknown, or the model's summary could not be used).")  # fmt: skip
        return
    span = "turn 1" if summary.covers == 1 else f"turns 1–{summary.covers}"
    print(f"Thread {thread}: {span} go as a summary of ~{summary.tokens:,} tokens when they "
          f"do not fit (with ChatMagics.window = 'summarize'); the thread keeps every turn.")
