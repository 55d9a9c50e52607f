"""ThreadStore: every user's threads, on TinyDB, never lost.

Layout (one folder per user, so users never share a file or a lock)::

    <store>/<slug>-<hash>/          'ana' -> ana-<first 12 hex of sha256('ana')>
        .lock                       FileLock held around each whole operation
        meta.json                   schema version, owner, next thread id
        thread-<id>.json            one TinyDB per thread: header + one document per turn
        index-<id // 100>.json      listing cache for up to 100 threads: title, model,
                                    created, updated, turns + stamp of the thread file
        writers/<token>.lock        held by each process that may stream a turn
        spending.json               what each kernel has spent (see nbchat.store._spending)

The thread file is the only truth. Every change to a thread (append, turn
update, rename, settings) rewrites that one file atomically and nothing
else, so its cost does not grow with the number of threads; an index
listing every thread, rewritten on each append, would cost O(threads). The
index files are a cache for listing: each entry records the inode, size and
mtime (the stamp) of the thread file it was read from. Listing stats every
thread file (~3 us each), re-reads only those whose stamp changed since,
and writes the refreshed entries back, so a thread changed by another kernel,
a process killed at any point, a deleted thread or a deleted index file all
show up right. The counter in ``meta.json`` makes ids sequential and never
reused, also after deletes. A user's folder is created 0700 and its files
0600, so a team sharing one NBCHAT_STORE folder cannot read each other's
threads; a folder or file there that someone else owns or may write is
refused (:class:`~nbchat.base.errors.StoreUnsafe`), so nobody can plant threads in
it. The user name is hashed into the folder name, so 'ana', 'Ana' and '../ana'
are three users and none escapes the store.

Measured by ``benchmarks/store.py`` on a 2-core machine with 1,000 threads x
100 turns (120 MB), against one TinyDB JSONStorage file holding the same data:
append p50 1.7 ms / p99 2.5 ms (naive 1.1 s), and the same p50 with 10, 100
or 1,000 threads; thread_list 8 ms (naive 0.6 s), 10 ms right after an
append elsewhere (one thread re-read), ~0.1 s after 300 appends to random
threads; thread_details 0.4 ms; cold open + first list 9 ms (10 ms in a new
process, which also spends ~140 ms starting Python and importing). Of an
append, the two fsyncs (file and folder) take ~0.4 ms; appends cost about
1 ms more per 100 turns of their own thread, which is rewritten whole.
``search`` reads every thread file: ~0.4 s for this store.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

from tinydb import TinyDB
from tinydb.table import Document

from ..base.config import default_store_path, default_user
from ..base.content import ContextItem
from ..base.errors import (
    InputError,
    StoreCorrupt,
    StoreError,
    StoreUnsafe,
    StoreVersionError,
    ThreadNotFound,
)
from ..base.records import AnsweredCall, PendingCall, RecordError
from . import _spending
from ._files import Entry, UserFolder, file_stamp, is_writer_alive, not_a_folder, writer_token
from ._meta import check_owner, read_meta, take_id
from ._storage import corrupt, fsync_dir, open_db
from ._threadfile import (
    add_turn,
    db_path,
    entry_of,
    header_of,
    set_header,
    thread_id_of,
    turn_docs,
    valid_header,
)
from .base import (
    _INFO_KEYS,
    _TURN_KEYS,
    _UNSET,
    SCHEMA,
    SearchHit,
    T,
    Thread,
    ThreadInfo,
    Turn,
    _check_amount,
    _check_id,
    _check_index,
    _check_json,
    _check_kernel,
    _check_model,
    _check_optional_str,
    _check_query,
    _check_title,
    _check_turn_field,
    _check_type,
    _check_user,
    _claim_changes,
    _not_found,
)

__all__ = ["ThreadStore"]

LOCK_TIMEOUT = 30.0
# A folder written this recently may be written again within the same tick of its clock.
UNSETTLED_NS = 50_000_000


class ThreadStore:
    """The threads of one user, kept in a folder that several processes may share.

    Every operation takes the user's file lock, reads what it needs from disk
    and, if it changes anything, replaces the files it changed atomically
    before returning: what a call has returned survives the process being
    killed, and other kernels see it at once.

    Parameters
    ----------
    path
        The store folder; default ``NBCHAT_STORE`` or the Jupyter data dir.
    user
        Whose threads; default ``NBCHAT_USER``, ``JUPYTERHUB_USER``, the login.
    lock_timeout
        Seconds to wait for another process's operation before
        :class:`~nbchat.base.errors.StoreLocked`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        user: str | None = None,
        *,
        lock_timeout: float = LOCK_TIMEOUT,
    ) -> None:
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self.user = _check_user(default_user() if user is None else user)
        self._folder = UserFolder(self.path, self.user, lock_timeout)
        if self.path.exists() and not self.path.is_dir():
            raise not_a_folder(self.path)
        # Reported by the first operation, which checks the folder first and needs the file.
        with contextlib.suppress(StoreCorrupt, StoreUnsafe):
            read_meta(self._folder, self.user)

    @property
    def folder(self) -> Path:
        """This user's folder in the store (back it up, or look inside)."""
        return self._folder.path

    def __repr__(self) -> str:
        return f"ThreadStore(path={str(self.path)!r}, user={self.user!r})"

    # -- threads ---------------------------------------------------------------------

    def new_thread(
        self,
        model: str,
        *,
        system: str | None = None,
        title: str = "",
        settings: dict | None = None,
    ) -> int:
        """Start an empty thread and return its id."""
        model = _check_model(model)
        system = _check_optional_str(system, "system")
        title = _check_title(title, allow_empty=True)
        settings = _check_json({} if settings is None else settings, "settings", dict)
        with self._folder.locked():
            thread_id = take_id(self._folder, self.user)
            now = time.time()
            header = {
                "nbchat": SCHEMA, "id": thread_id, "user": self.user, "title": title,
                "model": model, "system": system, "created": now, "updated": now,
                "settings": settings,
            }  # fmt: skip
            with open_db(self._folder.thread(thread_id)) as db:
                db.table("thread").insert(Document(header, doc_id=1))
        return thread_id

    def threads(self) -> list[ThreadInfo]:
        """Summaries of the user's threads, most recently updated first."""
        with self._folder.locked():
            entries = self._folder.summaries(self._reload_entry)
        infos = [ThreadInfo(tid, **{k: e[k] for k in _INFO_KEYS}) for tid, e in entries.items()]
        return sorted(infos, key=lambda info: (info.updated, info.id), reverse=True)

    def thread_list(self) -> list[tuple[int, str]]:
        """(id, title) of the user's threads, most recently updated first."""
        return [(info.id, info.title) for info in self.threads()]

    def thread_details(self, thread_id: int) -> list[tuple[str, str]]:
        """(query, answer) of each turn of a thread, oldest first."""
        tid = _check_id(thread_id, self.user)
        with self._folder.locked(), self._open_thread(tid) as (db, _):
            return [(doc["query"], doc["answer"]) for doc in turn_docs(db)]

    def get(self, thread_id: int) -> Thread:
        """The whole thread; a turn whose writer died while streaming reads as interrupted."""
        tid = _check_id(thread_id, self.user)
        with self._folder.locked(), self._open_thread(tid) as (db, header):
            turns = [self._turn(doc, db) for doc in turn_docs(db)]
        keys = ("title", "model", "system", "created", "updated", "settings")
        return Thread(id=tid, user=self.user, turns=turns, **{k: header[k] for k in keys})

    def update_thread_title(
        self, thread_id: int, title: str, *, if_untitled: bool = False
    ) -> bool:
        """Retitle a thread (whitespace runs become single spaces); with ``if_untitled``,
        only a thread that has no title yet (checked under the lock), leaving its
        ``updated`` time as it was. Whether it changed."""
        tid = _check_id(thread_id, self.user)
        title = _check_title(title)

        def retitle(db: TinyDB, header: dict[str, Any]) -> bool:
            if not if_untitled:
                set_header(db, title=title)
            elif header["title"]:
                return False
            else:  # a generated title is no activity: the thread keeps its place in lists
                db.table("thread").update({"title": title}, doc_ids=[1])
            return True

        with self._folder.locked():
            return self._change(tid, retitle)

    def update_thread(
        self,
        thread_id: int,
        *,
        model: str | None = None,
        system: str | None = _UNSET,
        settings: dict | None = None,
    ) -> None:
        """Change a thread's model, system prompt (None clears it) or settings."""
        tid = _check_id(thread_id, self.user)
        changes: dict[str, Any] = {}
        if model is not None:
            changes["model"] = _check_model(model)
        if system is not _UNSET:
            changes["system"] = _check_optional_str(system, "system")
        if settings is not None:
            changes["settings"] = _check_json(settings, "settings", dict)
        if not changes:
            return
        with self._folder.locked():
            self._change(tid, lambda db, header: set_header(db, **changes))

    def delete_thread(self, thread_id: int) -> None:
        """Delete a thread for good; its id is never given out again."""
        tid = _check_id(thread_id, self.user)
        with self._folder.locked():
            with self._open_thread(tid):
                pass  # a corrupt or foreign file is reported, not deleted
            try:
                self._folder.thread(tid).unlink()
            except OSError as exc:
                raise StoreError(f"cannot delete thread {tid}: {exc.strerror or exc}") from exc
            fsync_dir(self._folder.path)

    def search(self, text: str) -> list[SearchHit]:
        """Turns whose query or answer contains *text*, ignoring case; newest threads first.

        Reads every thread file. Threads that cannot be read are skipped
        (:meth:`get` reports them).
        """
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"search needs some text to look for, got {text!r}")
        needle = text.casefold()
        hits: list[SearchHit] = []
        with self._folder.locked():
            entries = self._folder.summaries(self._reload_entry)
            order = sorted(entries, key=lambda t: (entries[t]["updated"], t), reverse=True)
            for tid in order:
                with contextlib.suppress(StoreCorrupt, StoreVersionError, ThreadNotFound):
                    hits += self._search_thread(tid, needle)
        return hits

    # -- turns -----------------------------------------------------------------------

    def append_response(
        self, thread_id: int, query: str, answer: str, title: str | None = None
    ) -> int:
        """Add a complete turn in one write and return its index; *title* retitles."""
        tid = _check_id(thread_id, self.user)
        query = _check_query(query)
        answer = _check_type(answer, "answer", str)
        changes = {} if title is None else {"title": _check_title(title)}
        now = time.time()
        turn = Turn(query, answer, status="complete", started=now, finished=now)
        with self._folder.locked():
            return self._change(tid, lambda db, header: add_turn(db, header, turn, changes))

    def start_turn(
        self,
        thread_id: int,
        query: str,
        *,
        model: str | None = None,
        context: Sequence[ContextItem] = (),
    ) -> int:
        """Save the query (and the objects attached to it) as a streaming turn before it is
        sent; return the turn's index."""
        tid = _check_id(thread_id, self.user)
        query = _check_query(query)
        model = None if model is None else _check_model(model)
        items = [ContextItem.from_dict(item) for item in context]
        turn = Turn(query, model=model, started=time.time(), context=items)
        with self._folder.locked():
            writer = writer_token(self._folder.writers)
            return self._change(tid, lambda db, header: add_turn(db, header, turn, {}, writer))

    def update_turn(self, thread_id: int, turn: int, **changes: Any) -> Turn:
        """Change some fields of a turn and return it as saved.

        Fields: answer, messages, status, pending, answered, error, usage, finished,
        model. ``pending`` and ``answered`` take records (or their dicts).
        A turn left "streaming" belongs to the calling process from then on.
        """
        tid = _check_id(thread_id, self.user)
        index = _check_index(turn)
        changes = {name: _check_turn_field(name, value) for name, value in changes.items()}
        with self._folder.locked():
            writer = writer_token(self._folder.writers)
            return self._change(
                tid, lambda db, header: self._set_turn(db, tid, index, changes, writer)
            )

    def claim_call(
        self,
        thread_id: int,
        turn: int,
        call_id: str,
        *,
        output: str,
        answer: AnsweredCall,
    ) -> Turn:
        """Record the answer to a pending call, exactly once; the turn as saved.

        Under the store's lock the call must still be pending: its entry moves
        to ``answered``, the tool message with ``output`` joins the turn's
        messages and, once no call of the turn waits any more, the turn turns
        "streaming" (owned by this process, which resumes it). A second answer
        raises :class:`~nbchat.base.errors.AlreadyAnswered` and changes nothing.
        """
        tid = _check_id(thread_id, self.user)
        index = _check_index(turn)
        with self._folder.locked():
            writer = writer_token(self._folder.writers)
            return self._change(
                tid,
                lambda db, header: self._claim(db, tid, index, call_id, output, answer, writer),
            )

    def location(self, thread_id: int | None = None) -> str:
        """Where a thread (or this user's threads) is kept, for messages."""
        if thread_id is None:
            return str(self._folder.path)
        return str(self._folder.thread(_check_id(thread_id, self.user)))

    def kernel_spent(self, kernel: str) -> float:
        """What ``kernel`` (a key the front end chose) has spent, in dollars."""
        key = _check_kernel(kernel)
        with self._folder.locked():
            return _spending.spent(self._folder.path, key)

    def add_kernel_spent(self, kernel: str, amount: float) -> float:
        """Add ``amount`` dollars to what ``kernel`` has spent; the new total."""
        key, dollars = _check_kernel(kernel), _check_amount(amount)
        with self._folder.locked():
            return _spending.add(self._folder.path, key, dollars)

    def stamp(self, thread_id: int) -> object:
        """What changes whenever the thread is written, read without the lock or the file:
        for a caller that waits on another process's write. None: no such thread."""
        try:
            return file_stamp(os.stat(self._folder.thread(_check_id(thread_id, self.user))))
        except FileNotFoundError:
            return None

    def change_stamp(self) -> object:
        """What changes whenever any of the user's threads is written: one ``stat`` of the
        user's folder (every write replaces a file in it). None: nothing was written yet.

        The clock that stamps the folder ticks every few milliseconds, so a second write
        within one tick leaves it as it was; a folder written that recently gives a stamp
        equal to no other, and a caller looks again.
        """
        try:
            info = os.stat(self._folder.path)
        except OSError:
            return None
        if time.time_ns() - info.st_mtime_ns < UNSETTLED_NS:
            return object()
        return (info.st_ino, info.st_mtime_ns)

    # -- inside the lock ---------------------------------------------------------------

    @contextlib.contextmanager
    def _open_thread(self, tid: int) -> Iterator[tuple[TinyDB, dict[str, Any]]]:
        path = self._folder.thread(tid)
        with open_db(path, create=False) as db:
            try:
                header = header_of(db)
            except FileNotFoundError:
                raise _not_found(self.user, tid) from None
            if header is None or not valid_header(header):
                raise corrupt(path, "is not an nbchat thread file")
            check_owner(header, path, self.user)
            if header["id"] != tid:
                raise corrupt(path, f"holds thread {header['id']!r}, not {tid}")
            yield db, header

    def _change(self, tid: int, change: Callable[[TinyDB, dict[str, Any]], T]) -> T:
        """Apply *change* to a thread file and write it (listing notices the new stamp)."""
        with self._open_thread(tid) as (db, header):
            return change(db, header)

    def _set_turn(
        self, db: TinyDB, tid: int, index: int, changes: dict[str, Any], writer: str
    ) -> Turn:
        turns = db.table("turns")
        doc = turns.get(doc_id=index + 1)
        if doc is None:
            count = len(turns)
            have = f"its turns are 0 to {count - 1}" if count else "it has no turns yet"
            raise InputError(f"thread {tid} has no turn {index}; {have}")
        if changes:
            status = changes.get("status", doc.get("status"))
            turns.update(
                {**changes, "writer": writer if status == "streaming" else None},
                doc_ids=[index + 1],
            )
            set_header(db)
        return self._turn(cast(Document, turns.get(doc_id=index + 1)), db)

    def _claim(
        self,
        db: TinyDB,
        tid: int,
        index: int,
        call_id: str,
        output: str,
        answer: AnsweredCall,
        writer: str,
    ) -> Turn:
        current = self._set_turn(db, tid, index, {}, writer)
        changes = _claim_changes(current, tid, call_id, output, answer)
        return self._set_turn(db, tid, index, changes, writer)

    def _turn(self, doc: dict[str, Any], db: TinyDB) -> Turn:
        index = doc.doc_id - 1 if isinstance(doc, Document) else 0
        try:
            turn = Turn(**{key: doc[key] for key in _TURN_KEYS if key in doc})
            turn.pending = [
                PendingCall.from_dict(thread_id_of(db), index, entry) for entry in turn.pending
            ]
            turn.answered = [AnsweredCall.from_dict(entry) for entry in turn.answered]
            turn.context = [ContextItem.from_dict(entry) for entry in turn.context]
        except (TypeError, InputError):
            raise corrupt(db_path(db), "holds a turn nbchat did not write") from None
        except RecordError as exc:
            raise corrupt(db_path(db), f"holds a damaged record in turn {index} ({exc})") from None
        writers = self._folder.writers
        if turn.status == "streaming" and not is_writer_alive(writers, doc.get("writer")):
            turn.status = "interrupted"
        return turn

    def _search_thread(self, tid: int, needle: str) -> list[SearchHit]:
        with self._open_thread(tid) as (db, header):
            return [
                SearchHit(tid, header["title"], index, doc["query"], doc["answer"])
                for index, doc in enumerate(turn_docs(db))
                if needle in doc["query"].casefold() or needle in doc["answer"].casefold()
            ]

    def _reload_entry(self, tid: int) -> Entry | None:
        try:
            with self._open_thread(tid) as (db, header):
                return entry_of(header, len(db.table("turns")))
        except (StoreCorrupt, StoreVersionError, ThreadNotFound):
            return None

    # -- checks ----------------------------------------------------------------------------

