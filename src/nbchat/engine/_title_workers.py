"""Titling threads: the request that asks the model for a title, run off the turn's path.

What makes a reply a title is :mod:`._titles`; here is how the model is asked
(one short request, bounded in size and time) and the daemon threads that ask
it once a new thread has its first answer.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from ..base.errors import NbchatError, StreamCutOff
from ..base.events import ReasoningDelta, ReplyFinished, TextDelta, UsageReported
from ..base.messages import Message, wire_messages
from ..llm import LLMClient
from ..llm._stop import StopSignal
from ..store.base import Store, Thread, Turn
from ._budget import Spending
from ._endings import wire_tokens
from ._titles import clean_title, names_something

TITLE_PROMPT = (
    "You name conversations. When asked, write a conversation title of 3 to 5 words "
    "that says what the conversation is about."
)
TITLE_REQUEST = (
    "Write the conversation title for the conversation so far: 3 to 5 words, "
    "the title only, no quotes, no punctuation at the end."
)
TITLE_MAX_CHARS = 2000  # a reply this long is no title: stop reading it
TITLE_SECONDS = 5.0  # a title request is given up after this long, however it streams
TITLE_WAIT = 1.0  # seconds listing waits for a title under way
EXIT_TITLE_WAIT = 2.0  # seconds the process waits at exit for titles under way


def ask_title(llm: LLMClient, thread: Thread, options: Mapping[str, Any],
              spending: Spending | None = None) -> str:  # fmt: skip
    """The model's title for ``thread``'s first answered turn; "" when it gave none.

    With ``spending``, each request is checked first (one over a budget is not
    sent: "") and its usage counted.
    """
    first = next((t for t in thread.turns if t.answer.strip()), thread.turns[0])
    messages = title_messages(first)
    for _attempt in range(2):  # a stream the server cut short is asked once more
        try:
            reply = title_reply(llm, messages, thread.model, options, spending)
        except StreamCutOff:
            continue
        except NbchatError:
            return ""
        if reply is None:
            return ""
        title = clean_title(reply)
        return title if title and names_something(title) else ""
    return ""


def title_messages(turn: Turn) -> list[dict[str, Any]]:
    """The title request for a thread whose first answered turn is ``turn``."""
    return wire_messages(TITLE_PROMPT, [
        Message("user", turn.query[:2000]),
        Message("assistant", turn.answer[:2000]),
        Message("user", TITLE_REQUEST),
    ])  # fmt: skip


def title_reply(
    llm: LLMClient, messages: list[dict[str, Any]], model: str, options: Mapping[str, Any],
    spending: Spending | None = None,
) -> str | None:
    """The model's whole reply to a title request; None when it ran too long or too slow.

    A reply that ends with no finish reason was cut by the server (as
    llama-cpp-python does when the next question arrives): StreamCutOff.
    OverBudget when ``spending`` refuses the request.
    """
    if spending is not None:
        options = spending.admit(wire_tokens(messages), options, model, purpose="title")
    stop = StopSignal()
    deadline = stop.set_after(TITLE_SECONDS)
    events = llm.stream(messages, model=model, options=options, stop=stop)
    parts: list[str] = []
    size, finished = 0, False
    try:
        for event in events:
            if type(event) is TextDelta or type(event) is ReasoningDelta:
                size += len(event.text)
                if size > TITLE_MAX_CHARS:
                    return None
                if type(event) is TextDelta:
                    parts.append(event.text)
            elif type(event) is ReplyFinished:
                finished = event.finish_reason is not None
            elif type(event) is UsageReported and spending is not None:
                spending.add(event.usage, model)
    finally:
        deadline.cancel()
        events.close()  # an unfinished reply closes its connection
    if stop.is_set():
        return None
    if not finished:
        raise StreamCutOff("the title reply ended before the endpoint said it was done")
    return "".join(parts)


class Titled(Protocol):
    """What a title worker needs of the Chat it titles for."""

    @property
    def store(self) -> Store: ...

    def get_thread_title(self, thread_id: int) -> str: ...


class TitleWorkers:
    """Titles new threads after their first answer, off the turn's critical path.

    The cell is done when the answer is: the title request runs in a daemon
    thread and its result is a store update (the panel and ``--list`` read it
    from there). A title request reads at most ``TITLE_MAX_CHARS`` of reply
    and lasts at most ``TITLE_SECONDS``; past either it is given up and the
    question's first words are the title. Every Chat of the process on the
    same store and user shares one registry (:meth:`shared`), so listing from
    any of them waits up to ``TITLE_WAIT`` for titles under way: ``%chat
    --list`` right after ``chat.ask(…)`` shows the title. At exit a script
    waits up to ``EXIT_TITLE_WAIT``.
    """

    def __init__(self) -> None:
        self._workers: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()

    @classmethod
    def shared(cls, store: Store) -> TitleWorkers:
        """The registry of the titles under way for *store*'s user in this process."""
        key = (type(store).__name__, store.location(), store.user)
        with _SHARED_LOCK:
            titles = _SHARED_TITLES.get(key)
            if titles is None:
                titles = _SHARED_TITLES[key] = cls()
        return titles

    def start(self, chat: Titled, thread_id: int) -> None:
        with self._lock:
            if thread_id in self._workers:
                return
            worker = threading.Thread(
                target=self._title, args=(chat, thread_id), daemon=True,
                name=f"nbchat-title-{thread_id}",
            )  # fmt: skip
            worker.start()  # under the lock: wait() never meets a worker not yet started
            self._workers[thread_id] = worker

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            worker.join(left)
        return not any(worker.is_alive() for worker in workers)

    def _title(self, chat: Titled, thread_id: int) -> None:
        try:
            title = chat.get_thread_title(thread_id)
            chat.store.update_thread_title(thread_id, title, if_untitled=True)  # a rename wins
        except NbchatError:
            pass  # the thread was deleted or the store is unreadable: no title to give
        finally:
            with self._lock:
                self._workers.pop(thread_id, None)


_SHARED_TITLES: weakref.WeakValueDictionary[tuple[str, str, str], TitleWorkers] = (
    weakref.WeakValueDictionary()
)
_SHARED_LOCK = threading.Lock()


@atexit.register
def _finish_titles() -> None:
    deadline = time.monotonic() + EXIT_TITLE_WAIT
    for titles in list(_SHARED_TITLES.values()):
        titles.wait(max(0.0, deadline - time.monotonic()))
