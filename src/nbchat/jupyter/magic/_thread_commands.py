"""The ``%chat`` commands that manage threads: list, search, show, use, rename, delete, export.

Each command is a function of the magics that run it (anything with a
``chat`` and a current ``thread_id``, see :class:`ThreadOwner`), the parsed
options and the text after them, so :mod:`nbchat.jupyter.magic.magics` dispatches
to them from one table. Tables and conversations are drawn by
:mod:`nbchat.jupyter.cell._views`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError
from IPython.display import display

from ...base import markup
from ...base.errors import ThreadNotFound
from ...engine._pending import hosted_agent
from ...engine._title_workers import TITLE_WAIT
from ._options import flag_options

if TYPE_CHECKING:
    from ...engine.chat import Chat


class ThreadOwner(Protocol):
    """What a thread command needs: the Chat, and the thread that is current."""

    thread_id: int | None

    @property
    def chat(self) -> Chat: ...


def list_threads(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--list``: the user's threads, the current one marked."""
    from ..cell._views import threads_table

    threads = owner.chat.threads()
    if not threads:
        print(f"No threads yet for user {owner.chat.user!r}; ask something with %chat QUESTION")
        return
    body, plain = threads_table(threads, owner.thread_id)
    display(markup.bundle(body, plain), raw=True)


def search_threads(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--search TEXT``: the turns that match, newest first."""
    from ..cell._views import search_table

    if not text.strip():
        raise UsageError("search for what? %chat --search TEXT")
    hits = owner.chat.search(text)
    if not hits:
        print(f"Nothing in your threads matches {text!r}")
        return
    body, plain = search_table(hits, text)
    display(markup.bundle(body, plain), raw=True)


def show_thread(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--show [ID]``: a thread's conversation (the current one without ID)."""
    from ..cell._views import thread_html

    owner.chat.wait_for_titles(TITLE_WAIT)  # as --list does: a title under way is shown
    chosen = opts.show if opts.show not in (None, "") else opts.thread
    thread = owner.chat.store.get(thread_arg(owner, chosen))
    body, plain = thread_html(thread)
    display(markup.bundle(body, plain), raw=True, metadata={"nbchat": {"thread": thread.id}})


def use_thread(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--use ID``: make a thread the current one."""
    thread = owner.chat.store.get(opts.use)
    owner.thread_id = thread.id
    print(f"Thread {thread.id} ({thread.title or 'untitled'}) is now current.")


def rename_thread(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--rename ID TITLE``."""
    if not text:
        raise UsageError("give the new title: %chat --rename ID TITLE")
    owner.chat.update_thread_title(opts.rename, text)
    print(f"Thread {opts.rename} is now titled {text!r}.")


def delete_thread(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--delete ID``; deleting the current thread leaves none current."""
    owner.chat.delete_thread(opts.delete)
    if owner.thread_id == opts.delete:
        owner.thread_id = None
    print(f"Deleted thread {opts.delete}.")


def export_thread(owner: ThreadOwner, opts: Any, text: str) -> None:
    """``--export ID PATH``: the thread as Markdown (.md) or a notebook (.ipynb)."""
    from ..cell._views import thread_json, thread_markdown

    thread_id, target = opts.export
    thread = owner.chat.store.get(thread_arg(owner, thread_id))
    path = Path(target).expanduser()
    writers = {
        ".md": lambda: thread_markdown(thread) + "\n", ".ipynb": lambda: thread_json(thread)
    }
    if path.suffix.lower() not in writers:
        raise UsageError(f"export to a .md or .ipynb file, not {path.name!r}")
    try:
        path.write_text(writers[path.suffix.lower()](), encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot write {path}: {err.strerror}") from err
    print(f"Exported thread {thread.id} ({len(thread.turns)} turns) to {path}")


def save_thread_settings(chat: Chat, thread_id: int, opts: Any, *, quiet: bool) -> None:
    """--set / --builtin-tools / --window: save options, the tools switch, the window."""
    options = flag_options(opts) if opts.set else None
    if opts.set and not options:
        raise UsageError("--set saves generation options in the thread: give some, e.g. "
                         "%chat --set --max-tokens 500")
    builtin = None if opts.builtin_tools is None else opts.builtin_tools == "on"
    settings = chat.update_thread_settings(thread_id, options=options, builtin_tools=builtin,
                                           window=opts.window)  # fmt: skip
    if not quiet:
        saved = settings.get("options") or {}
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(saved.items())) or "none"
        switch = settings.get("builtin_tools")
        tools = "default" if switch is None else ("on" if switch else "off")
        window = settings.get("window") or "default"
        print(f"Thread {thread_id}: options {shown}; built-in tools {tools}; window {window}.")


def agent_asked(owner: ThreadOwner, opts: Any) -> str | None:
    """The agent a question goes to: the one whose session its thread is (-t, else the
    current thread), if any."""
    thread_id = opts.thread if opts.thread is not None else (
        None if opts.new or opts.history is not None else owner.thread_id)  # fmt: skip
    if thread_id is None or (opts.new and opts.thread is not None):
        return None  # the question's own checks say what is wrong
    try:
        return hosted_agent(owner.chat.store.get(thread_id)) or None
    except ThreadNotFound:
        return None


def thread_arg(owner: ThreadOwner, value: object) -> int:
    """The thread an option names: its number, or the current thread when it names none."""
    if value in (None, ""):
        if owner.thread_id is None:
            raise UsageError("no current thread; pick one with %chat --use ID "
                             "(see %chat --list)")
        return owner.thread_id
    try:
        return int(str(value))
    except ValueError:
        raise UsageError(f"thread ids are numbers, got {value!r}; see %chat --list") from None
