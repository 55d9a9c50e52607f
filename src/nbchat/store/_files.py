"""The files under the thread store: one user's folder, its lock and index, writer liveness.

:class:`UserFolder` names one user's files and holds the lock that each whole
operation runs under (:meth:`~UserFolder.locked`). The index files are a
cache of each thread's summary, checked against the stamp of the thread file
it was read from (layout and reasons in :mod:`nbchat.store.tinydb`); the
files themselves are written through :mod:`nbchat.store._storage`.

A turn that is still streaming names its writer: a lock file that the
writing process holds for as long as it lives (:func:`writer_token`). The OS
drops the lock when the process dies, however it dies, so a reader can tell
"still being written" from "the writer is gone" (:func:`is_writer_alive`)
without trusting process ids, which containers reuse.

The storage primitives live in :mod:`nbchat.store._storage`; the ones this
module does not use are imported here too, so that everything the old
``nbchat._storage`` offered is still found under that name.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import threading
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from tinydb.table import Document

from ..base.errors import StoreCorrupt, StoreError, StoreLocked
from ._storage import (
    TEMP_SUFFIX,
    check_private,
    check_root,
    check_stat,
    corrupt,
    open_db,
)
from ._storage import UNTOUCHED as UNTOUCHED
from ._storage import AtomicJSONStorage as AtomicJSONStorage
from ._storage import atomic_write as atomic_write
from ._storage import fsync_dir as fsync_dir
from ._storage import load_json as load_json

SWEEP_LIMIT = 200
INDEX_SIZE = 100
UNREADABLE = "(unreadable thread file)"
_THREAD_FILE = re.compile(r"thread-([1-9][0-9]*)\.json")
_INDEX_FILE = re.compile(r"index-([0-9]+)\.json")
_NUMBER = (int, float)
_ENTRY_TYPES = (
    ("title", str),
    ("model", str),
    ("turns", int),
    ("created", _NUMBER),
    ("updated", _NUMBER),
)
Entry = dict[str, Any]


def file_stamp(stat: os.stat_result) -> list[int]:
    """What changes whenever a file is replaced: inode, size, modification time."""
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def user_dirname(user: str) -> str:
    """The folder name for *user*: a readable slug and a hash of the exact name.

    >>> user_dirname("ana"), user_dirname("Ana") != user_dirname("ana")
    ('ana-24d4b96f58da', True)
    """
    ascii_name = unicodedata.normalize("NFKD", user).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:32] or "user"
    digest = hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}"


class UserFolder:
    """One user's folder: file names, the lock, and the index of thread summaries."""

    def __init__(self, root: Path, user: str, lock_timeout: float) -> None:
        self.root = root
        self.user = user
        self.path = root / user_dirname(user)
        self.meta = self.path / "meta.json"
        self.writers = self.path / "writers"
        self._lock_timeout = lock_timeout
        self._lock: tuple[int, FileLock] | None = None

    def thread(self, tid: int) -> Path:
        return self.path / f"thread-{tid}.json"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the user's lock (StoreLocked after the timeout)."""
        self._ensure()
        lock = self._process_lock()
        try:
            lock.acquire(poll_interval=0.005)
        except Timeout:
            raise StoreLocked(
                f"the thread store of user {self.user!r} in {self.root} stayed locked by another "
                f"process for {self._lock_timeout:g} s; try again, and if it persists restart "
                f"the kernel that is stuck writing to it"
            ) from None
        except OSError as exc:
            raise StoreError(f"cannot lock {self.path}: {exc.strerror or exc}") from exc
        try:
            yield
        finally:
            lock.release()

    def _process_lock(self) -> FileLock:
        # A forked child must not use its parent's lock object (filelock 4 refuses it).
        if self._lock is None or self._lock[0] != os.getpid():
            if self._lock is not None:
                _inherited.append(self._lock[1])
            check_private(self.path / ".lock")
            lock = FileLock(self.path / ".lock", timeout=self._lock_timeout, mode=0o600)
            self._lock = (os.getpid(), lock)
        return self._lock[1]

    def _ensure(self) -> None:
        """Create the user's folder (0700) if missing; refuse one that is not safely ours.

        Once the folder is ours and private, nobody else can add or replace what
        is in it: one check of the folder an operation is enough (the files read
        are checked as they are opened, the lock and ``writers/`` once a process).
        """
        status = check_private(self.path, folder=True)
        if status is not None and stat.S_ISDIR(status.st_mode):
            return
        try:
            self.root.mkdir(mode=0o755, parents=True, exist_ok=True)
            check_root(self.root)
            self.path.mkdir(mode=0o700, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise not_a_folder(self.root) from None
        except OSError as exc:
            raise StoreError(f"cannot create {self.path}: {exc.strerror or exc}") from exc
        check_private(self.path, folder=True)  # someone else may have made it meanwhile

    def scan(self) -> tuple[dict[int, list[int]], list[int]]:
        """Stamps of the thread files by id, and numbers of the index files.

        Also removes the temp files that killed writers left behind: call it
        only under the lock, when no temp file can belong to a live writer.
        StoreUnsafe for a thread file that is not ours alone.
        """
        stamps: dict[int, list[int]] = {}
        indexes: list[int] = []
        with contextlib.suppress(FileNotFoundError), os.scandir(self.path) as entries:
            for entry in entries:
                name = entry.name
                if name.startswith("thread-") and (match := _THREAD_FILE.fullmatch(name)):
                    with contextlib.suppress(FileNotFoundError):
                        status = entry.stat()
                        check_stat(Path(entry.path), status)
                        stamps[int(match[1])] = file_stamp(status)
                elif name.startswith("index-") and (match := _INDEX_FILE.fullmatch(name)):
                    indexes.append(int(match[1]))
                elif name.startswith(".") and name.endswith(TEMP_SUFFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        return stamps, indexes

    def summaries(self, reload: Callable[[int], Entry | None]) -> dict[int, Entry]:
        """The summary of every thread, from the index where its stamp still matches.

        *reload* reads a thread file that is new or changed since its entry
        was written; the index files are updated with what it returns.
        """
        stamps, indexes = self.scan()
        groups: dict[int, list[int]] = {number: [] for number in indexes}
        for tid in stamps:
            groups.setdefault(tid // INDEX_SIZE, []).append(tid)
        entries: dict[int, Entry] = {}
        for number, tids in sorted(groups.items()):
            entries.update(self._refresh(number, tids, stamps, reload))
        return entries

    def _refresh(
        self,
        number: int,
        tids: list[int],
        stamps: dict[int, list[int]],
        reload: Callable[[int], Entry | None],
    ) -> dict[int, Entry]:
        written = -1
        first, last = max(number * INDEX_SIZE, 1), number * INDEX_SIZE + INDEX_SIZE - 1
        hint = f"it only indexes threads {first}-{last}: move it away and nbchat rebuilds it"
        entries: dict[int, Entry] = {}
        path = self.path / f"index-{number}.json"
        # An entry is trusted only for files last changed before the index was written
        # (both times from the file system's clock): a file changed in the same clock
        # tick could change again and keep its stamp. So git treats "racy" entries.
        with contextlib.suppress(FileNotFoundError):
            written = path.stat().st_mtime_ns
        # A cache: its data is fsynced (never a torn file) but its rename need not be
        # durable, since an older index is only stale, and stale entries get re-read.
        with open_db(path, hint=hint, sync_dir=False) as db:
            table = db.table("threads")
            cached = {doc.doc_id: doc for doc in table.all() if _valid_entry(doc)}
            for tid in tids:
                doc, stamp = cached.get(tid), stamps[tid]
                if doc is not None and doc.get("stamp") == stamp and stamp[2] < written:
                    entries[tid] = doc
                elif (fresh := reload(tid)) is not None:
                    entries[tid] = {**fresh, "stamp": stamp}
                    table.upsert(Document(entries[tid], doc_id=tid))
                else:  # unreadable: list what we knew, so that get() can say what is wrong
                    entries[tid] = doc if doc is not None else _unreadable(stamp)
            gone = [doc.doc_id for doc in table.all() if doc.doc_id not in stamps]
            if gone:
                table.remove(doc_ids=gone)
        return entries


def _unreadable(stamp: list[int]) -> Entry:
    when = stamp[2] / 1e9
    return {"title": UNREADABLE, "model": "", "turns": 0, "created": when, "updated": when}


def _valid_entry(doc: Entry) -> bool:
    return all(isinstance(doc.get(key), kind) for key, kind in _ENTRY_TYPES)


def not_a_folder(path: Path) -> StoreCorrupt:
    return corrupt(path, "is a file, not a folder of threads", "point NBCHAT_STORE at a folder")


_writers: dict[Path, tuple[int, str, FileLock]] = {}
_writers_lock = threading.Lock()
# Lock objects a forked child inherited: never collected, because filelock 3
# unlocks on collection, which would release the parent's lock on the shared file.
_inherited: list[FileLock] = []


def writer_token(folder: Path) -> str:
    """This process's writer name in *folder*, whose lock it holds until it exits."""
    with _writers_lock:
        held = _writers.get(folder)
        if held is not None and held[0] == os.getpid():
            return held[1]
        if held is not None:
            _inherited.append(held[2])
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_private(folder, folder=True)
        while True:
            token = f"{os.getpid()}-{secrets.token_hex(8)}"
            lock = FileLock(folder / f"{token}.lock", timeout=0, mode=0o600)
            # A sweeping process may take the new file for a dead writer's before we
            # lock it, and delete it: then start again with another name.
            with contextlib.suppress(Timeout):
                lock.acquire()
                if (folder / f"{token}.lock").exists():
                    break
                lock.release()
        _writers[folder] = (os.getpid(), token, lock)
    _forget_dead_writers(folder, token)
    return token


def _forget_dead_writers(folder: Path, mine: str) -> None:
    """Remove the lock files of writers that have exited, once per process."""
    with contextlib.suppress(OSError):
        for path in list(folder.glob("*.lock"))[:SWEEP_LIMIT]:
            if path.stem != mine:
                is_writer_alive(folder, path.stem)


def is_writer_alive(folder: Path, token: object) -> bool:
    """Whether the process named *token* still runs (holds its lock in *folder*)."""
    if not isinstance(token, str) or "/" in token or "\\" in token or token.startswith("."):
        return False
    path = folder / f"{token}.lock"
    if not path.exists():
        return False
    probe = FileLock(path, timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return True
    try:
        with contextlib.suppress(OSError):
            path.unlink()  # while locked, so that a new writer cannot have taken it
    finally:
        probe.release()
    return False
