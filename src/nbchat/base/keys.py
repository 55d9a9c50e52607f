"""API keys kept per endpoint name: in the system keyring, else in one file only you can read.

The keyring is the ``keyring`` library's (macOS Keychain, Windows Credential
Locker, Secret Service on Linux), under the service :data:`KEYRING_SERVICE`
with the endpoint's name as the username. Where no keyring backend works (a
headless server, a container), keys go to :func:`keys_file`: created 0600,
written whole (a temporary file, fsync, rename), each change read and written
under a lock, so two processes writing at once lose nothing and a crash
leaves the old file or the new one. ``NBCHAT_KEYS=keyring|file`` chooses one;
:meth:`KeyStore.where` says in one line which is used.

A key never appears in a message, a repr or a log, and every key set or read
is given to the scrubber (:func:`nbchat.base._secrets.remember`), which hides
it from whatever nbchat sends or shows. ``keyring`` is imported on first use:
``import nbchat`` stays a few milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from ._secrets import remember
from .errors import KeyStoreError

__all__ = ["ENV_KEYS", "KEYRING_SERVICE", "KeyStore", "key_store", "keys_file", "stored_key"]

ENV_KEYS = "NBCHAT_KEYS"  # "keyring" | "file" | "" (choose): where keys are kept
KEYRING_SERVICE = "nbchat"  # the keyring's service name; the username is the endpoint's name
KEYS_NAME = "keys.json"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
LOCK_TIMEOUT = 30.0  # seconds another process may hold the keys file's lock
FILE_FIX = "or set NBCHAT_KEYS=file to keep keys in a file only you can read"

T = TypeVar("T")


def keys_file() -> Path:
    """``<jupyter data dir>/nbchat/keys.json``: where keys go when no keyring works."""
    # jupyter_core's, as nbchat.base.config.jupyter_data_dir: config imports this module.
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "nbchat" / KEYS_NAME


@dataclass(frozen=True)
class KeyStore:
    """Where keys are kept: ``"keyring"`` (the system's) or ``"file"`` (:func:`keys_file`)."""

    kind: Literal["keyring", "file"]

    def where(self) -> str:
        """Where the keys are, in words: the keyring and its backend, or the file's path."""
        if self.kind == "file":
            return f"the file {keys_file()} (readable by you only)"
        backend = _backend()
        return f"the system keyring ({backend.name if backend else 'none works here'})"

    def get(self, name: str) -> str | None:
        """The key kept here for endpoint ``name``, or None; KeyStoreError if the store refuses."""
        _check_name(name)
        if self.kind == "file":
            key = _read_file(keys_file()).get(name)
        else:
            key = _keyring_call("read", name, lambda kr: kr.get_password(KEYRING_SERVICE, name))
        remember(key)
        return key or None

    def set(self, name: str, key: str) -> None:
        """Keep ``key`` for endpoint ``name``, replacing the one kept before."""
        _check_name(name)
        if not isinstance(key, str) or not key.strip() or not key.strip().isprintable():
            raise KeyStoreError(
                f"the key given for {name!r} is empty or holds a line break or another "
                f"control character; give it again, whole, on one line",
                name=name, reason="unusable",
            )  # fmt: skip
        key = key.strip()
        remember(key)
        if self.kind == "file":
            with _file_update() as keys:
                keys[name] = key
        else:
            _keyring_call("keep", name, lambda kr: kr.set_password(KEYRING_SERVICE, name, key))

    def remove(self, name: str) -> bool:
        """Forget the key kept for ``name``; whether there was one.

        The keyring's store also forgets a copy the keys file holds, since
        :func:`stored_key` would find it there.
        """
        _check_name(name)
        if self.kind == "keyring":
            had = _keyring_call("forget", name, _deleted(name))
            in_file = keys_file().exists() and KeyStore("file").remove(name)
            return had or in_file
        if not keys_file().exists():
            return False
        with _file_update() as keys:
            return keys.pop(name, None) is not None

    def names(self) -> list[str]:
        """The endpoints with a key here, sorted.

        Only the file can say: a keyring cannot list what it holds, so its
        store answers ``[]`` (ask :meth:`get` for each name instead).
        """
        return sorted(_read_file(keys_file())) if self.kind == "file" else []


def key_store() -> KeyStore:
    """The store ``NBCHAT_KEYS`` names, else the system keyring where one works, else the file."""
    chosen = os.environ.get(ENV_KEYS, "").strip().lower()
    if chosen in ("keyring", "file"):
        return KeyStore("keyring" if chosen == "keyring" else "file")
    if chosen:
        raise KeyStoreError(
            f"{ENV_KEYS}={chosen!r} is not a place for keys; set it to keyring or file, or "
            f"unset it to use the system keyring where one works", reason="unusable",
        )  # fmt: skip
    return KeyStore("keyring" if _backend() is not None else "file")


def stored_key(name: str) -> str | None:
    """The key kept for endpoint ``name`` wherever it is kept, or None.

    Asks the store :func:`key_store` chooses, then, when that is the keyring
    and it holds none, the keys file (a key kept there before a keyring
    worked). A missing or failing keyring reads as no key; a locked or
    refusing one raises :class:`KeyStoreError`, one line naming the fix.
    """
    store = key_store()
    try:
        key = store.get(name)
    except KeyStoreError as err:
        if err.reason not in ("missing", "broken"):
            raise
        key = None
    if key is None and store.kind == "keyring" and keys_file().exists():
        key = KeyStore("file").get(name)
    return key


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise KeyStoreError(
            f"endpoint name {name!r} is not usable; use letters, digits, '_', '.' or '-' "
            f"(up to 64, starting with a letter or digit), e.g. openai or work-ollama",
            reason="unusable",
        )  # fmt: skip


def _backend() -> Any | None:
    """The keyring backend that works here, or None (none installed, or only the failing ones)."""
    try:
        import keyring
        from keyring.backends import chainer, fail

        found = keyring.get_keyring()
        usable = not isinstance(found, fail.Keyring) and found.priority > 0
        if isinstance(found, chainer.ChainerBackend):
            usable = usable and bool(found.backends)
    except Exception:  # not installed, or it cannot even start here
        return None
    return found if usable else None


def _deleted(name: str) -> Callable[[Any], bool]:
    def delete(backend: Any) -> bool:
        from keyring.errors import PasswordDeleteError

        try:
            backend.delete_password(KEYRING_SERVICE, name)
        except PasswordDeleteError:  # none kept under that name
            return False
        return True

    return delete


def _keyring_call(verb: str, name: str, call: Callable[[Any], T]) -> T:
    """``call(backend)``, whatever goes wrong one KeyStoreError without the key or its cause."""
    backend = _backend()
    if backend is None:
        raise KeyStoreError(
            f"no system keyring works here to {verb} the key for {name!r}; start one "
            f"(a Secret Service such as gnome-keyring), {FILE_FIX}", name=name, reason="missing",
        )  # fmt: skip
    try:
        return call(backend)
    except Exception as err:  # keyring's errors, and D-Bus's surfacing through it
        raise _refused(backend, verb, name, err) from None  # the cause may quote the key


def _refused(backend: Any, verb: str, name: str, err: Exception) -> KeyStoreError:
    from keyring.errors import InitError, KeyringError, KeyringLocked

    where = f"the system keyring ({backend.name})"
    if isinstance(err, KeyringLocked):
        reason, told = "locked", f"refused to {verb} the key for {name!r} (locked); unlock it"
    elif isinstance(err, KeyringError) and not isinstance(err, InitError):
        reason, told = "refused", f"refused to {verb} the key for {name!r} " \
            f"({type(err).__name__}); unlock it or allow nbchat"  # fmt: skip
    else:
        reason, told = "broken", f"failed to {verb} the key for {name!r} " \
            f"({type(err).__name__}); restart it"  # fmt: skip
    return KeyStoreError(f"{where} {told}, {FILE_FIX}", name=name, reason=reason)


def _read_file(path: Path) -> dict[str, str]:
    """The keys ``path`` holds (none when it is missing); a damaged file raises, untouched."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise KeyStoreError(f"cannot read the keys file {path} ({err.strerror}); make it "
                            f"yours and readable by you only (chmod 600)",
                            reason="broken") from None  # fmt: skip
    try:
        keys = json.loads(data)["keys"]
        if not all(isinstance(v, str) and isinstance(k, str) for k, v in keys.items()):
            raise ValueError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise KeyStoreError(
            f"the keys file {path} is damaged (not keys nbchat wrote) and was left as it is; "
            f"remove it, then keep the keys again: python -m nbchat keys set NAME",
            reason="damaged",
        ) from None  # fmt: skip
    return dict(keys)


@contextmanager
def _file_update() -> Iterator[dict[str, str]]:
    """The keys file's keys to change in the block, written back whole, under its lock."""
    from filelock import FileLock, Timeout

    path = keys_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        raise KeyStoreError(f"another process held {lock.lock_file} for {LOCK_TIMEOUT:.0f} s; "
                            f"try again when it is done", reason="busy") from None  # fmt: skip
    try:
        keys = _read_file(path)
        before = dict(keys)
        yield keys
        if keys != before:
            _write_private(path, {"keys": dict(sorted(keys.items()))})
    finally:
        lock.release()


def _write_private(path: Path, document: dict[str, Any]) -> None:
    """Replace ``path`` with ``document``, readable by its owner only, all or nothing."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if hasattr(os, "fchmod"):  # mkstemp's 0600, whatever the umask took away (not Windows)
            os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)  # a file with wider permissions is replaced by this 0600 one
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    if os.name == "posix":  # the rename itself survives a crash
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
