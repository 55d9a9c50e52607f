"""The files under the thread store: atomic TinyDB storage, the user's folder, writer liveness.

TinyDB's ``JSONStorage`` writes in place and then truncates, and keeps its file
handle open: a SIGKILL mid-write leaves new JSON followed by the old tail.
:class:`AtomicJSONStorage` writes each new version of a file to a temporary
file in the same folder, flushes and fsyncs it, moves it over the old one
with :func:`os.replace` and fsyncs the folder (once per operation when it
writes two files there). A reader, or the next process after a crash, sees
the old version or the new one, whole. Files are opened only inside
:meth:`~AtomicJSONStorage.read` and :meth:`~AtomicJSONStorage.flush`.

The storage itself does not lock. :class:`UserFolder` holds one user's files
(their names, the lock, the index files) and its :meth:`~UserFolder.locked`
is held around each whole operation, which opens a fresh :func:`open_db`
inside it: nothing read before the lock (TinyDB's query cache, its next-id
cache, parsed data) is ever used. Within that one operation the storage
keeps the data it read and buffers TinyDB's writes: the file is parsed once
and written once, at the end, and an operation that fails half-way writes
nothing. The index files are a cache of each thread's summary, checked
against the stamp of the thread file it was read from (layout and reasons in
:mod:`nbchat.store`).

A turn that is still streaming names its writer: a lock file that the
writing process holds for as long as it lives (:func:`writer_token`). The OS
drops the lock when the process dies, however it dies, so a reader can tell
"still being written" from "the writer is gone" (:func:`is_writer_alive`)
without trusting process ids, which containers reuse.

Everything is trusted only if it is ours alone, as ssh trusts ``~/.ssh``: the
user's folder, its lock and every file read must be owned by this process's
user and not writable by group or others, and the root must not let others
replace the folder (writable only with the sticky bit). Otherwise
:class:`~nbchat.base.errors.StoreUnsafe` names the folder or file and the fix, so
threads someone else planted never pass for the user's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import tempfile
import threading
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from filelock import FileLock, Timeout
from tinydb import TinyDB
from tinydb.storages import Storage
from tinydb.table import Document

from ..base.config import ENV_STORE
from ..base.errors import StoreCorrupt, StoreError, StoreLocked, StoreUnsafe

TEMP_SUFFIX = ".tmp"
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
UNTOUCHED = "it was left untouched"


class AtomicJSONStorage(Storage):
    """TinyDB storage for one JSON file, replaced whole on :meth:`flush`.

    Parameters
    ----------
    path
        The JSON file.
    create
        When false, reading a missing file raises :class:`FileNotFoundError`
        instead of giving an empty database.
    hint
        What to do if the file is corrupt, for the error message.
    sync_dir
        Whether :meth:`flush` also fsyncs the folder. False when the caller
        writes another file in the same folder and fsyncs it once for both.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        hint: str = "",
        sync_dir: bool = True,
    ) -> None:
        self.path = Path(path)
        self.create = create
        self.hint = hint
        self.sync_dir = sync_dir
        self._data: dict[str, Any] | None = None
        self._dirty = False

    def read(self) -> dict[str, Any] | None:
        if self._data is None:
            self._data = load_json(self.path, missing_ok=self.create, hint=self.hint, private=True)
        return self._data

    def write(self, data: dict[str, Any]) -> None:
        self._data = data
        self._dirty = True

    def flush(self) -> None:
        """Write the buffered data, if any, atomically and durably."""
        if not self._dirty or self._data is None:
            return
        text = json.dumps(self._data, separators=(",", ":"), allow_nan=False)
        atomic_write(self.path, text.encode("ascii"), sync_dir=self.sync_dir)
        self._dirty = False

    def close(self) -> None:
        # Deliberately no flush: close() also runs when an operation failed.
        self._data = None
        self._dirty = False


@contextlib.contextmanager
def open_db(
    path: Path, *, create: bool = True, hint: str = "", sync_dir: bool = True
) -> Iterator[TinyDB]:
    """A TinyDB on *path* for one operation; its writes land on disk when the block succeeds."""
    db = TinyDB(path, storage=AtomicJSONStorage, create=create, hint=hint, sync_dir=sync_dir)
    try:
        yield db
        cast(AtomicJSONStorage, db.storage).flush()
    finally:
        db.close()


def load_json(
    path: Path, *, missing_ok: bool = True, hint: str = "", private: bool = False
) -> dict[str, Any] | None:
    """The TinyDB data in *path*; None if missing and *missing_ok*; StoreCorrupt if not TinyDB.

    With *private*, the file must be ours and not writable by others (else StoreUnsafe).
    """
    try:
        with open(path, "rb") as file:
            if private:
                check_stat(path, os.fstat(file.fileno()))
            raw = file.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # also JSONDecodeError, UnicodeDecodeError
        what = "is empty" if not raw.strip() else f"is not valid JSON ({exc})"
        raise corrupt(path, what, hint) from None
    if not _is_tinydb(data):
        raise corrupt(path, "is JSON but not a TinyDB database", hint)
    return data


def _is_tinydb(data: object) -> bool:
    return isinstance(data, dict) and all(
        isinstance(table, dict)
        and all(key.isascii() and key.isdigit() for key in table)
        and all(isinstance(doc, dict) for doc in table.values())
        for table in data.values()
    )


def corrupt(path: Path, what: str, hint: str = "") -> StoreCorrupt:
    """The StoreCorrupt for *path*, naming the file and saying it was not touched."""
    advice = hint or "move it away or restore it from a backup"
    return StoreCorrupt(f"{path} {what}; {UNTOUCHED}; {advice}", path=str(path))


def atomic_write(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace *path* by *data*: temp file, fsync, os.replace, fsync of the folder."""
    try:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    except OSError as exc:
        raise StoreError(f"cannot write in {path.parent}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    if sync_dir:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename in *folder* durable (POSIX; Windows has no directory fsync)."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_private(path: Path, *, folder: bool = False) -> os.stat_result | None:
    """StoreUnsafe unless *path* (and a symlink's target) is ours and others may not write it.

    What *path* is (a symlink's target), or None when nothing is there.
    """
    try:
        status = os.lstat(path)
        check_stat(path, status, folder=folder)
        if stat.S_ISLNK(status.st_mode):
            status = os.stat(path)
            check_stat(path, status, folder=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return status


def check_stat(path: Path, status: os.stat_result, *, folder: bool = False) -> None:
    """StoreUnsafe unless *status* (of *path*) says we own it and others may not write it."""
    if os.name == "nt":  # no POSIX owners or modes to trust
        return
    me, mode = os.geteuid(), stat.S_IMODE(status.st_mode)
    what = "store folder" if folder else "store file"
    if status.st_uid != me:
        fix = f"remove it, or set {ENV_STORE} to a folder of your own" if folder else "remove it"
        raise StoreUnsafe(
            f"the {what} {path} is owned by uid {status.st_uid}, not you (uid {me}); {fix}",
            path=str(path),
        )
    if mode & 0o022 and not stat.S_ISLNK(status.st_mode):
        private = "700" if folder else "600"
        raise StoreUnsafe(
            f"the {what} {path} is writable by others (mode {mode:04o}); check that what is "
            f"in it is yours, then fix with chmod {private} {path}",
            path=str(path),
        )


def check_root(root: Path) -> None:
    """StoreUnsafe if others may replace the users' folders in *root* (writable, not sticky).

    A shared root (``/srv/nbchat`` 1777, or 0755 owned by root) is fine: each
    user's folder in it is checked to be theirs.
    """
    if os.name == "nt":
        return
    try:
        mode = stat.S_IMODE(os.stat(root).st_mode)
    except OSError as exc:
        raise StoreError(f"cannot read {root}: {exc.strerror or exc}") from exc
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise StoreUnsafe(
            f"the store root {root} is writable by others without the sticky bit (mode "
            f"{mode:04o}), so anyone could replace your folder in it; fix with chmod +t {root}",
            path=str(root),
        )


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
