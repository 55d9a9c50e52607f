"""Real IPython kernels for tests: run code, see every IOPub message, get saved outputs.

Two ways in, as a front end would:

- :class:`Kernel` talks to a kernel through jupyter_client like JupyterLab
  does (``allow_stdin`` true, so nbchat renders live); ``interactive=False``
  sends what nbclient and nbval send. Each :meth:`Kernel.run` returns a
  :class:`CellRun`: the raw IOPub messages (to count display updates), the
  execute reply, and the outputs a notebook would save (display updates
  applied, streams merged).
- :func:`run_notebook` executes cells with nbclient, as nbval and papermill
  do, and returns the executed notebook.

Kernels get an isolated environment (:func:`kernel_env`): their own
IPYTHONDIR and Jupyter dirs, so no user profile or startup file leaks in,
plus whatever the test sets (``NBCHAT_BASE_URL`` of a scripted server, a store).
``Kernel(python=...)`` runs another interpreter, e.g. a throwaway venv's.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markup_helpers import visible

DISPLAY_TYPES = ("display_data", "update_display_data")
OUTPUT_TYPES = ("stream", "display_data", "update_display_data", "execute_result", "error",
                "clear_output")


def kernel_env(root: Path, **overrides: str | None) -> dict[str, str]:
    """``os.environ`` with isolated IPython/Jupyter dirs under ``root``; None removes a name."""
    root.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    for name, sub in (("IPYTHONDIR", "ipython"), ("JUPYTER_CONFIG_DIR", "jupyter-config"),
                      ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"),
                      ("JUPYTER_DATA_DIR", "jupyter-data")):
        (root / sub).mkdir(exist_ok=True)
        env[name] = str(root / sub)
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # debugpy's frozen-modules note on stderr
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    env["NBCHAT_KEYS"] = "file"  # kept keys go to a file under root, never the machine's keyring
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@dataclass
class CellRun:
    """One execution: its IOPub messages, its reply and the outputs a notebook would keep."""

    code: str
    msg_id: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    reply: dict[str, Any] = field(default_factory=dict)
    input_requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.reply.get("status"))

    def of_type(self, *msg_types: str) -> list[dict[str, Any]]:
        """The IOPub messages of these types, in order."""
        return [m for m in self.messages if m["header"]["msg_type"] in msg_types]

    @property
    def display_messages(self) -> list[dict[str, Any]]:
        return self.of_type(*DISPLAY_TYPES)

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The outputs as saved in a notebook (what JupyterLab and nbclient keep)."""
        return outputs_from(self.messages)

    def stream(self, name: str) -> str:
        return "".join(
            m["content"]["text"] for m in self.of_type("stream") if m["content"]["name"] == name
        )

    @property
    def stdout(self) -> str:
        return self.stream("stdout")

    @property
    def stderr(self) -> str:
        return self.stream("stderr")

    def text(self) -> str:
        """Everything visible, as plain text: streams and each output's best text."""
        parts = []
        for output in self.outputs:
            if output["output_type"] == "stream":
                parts.append(output["text"])
            elif output["output_type"] == "error":
                parts.append("\n".join(output["traceback"]))
            else:
                data = output.get("data", {})
                parts.append(visible(data["text/html"]) if "text/html" in data else
                             str(data.get("text/plain", "")))
        return "\n".join(parts)


def outputs_from(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Apply IOPub output messages as a notebook front end does."""
    outputs: list[dict[str, Any]] = []
    for message in messages:
        kind, content = message["header"]["msg_type"], message["content"]
        display_id = content.get("transient", {}).get("display_id")
        if kind == "stream":
            if outputs and outputs[-1]["output_type"] == "stream" and (
                outputs[-1]["name"] == content["name"]
            ):
                outputs[-1]["text"] += content["text"]
            else:
                outputs.append({"output_type": "stream", "name": content["name"],
                                "text": content["text"]})
        elif kind in ("display_data", "execute_result"):
            outputs.append({"output_type": kind, "data": dict(content["data"]),
                            "metadata": dict(content["metadata"]), "display_id": display_id})
        elif kind == "update_display_data":
            for output in outputs:
                if output.get("display_id") == display_id:
                    output["data"], output["metadata"] = (dict(content["data"]),
                                                          dict(content["metadata"]))
        elif kind == "error":
            outputs.append({"output_type": "error", "ename": content["ename"],
                            "evalue": content["evalue"], "traceback": content["traceback"]})
        elif kind == "clear_output":
            outputs.clear()
    return outputs


class Kernel:
    """A running IPython kernel and a client, as a notebook front end holds them."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        *,
        python: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.env = dict(env if env is not None else os.environ)
        self.python = str(python or sys.executable)
        self.cwd = str(cwd) if cwd is not None else None
        self.startup_timeout = startup_timeout
        self.manager: Any = None
        self.client: Any = None

    def start(self) -> Kernel:
        from jupyter_client import KernelManager
        from jupyter_client.kernelspec import KernelSpecManager

        spec_dir = Path(self.env.get("JUPYTER_DATA_DIR") or _temp_dir()) / "kernels" / "test"
        spec_dir.mkdir(parents=True, exist_ok=True)
        argv = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec_dir / "kernel.json").write_text(json.dumps(
            {"argv": argv, "display_name": "test", "language": "python"}
        ))
        specs = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)], ensure_native_kernel=False)
        self.manager = KernelManager(kernel_name="test", kernel_spec_manager=specs)
        self.manager.start_kernel(env=self.env, cwd=self.cwd)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=self.startup_timeout)
        return self

    def shutdown(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
        if self.manager is not None and self.manager.has_kernel:
            self.manager.shutdown_kernel(now=True)
        self.client = self.manager = None

    def __enter__(self) -> Kernel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def restart(self) -> None:
        """Restart the kernel as the front end's Restart does: the same connection file."""
        self.manager.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=self.startup_timeout)

    def interrupt(self) -> None:
        """Interrupt the kernel (SIGINT), as the front end's stop button does."""
        self.manager.interrupt_kernel()

    def run(
        self,
        code: str,
        *,
        interactive: bool = True,
        timeout: float = 60.0,
        on_message: Callable[[dict[str, Any], Kernel], None] | None = None,
        stdin: Callable[[dict[str, Any]], str] | None = None,
    ) -> CellRun:
        """Execute ``code`` and wait until the kernel is idle again.

        ``interactive`` sends ``allow_stdin`` like JupyterLab (true) or like
        nbclient/nbval (false). ``on_message(message, kernel)`` sees each IOPub
        message of this execution as it arrives (e.g. to interrupt).
        ``stdin(content)`` answers each input request (``input()``, ``getpass``)
        as a person would, with the text it returns; the requests are kept in
        ``run.input_requests``.
        """
        msg_id = self.client.execute(code, allow_stdin=interactive, store_history=True)
        run = CellRun(code, msg_id)
        deadline = time.monotonic() + timeout
        while True:
            if stdin is not None:
                self._answer_input(stdin, run)
            get = self.client.get_iopub_msg
            message = self._next(get, deadline, run) if stdin is None else self._poll(get, deadline)
            if message is None or message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = message["header"]["msg_type"]
            if kind == "status" and message["content"]["execution_state"] == "idle":
                break
            if kind in OUTPUT_TYPES:
                run.messages.append(message)
                if on_message is not None:
                    on_message(message, self)
        while True:
            reply = self._next(self.client.get_shell_msg, deadline, run)
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                run.reply = reply["content"]
                return run

    def _answer_input(self, stdin: Callable[[dict[str, Any]], str], run: CellRun) -> None:
        try:
            request = self.client.get_stdin_msg(timeout=0)
        except queue.Empty:
            return
        run.input_requests.append(request["content"])
        self.client.input(stdin(request["content"]))

    def _poll(self, get: Callable[..., dict[str, Any]], deadline: float) -> Any:
        """The next message, or None after a moment (to look at stdin); TimeoutError at the end."""
        if time.monotonic() > deadline:
            raise TimeoutError("the kernel did not finish in time")
        try:
            return get(timeout=0.05)
        except queue.Empty:
            return None

    def _next(self, get: Callable[..., dict[str, Any]], deadline: float, run: CellRun) -> Any:
        try:
            return get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(
                f"the kernel did not finish {run.code[:60]!r} in time; so far: {run.text()!r}"
            ) from None

    def ok(self, code: str, **kwargs: Any) -> CellRun:
        """:meth:`run`, failing the test with what the cell showed unless it succeeded."""
        run = self.run(code, **kwargs)
        assert run.status == "ok", f"{code!r} failed: {run.text()}"
        return run


def run_notebook(
    cells: Iterable[str],
    env: Mapping[str, str],
    *,
    timeout: float = 60.0,
    allow_errors: bool = False,
    cwd: str | os.PathLike[str] | None = None,
) -> Any:
    """Execute code cells with nbclient (non-interactive, as nbval does); the notebook."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    client = NotebookClient(
        notebook, timeout=timeout, allow_errors=allow_errors, kernel_name="python3",
        resources={"metadata": {"path": str(cwd or os.getcwd())}},
    )
    client.execute(env=dict(env))
    return notebook


def _temp_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="nbchat-kernel-")


@contextmanager
def module_kernel(
    tmp_path_factory: Any, server: Any, setup: str, **env: str
) -> Iterator[Kernel]:
    """A kernel a test module shares: its own folders and store, user kim, on ``server``.

    ``setup`` runs first (``%load_ext nbchat`` and whatever the module needs);
    ``env`` adds to or overrides the environment.
    """
    environment = kernel_env(
        tmp_path_factory.mktemp("kernel"), NBCHAT_BASE_URL=server.url,
        NBCHAT_STORE=str(tmp_path_factory.mktemp("store")), NBCHAT_USER="kim",
        NBCHAT_MODEL="scripted-small", **env,
    )  # fmt: skip
    with Kernel(environment, cwd=tmp_path_factory.mktemp("cwd")) as started:
        started.ok(setup)
        yield started
