"""A store folder or file that someone else owns, or others may write, is refused (as ssh does)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from nbchat.base.errors import StoreError, StoreUnsafe
from nbchat.store import ThreadStore
from nbchat.store._files import user_dirname
from shell_helpers import Ran

NOBODY = 65534


def give_away(path: Path) -> int:
    """Make *path* another user's and return their uid.

    Root gives it to nobody; anyone else replaces it by a link to something root owns.
    """
    if os.geteuid() == 0:
        for place in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.chown(place, NOBODY, NOBODY, follow_symlinks=False)
        return NOBODY
    target = "/" if path.is_dir() else "/etc/passwd"
    if path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    else:
        path.unlink()
    path.symlink_to(target)
    return 0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def planted(root: Path) -> Path:
    """Ana's folder with a thread in it, as someone else might have made it before her."""
    store = ThreadStore(root, "ana")
    store.new_thread("m", title="planted")
    return store.folder


def test_a_folder_someone_else_made_is_refused(root: Path) -> None:
    folder = planted(root)
    uid = give_away(folder)
    store = ThreadStore(root, "ana")
    message = (
        f"the store folder {folder} is owned by uid {uid}, not you (uid {os.geteuid()}); "
        f"remove it, or set NBCHAT_STORE to a folder of your own"
    )
    for call in (store.thread_list, lambda: store.get(1), lambda: store.new_thread("m")):
        with pytest.raises(StoreUnsafe) as caught:
            call()
        assert (str(caught.value), caught.value.path) == (message, str(folder))
    assert isinstance(caught.value, StoreError)


def test_a_folder_others_may_write_is_refused_until_fixed(root: Path) -> None:
    folder = planted(root)
    folder.chmod(0o777)
    store = ThreadStore(root, "ana")
    with pytest.raises(StoreUnsafe) as caught:
        store.thread_list()
    assert str(caught.value) == (
        f"the store folder {folder} is writable by others (mode 0777); check that what is "
        f"in it is yours, then fix with chmod 700 {folder}"
    )
    folder.chmod(0o700)
    assert store.thread_list() == [(1, "planted")]


READERS = [  # a file, and an operation that reads it
    ("meta.json", lambda store: store.new_thread("m")),
    ("thread-1.json", lambda store: store.thread_list()),
    ("thread-1.json", lambda store: store.get(1)),
    ("index-0.json", lambda store: store.thread_list()),
]


@pytest.mark.parametrize(("name", "call"), READERS)
def test_a_file_others_may_write_is_refused(root: Path, name: str, call: Callable) -> None:
    folder = planted(root)
    ThreadStore(root, "ana").thread_list()  # writes the index
    (folder / name).chmod(0o666)
    with pytest.raises(StoreUnsafe) as caught:
        call(ThreadStore(root, "ana"))
    assert str(caught.value) == (
        f"the store file {folder / name} is writable by others (mode 0666); check that what "
        f"is in it is yours, then fix with chmod 600 {folder / name}"
    )


@pytest.mark.parametrize(("name", "call"), READERS[:3])
def test_a_file_someone_else_planted_is_refused(root: Path, name: str, call: Callable) -> None:
    folder = planted(root)
    uid = give_away(folder / name)
    with pytest.raises(StoreUnsafe) as caught:
        call(ThreadStore(root, "ana"))
    assert str(caught.value) == (
        f"the store file {folder / name} is owned by uid {uid}, not you (uid {os.geteuid()}); "
        f"remove it"
    )


def test_a_root_others_may_write_without_the_sticky_bit_is_refused(root: Path) -> None:
    root.mkdir(mode=0o700)
    root.chmod(0o777)
    with pytest.raises(StoreUnsafe) as caught:
        ThreadStore(root, "ana").new_thread("m")
    assert str(caught.value) == (
        f"the store root {root} is writable by others without the sticky bit (mode 0777), "
        f"so anyone could replace your folder in it; fix with chmod +t {root}"
    )
    assert list(root.iterdir()) == []  # no folder made where it could be swapped


@pytest.mark.parametrize("mode", [0o1777, 0o755])
def test_a_shared_root_is_fine(root: Path, mode: int) -> None:
    root.mkdir(mode=0o700)
    root.chmod(mode)
    store = ThreadStore(root, "ana")
    assert store.new_thread("m") == 1
    modes = [path.stat().st_mode & 0o777 for path in (store.folder, store.folder / ".lock")]
    assert modes == [0o700, 0o600]


def test_what_the_store_makes_is_private_whatever_the_umask(root: Path) -> None:
    old = os.umask(0)
    try:
        store = ThreadStore(root, "ana")
        store.start_turn(store.new_thread("m"), "q")  # a writer's lock file too
        assert store.thread_list() == [(1, "")]  # the index too
    finally:
        os.umask(old)
    made = sorted(path.name for path in root.rglob("*"))
    writable = [path.name for path in [root, *root.rglob("*")] if path.stat().st_mode & 0o022]
    assert {".lock", "meta.json", "thread-1.json", "writers"} <= set(made), made
    assert writable == []


def test_the_magics_say_it_in_one_line(root: Path, run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_STORE", str(root))
    folder = root / user_dirname(os.environ["NBCHAT_USER"])
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(0o770)
    ran: Ran = run("%chat --list")
    lines = ran.err.splitlines()
    assert lines == [
        f"UsageError: the store folder {folder} is writable by others (mode 0770); check that "
        f"what is in it is yours, then fix with chmod 700 {folder}"
    ], ran


def test_a_lock_file_someone_else_planted_is_refused(root: Path) -> None:
    folder = planted(root)
    lock = folder / ".lock"
    lock.chmod(0o666)
    with pytest.raises(StoreUnsafe, match=rf"^the store file {lock} is writable by others"):
        ThreadStore(root, "ana").thread_list()
    lock.chmod(0o600)
    uid = give_away(lock)
    with pytest.raises(StoreUnsafe) as caught:
        ThreadStore(root, "ana").thread_list()
    assert str(caught.value) == (
        f"the store file {lock} is owned by uid {uid}, not you (uid {os.geteuid()}); remove it"
    )
