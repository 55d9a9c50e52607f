"""Keys kept per endpoint: in a file only you can read, and in a real Secret Service.

The keyring tests start a D-Bus session bus and gnome-keyring-daemon of their
own, with a HOME and XDG folders under the test's tmp_path, and run the key
store in a subprocess given only that bus: the developer's keyring is never
touched, nor is the test process's keyring library ever loaded against it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbchat.base import _secrets
from nbchat.base.errors import ConfigError, KeyStoreError
from nbchat.base.keys import KeyStore, key_store, keys_file, stored_key

KEY = "sk-kept-0123456789abcdef"
OTHER = "sk-other-fedcba9876543210"
DAEMONS = ("dbus-daemon", "gnome-keyring-daemon")
# What would lead a subprocess to another keyring, another bus or a desktop's prompt.
LEAKS = ("NBCHAT_KEYS", "PYTHON_KEYRING_BACKEND", "DBUS_SESSION_BUS_ADDRESS", "DISPLAY",
         "WAYLAND_DISPLAY", "GNOME_KEYRING_CONTROL", "SSH_AUTH_SOCK")  # fmt: skip


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KeyStore:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NBCHAT_KEYS", "file")
    store = key_store()
    assert store.kind == "file"
    return store


def test_the_file_keeps_each_key_readable_by_you_only(file_store: KeyStore, tmp_path: Path):
    before = os.umask(0)  # the file is 0600 whatever the umask would let through
    try:
        file_store.set("openai", KEY)
    finally:
        os.umask(before)
    path = keys_file()
    assert path == tmp_path / "data" / "nbchat" / "keys.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert file_store.where() == f"the file {path} (readable by you only)"
    assert file_store.get("openai") == stored_key("openai") == KEY
    file_store.set("work.ollama-2", OTHER)
    file_store.set("openai", OTHER)  # replaced
    assert json.loads(path.read_text()) == {"keys": {"openai": OTHER, "work.ollama-2": OTHER}}
    assert file_store.names() == ["openai", "work.ollama-2"]
    assert file_store.remove("openai") is True
    assert file_store.remove("openai") is False
    assert file_store.get("openai") is None and stored_key("openai") is None
    assert file_store.names() == ["work.ollama-2"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["keys.json", "keys.json.lock"]


def test_a_file_others_could_read_is_made_private_when_written(file_store: KeyStore):
    path = keys_file()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"keys": {"old": OTHER}}))
    path.chmod(0o644)
    file_store.set("openai", KEY)
    assert path.stat().st_mode & 0o777 == 0o600
    assert file_store.names() == ["old", "openai"]


def test_nothing_is_written_for_a_read_or_a_missing_key(file_store: KeyStore):
    assert file_store.get("openai") is None and file_store.names() == []
    assert file_store.remove("openai") is False
    assert not keys_file().parent.exists()


@pytest.mark.parametrize("damage", [b'{"keys": {"openai": "sk-kept-01234', b"",
                                    b'{"keys": ["sk-kept-0123456789abcdef"]}',
                                    b'{"keys": {"openai": 12}}', b"[1, 2]"])  # fmt: skip
def test_a_damaged_file_is_reported_and_left_as_it_is(file_store: KeyStore, damage: bytes):
    path = keys_file()
    path.parent.mkdir(parents=True)
    path.write_bytes(damage)
    for attempt in (lambda: file_store.set("openai", KEY), lambda: file_store.get("openai"),
                    lambda: file_store.remove("openai"), file_store.names,
                    lambda: stored_key("openai")):  # fmt: skip
        with pytest.raises(KeyStoreError) as caught:
            attempt()
        told = str(caught.value)
        assert str(path) in told and "damaged" in told and "remove it" in told
        assert "python -m nbchat keys set" in told
        assert "\n" not in told and "sk-kept" not in told and caught.value.reason == "damaged"
    assert path.read_bytes() == damage
    assert sorted(p.name for p in path.parent.iterdir()) == ["keys.json", "keys.json.lock"]


def test_a_write_that_fails_leaves_the_old_file_whole(
    file_store: KeyStore, monkeypatch: pytest.MonkeyPatch
):
    file_store.set("openai", KEY)
    kept = keys_file().read_bytes()

    def crash(*args: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched, pytest.raises(OSError):
        patched.setattr(os, "replace", crash)
        file_store.set("other", OTHER)
    assert keys_file().read_bytes() == kept
    assert sorted(p.name for p in keys_file().parent.iterdir()) == ["keys.json", "keys.json.lock"]


WRITER = """
import sys, time
from pathlib import Path
from nbchat.base.keys import key_store
prefix, go = sys.argv[1], Path(sys.argv[2])
store = key_store()
while not go.exists():
    time.sleep(0.005)
for n in range(50):
    store.set(f"{prefix}{n}", f"sk-{prefix}-{n:04d}-0123456789")
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path):
    env = {**os.environ, "NBCHAT_KEYS": "file", "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    go = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, prefix, str(go)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for prefix in ("a", "b")
    ]
    time.sleep(1.0)  # both imported and waiting, so they write at the same time
    go.touch()
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
    kept = json.loads((tmp_path / "data" / "nbchat" / "keys.json").read_text())["keys"]
    assert kept == {f"{p}{n}": f"sk-{p}-{n:04d}-0123456789" for p in "ab" for n in range(50)}


def test_a_name_or_key_that_cannot_be_kept_is_refused_without_the_key(file_store: KeyStore):
    for name in ("bad name", "", "-dash", "x" * 65, "a/b", "openai\n"):
        with pytest.raises(KeyStoreError, match="letters, digits") as caught:
            file_store.set(name, KEY)
        assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    for key in ("", "   ", f"{KEY}\n{KEY}", f"{KEY}\x00"):
        with pytest.raises(KeyStoreError, match="one line") as caught:
            file_store.set("openai", key)
        assert KEY not in str(caught.value) and KEY not in repr(caught.value)
        assert caught.value.name == "openai" and caught.value.reason == "unusable"
    assert not keys_file().exists()
    assert issubclass(KeyStoreError, ConfigError)


def test_a_key_kept_or_read_is_hidden_from_what_nbchat_shows(file_store: KeyStore):
    file_store.set("openai", f"  {KEY}  ")  # kept without the spaces pasted around it
    assert file_store.get("openai") == KEY
    assert KEY not in repr(file_store) and KEY not in file_store.where()
    assert _secrets.scrub(f"the key is {KEY}") == "the key is [redacted]"
    err = pickle.loads(pickle.dumps(KeyStoreError("refused", name="openai", reason="locked")))
    assert (str(err), err.name, err.reason) == ("refused", "openai", "locked")


def test_nbchat_keys_says_where_or_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NBCHAT_KEYS", "Keyring ")
    assert key_store() == KeyStore("keyring")
    monkeypatch.setenv("NBCHAT_KEYS", "vault")
    with pytest.raises(KeyStoreError, match="keyring or file"):
        key_store()


NO_BACKEND = """
import json, os
from nbchat.base.keys import KeyStore, KeyStoreError, key_store, keys_file, stored_key
chosen = key_store()
said = {"kind": chosen.kind, "where": chosen.where(), "file": str(keys_file())}
chosen.set("openai", "sk-kept-0123456789abcdef")
os.environ["NBCHAT_KEYS"] = "keyring"
said["forced"] = key_store().where()
said["read"] = stored_key("openai")  # no keyring to read: the file's key, no error
try:
    key_store().set("other", "sk-other-fedcba9876543210")
except KeyStoreError as err:
    said["refused"], said["reason"] = str(err), err.reason
print(json.dumps(said))
"""


def test_with_no_keyring_backend_the_file_is_chosen(tmp_path: Path):
    env = _bare_env(tmp_path)
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
    said = _run(NO_BACKEND, env)
    assert said["kind"] == "file"
    assert said["where"] == f"the file {said['file']} (readable by you only)"
    assert said["file"] == str(tmp_path / "jupyter-data" / "nbchat" / "keys.json")
    assert said["forced"] == "the system keyring (none works here)"
    assert said["read"] == KEY
    assert said["reason"] == "missing" and "NBCHAT_KEYS=file" in said["refused"]
    assert "\n" not in said["refused"] and OTHER not in said["refused"]


@pytest.fixture
def secret_service(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a private D-Bus session with gnome-keyring's Secret Service, unlocked."""
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not installed: the keyring tests need a real "
                    f"Secret Service; run .ci/run, which installs them (apt-get install "
                    f"gnome-keyring dbus)", pytrace=False)  # fmt: skip
    env = _bare_env(tmp_path)
    runtime = Path(tempfile.mkdtemp(prefix="nbk-"))  # short: a socket's path has ~100 bytes
    env["XDG_RUNTIME_DIR"] = str(runtime)
    bus = subprocess.run(["dbus-daemon", "--session", f"--address=unix:path={runtime}/bus",
                          "--print-address=1", "--print-pid=1", "--fork"], env=env,
                         capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    address, bus_pid = bus.stdout.split()
    env["DBUS_SESSION_BUS_ADDRESS"] = address
    log = tmp_path / "gnome-keyring.log"
    with log.open("wb") as written:
        daemon = subprocess.Popen(["gnome-keyring-daemon", "--foreground", "--unlock",
                                   "--components=secrets"], stdin=subprocess.PIPE,
                                  stdout=written, stderr=written, env=env)  # fmt: skip
    try:
        assert daemon.stdin is not None
        daemon.stdin.write(b"the login keyring's password")  # --unlock reads it to the end
        daemon.stdin.close()
        _wait_for_secrets(address, daemon, log)
        yield env
    finally:
        daemon.terminate()
        daemon.wait(10)
        os.kill(int(bus_pid), signal.SIGTERM)
        shutil.rmtree(runtime, ignore_errors=True)


def _wait_for_secrets(address: str, daemon: subprocess.Popen[bytes], log: Path) -> None:
    """Until the daemon owns org.freedesktop.secrets (asked without starting it)."""
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection

    deadline = time.monotonic() + 20
    with open_dbus_connection(bus=address) as bus:
        while time.monotonic() < deadline:
            owned = bus.send_and_get_reply(message_bus.NameHasOwner("org.freedesktop.secrets"))
            if owned.body[0]:
                return
            if daemon.poll() is not None:
                break
            time.sleep(0.05)
    pytest.fail(f"gnome-keyring-daemon did not start: {log.read_text(errors='replace')}")


ROUND_TRIP = """
import json, secretstorage
from nbchat.base.keys import key_store, keys_file, stored_key
store = key_store()
said = {"kind": store.kind, "where": store.where(), "file": str(keys_file())}
store.set("openai", "sk-kept-0123456789abcdef")
said["read"], said["names"] = stored_key("openai"), store.names()
said["removed"], said["again"] = store.remove("openai"), store.remove("openai")
said["after"] = stored_key("openai")
store.set("work", "sk-kept-0123456789abcdef")  # left kept: looked for on disk below
collection = secretstorage.get_default_collection(secretstorage.dbus_init())
said["in_service"] = [item.get_secret().decode() for item in
                      collection.search_items({"service": "nbchat", "username": "work"})]
print(json.dumps(said))
"""


def test_a_real_secret_service_keeps_the_key(secret_service: dict[str, str], tmp_path: Path):
    said = _run(ROUND_TRIP, secret_service)
    assert said["kind"] == "keyring"
    assert said["where"] == "the system keyring (SecretService Keyring)"
    assert said["read"] == KEY and said["names"] == []
    assert (said["removed"], said["again"], said["after"]) == (True, False, None)
    assert said["in_service"] == [KEY]
    assert not Path(said["file"]).exists()
    holding = [path for path in tmp_path.rglob("*")
               if path.is_file() and KEY.encode() in path.read_bytes()]  # fmt: skip
    assert holding == []  # not in the keys file, nor in the keyring's (encrypted) files


LOCKED = """
import json, secretstorage
from nbchat.base.keys import KeyStoreError, key_store, stored_key
store = key_store()
store.set("openai", "sk-kept-0123456789abcdef")
secretstorage.get_default_collection(secretstorage.dbus_init()).lock()
said = []
for attempt in (lambda: store.set("other", "sk-other-fedcba9876543210"),
                lambda: store.get("openai"), lambda: stored_key("openai"),
                lambda: store.remove("openai")):
    try:
        said.append(["answered", "", repr(attempt())])
    except KeyStoreError as err:
        said.append([str(err), err.reason, repr(err)])
print(json.dumps(said))
"""


def test_a_locked_keyring_refuses_in_one_line(secret_service: dict[str, str]):
    for told, reason, shown in _run(LOCKED, secret_service):
        assert reason == "locked", told
        assert told.startswith("the system keyring (SecretService Keyring) refused to ")
        assert "(locked); unlock it, or set NBCHAT_KEYS=file" in told
        assert "\n" not in told and KEY not in told + shown and OTHER not in told + shown


def _bare_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment with a HOME, XDG and Jupyter folders of the test's own."""
    env = {name: value for name, value in os.environ.items() if name not in LEAKS}
    home = tmp_path / "home"
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"))  # fmt: skip
    home.mkdir(exist_ok=True)
    return env


def _run(code: str, env: dict[str, str]) -> Any:
    """What ``code``, run by a fresh Python in ``env``, printed last, as JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])
