"""The notebook agent's commands: ``--mode`` (what asks) and ``--undo`` (put a turn's cells back).

A thread's mode is kept in its settings (``mode``); a thread without one uses
``ChatMagics.mode``. Either is capped by the administrator
(``NBCHAT_MAX_APPROVAL=always`` turns ``accept-edits`` into ``ask``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ...base.errors import InputError
from ...context.cell_tools import MODES, effective_mode
from .._loaded import asked

if TYPE_CHECKING:
    from .magics import ChatMagics

__all__ = ["current_mode", "fix", "leave_plan", "offer_undo", "set_mode", "undo"]


def current_mode(magics: ChatMagics) -> str:
    """The mode of the thread asked in (the panel's while it asks, else the magics' current
    one): its own, else ``ChatMagics.mode``, as capped."""
    mode = magics.mode
    thread = asked() if asked() is not None else magics.thread_id
    if thread is not None:
        saved = _saved_mode(magics.chat.store, thread)
        mode = saved if saved in MODES else mode
    return effective_mode(mode if mode in MODES else "ask")


_SAVED: dict[tuple[str, int], tuple[object, object]] = {}  # the last read, by its file's stamp


def _saved_mode(store: Any, thread: int) -> object:
    """The thread's saved mode, read again only when the thread was written (every tool of
    a turn asks: one stat each, not one read)."""
    key = (store.location(), thread)
    stamp = store.stamp(thread)
    known = _SAVED.get(key)
    if known is not None and stamp is not None and known[0] == stamp:
        return known[1]
    try:
        saved = (store.get(thread).settings or {}).get("mode")
    except Exception:  # a thread deleted meanwhile: the session's mode
        saved = None
    _SAVED[key] = (stamp, saved)
    return saved


def leave_plan(store: Any, thread: int) -> None:
    """A plan was approved: the thread asks from now on (it was in the plan mode)."""
    settings = dict(store.get(thread).settings or {})
    store.update_thread(thread, settings={**settings, "mode": "ask"})


def set_mode(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --mode MODE``: the current thread's mode from now on (a new thread if none)."""
    mode = opts.mode
    try:
        capped = effective_mode(mode)
    except InputError as error:
        raise UsageError(str(error)) from None
    chat = magics.chat
    thread_id = opts.thread if opts.thread is not None else magics.thread_id
    if thread_id is None:
        thread_id = magics.thread_id = chat.new_thread(magics.model or None)
    settings = dict(chat.store.get(thread_id).settings or {})
    chat.store.update_thread(thread_id, settings={**settings, "mode": mode})
    note = "" if capped == mode else \
        f" (the administrator's NBCHAT_MAX_APPROVAL caps it: it acts as {capped})"  # fmt: skip
    print(f"Thread {thread_id} is in {mode} mode{note}. " + _MEANS[capped])


_MEANS = {
    "ask": "Every change to the notebook, and every run, waits for your answer.",
    "plan": "The model reads and proposes a numbered plan; no tool that changes the notebook "
            "is offered until you approve it (then the thread is in ask mode).",
    "accept-edits": "Changes land as proposed and stay undoable (%chat --undo); running a "
                    "cell or code still asks.",
}


def undo(magics: ChatMagics, opts: Any, text: str) -> None:
    """``%chat --undo [TURN]``: put back the cells a turn (the last that changed any) changed."""
    from ..notebook._undo import undo_here

    thread_id = opts.thread if opts.thread is not None else magics.thread_id
    if thread_id is None:
        raise UsageError("no current thread; say which: %chat -t ID --undo [TURN]")
    turn = None if opts.undo == -1 else opts.undo
    try:
        print(undo_here(magics.shell, magics.chat.store, thread_id, turn, force=bool(opts.force)))
    except InputError as error:
        raise UsageError(str(error)) from None


def offer_undo(magics: ChatMagics, result: Any) -> None:
    """Below a turn that changed the notebook, where a person can click: *Undo this turn*."""
    if result.status == "suspended" or "checkpoints" not in _settings_of(magics, result):
        return  # a suspended turn gets it once it resumes, below its answer
    from ..cell.render import detect_mode

    if detect_mode() != "live":
        return  # nbval and scripts: the saved outputs stay as they were
    from IPython.display import display

    from ..notebook._undo_view import undo_footer

    footer = undo_footer(magics.chat.store, result.thread_id, result.turn, magics.shell)
    if footer is not None:
        display(footer)


def _settings_of(magics: ChatMagics, result: Any) -> dict[str, Any]:
    if result.thread_id is None:
        return {}
    try:
        return dict(magics.chat.store.get(result.thread_id).settings or {})
    except Exception:  # a thread deleted meanwhile
        return {}


def fix(magics: ChatMagics, opts: Any, text: str) -> Any:
    """``%chat --fix``: with the notebook agent on (``--agent``, ``--mode``, ``ChatMagics.agent``
    or a thread in an agent mode), a proposal on the failing cell where a notebook holds it,
    as the page's Fix asks; else, or for a model without tools, the corrected cell below."""
    from ..notebook._cell_help import fix_question, named_variables
    from ..notebook.tools import Notebook
    from ._context import fix_context
    from ._context import fix_question as code_question

    error = fix_context(magics.shell, opts, magics.context_budget)
    reader = Notebook(magics.shell)
    source = reader.failing_source()
    agent = bool(opts.agent or opts.mode or magics.agent) or _in_agent_mode(magics, opts)
    cell_id = _cell_holding(magics, source) if source is not None and agent else None
    if cell_id is None or magics.chat.llm.template_has_tools() is False:
        opts.code = True
        return magics._ask(code_question(text), opts, context=[error])
    opts.agent = True
    namespace = magics.shell.user_ns if magics.shell is not None else {}
    named = [reader.describe(name) for name in named_variables(str(source), namespace)]
    question = fix_question(cell_id) + (f"\n\n{text}" if text else "")
    return magics._ask(question, opts, context=[error, *named])


def _in_agent_mode(magics: ChatMagics, opts: Any) -> bool:
    thread = opts.thread if opts.thread is not None else magics.thread_id
    return thread is not None and _saved_mode(magics.chat.store, thread) in MODES


def _cell_holding(magics: ChatMagics, source: str) -> str | None:
    """The id of the notebook's cell whose text is ``source`` (the failing cell), if any."""
    from ...context.cell_tools import CannotEdit
    from ..notebook._cells import LiveNotebook

    try:
        cells = LiveNotebook(file=magics.notebook).cells()
    except CannotEdit:  # no page, no saved file: nowhere to propose it
        return None
    wanted = source.strip()
    return next((cell.id for cell in cells if cell.source.strip() == wanted), None)
