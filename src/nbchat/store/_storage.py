"""The TinyDB storage under the thread store: atomic writes, and trusting only our own files.

TinyDB's ``JSONStorage`` writes in place and then truncates, and keeps its file
handle open: a SIGKILL mid-write leaves new JSON followed by the old tail.
:class:`AtomicJSONStorage` writes each new version of a file to a temporary
file in the same folder, flushes and fsyncs it, moves it over the old one
with :func:`os.replace` and fsyncs the folder (once per operation when it
writes two files there). A reader, or the next process after a crash, sees
the old version or the new one, whole. Files are opened only inside
:meth:`~AtomicJSONStorage.read` and :meth:`~AtomicJSONStorage.flush`.

The storage itself does not lock: :class:`~nbchat.store._files.UserFolder`
holds the lock around each whole operation, which opens a fresh
:func:`open_db` inside it, so nothing read before the lock (TinyDB's query
cache, its next-id cache, parsed data) is ever used. Within that one
operation the storage keeps the data it read and buffers TinyDB's writes:
the file is parsed once and written once, at the end, and an operation that
fails half-way writes nothing.

Everything is trusted only if it is ours alone, as ssh trusts ``~/.ssh``: the
user's folder, its lock and every file read must be owned by this process's
user and not writable by group or others, and the root must not let others
replace the folder (writable only with the sticky bit). Otherwise
:class:`~nbchat.base.errors.StoreUnsafe` names the folder or file and the fix, so
threads someone else planted never pass for the user's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from tinydb import TinyDB
from tinydb.storages import Storage

from ..base.config import ENV_STORE
from ..base.errors import StoreCorrupt, StoreError, StoreUnsafe

TEMP_SUFFIX = ".tmp"
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
