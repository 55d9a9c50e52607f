"""Drive a real JupyterLab server from headless Chromium, the way a person would.

`start_jupyterlab` runs an isolated `jupyter-lab` (its own config, data, runtime
and IPython dirs, a tmp root dir, a random token) whose kernels use this
interpreter's environment. `launch_chromium` starts Debian's Chromium through
Playwright. `open_notebook` writes a notebook, opens it and hands back a
`NotebookPage` that runs cells and reads their outputs.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import nbformat
from playwright.sync_api import Browser, Locator, Page, Playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    # Containers often mount a 64 MB /dev/shm, too small for Chromium's renderer.
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "e2e"
POLL_SECONDS = 0.5
# Inherited, these would let user paths (a python3 kernelspec on JUPYTER_PATH),
# ports or tokens back into the isolated server.
_UNISOLATING_VARS = frozenset(
    {"JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_TOKEN", "JUPYTER_PORT", "PYTHONHOME"}
)

# JupyterLab asks whether to fetch news in a toast that can cover the notebook.
_LAB_USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}

# Finds the notebook panel for a path through `window.jupyterapp`
# (exposed by --LabApp.expose_app_in_browser).
_JS_PANEL = """
(path) => {
    const app = window.jupyterapp;
    if (!app) return null;
    for (const w of app.shell.widgets('main')) {
        if (w.context && w.context.path === path && w.content && w.sessionContext) return w;
    }
    return null;
}
"""
_JS_KERNEL_IDLE = f"""
(path) => {{
    const panel = ({_JS_PANEL})(path);
    const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
    return !!kernel && kernel.status === 'idle' && kernel.connectionStatus === 'connected';
}}
"""
_JS_EXECUTION_COUNT = f"""
([path, index]) => {{
    const panel = ({_JS_PANEL})(path);
    return panel.content.widgets[index].model.executionCount;
}}
"""


class JupyterLabError(RuntimeError):
    """The JupyterLab server did not start or answer; the message carries its log."""


@dataclass(frozen=True)
class JupyterLab:
    """A running JupyterLab server started by `start_jupyterlab`."""

    url: str
    token: str
    root_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def lab_url(self, path: str = "") -> str:
        """Return the browser URL of `/lab/tree/<path>`, with the token and a reset workspace."""
        return f"{self.url}/lab/tree/{path}?token={self.token}&reset"

    def api(self, path: str, method: str = "GET") -> object:
        """Call the REST API at `/api/<path>` and return the decoded JSON (None if empty)."""
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log(self) -> str:
        """Return the server's combined stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(base_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Build the server's environment: os.environ now, isolated dirs, then `extra`.

    Kernels inherit the server's environment, so `extra` is how a test points them
    at a loopback server (NBCHAT_BASE_URL, NBCHAT_STORE, ...). Inherited
    `NBCHAT_*` variables are dropped: a session server starts during whichever
    test comes first, and must not keep that test's settings.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("NBCHAT_") and key not in _UNISOLATING_VARS
    }
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["VIRTUAL_ENV"] = sys.prefix
    # The env's share/jupyter (kernelspec python3, the ipywidgets lab extension)
    # stays on the data path: only the per-user dirs are replaced.
    for var, name in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ]:
        env[var] = str(base_dir / name)
    env["JUPYTER_PREFER_ENV_PATH"] = "1"
    env.update(extra or {})
    return env


def _write_lab_settings(config_dir: Path) -> None:
    for relative, settings in _LAB_USER_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))


def _lab_command(port: int, token: str, root_dir: Path) -> list[str]:
    # The venv's script, not `python -m jupyterlab`: a cwd on sys.path could
    # shadow the jupyterlab package.
    return [
        str(Path(sys.executable).parent / "jupyter-lab"),
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.allow_root=True",
        "--LabApp.expose_app_in_browser=True",
    ]


@contextmanager
def start_jupyterlab(
    base_dir: Path,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    server_config: Mapping[str, object] | None = None,
    root: Path | None = None,
) -> Iterator[JupyterLab]:
    """Run an isolated `jupyter-lab` under `base_dir` until the block exits.

    Parameters
    ----------
    base_dir
        An empty directory; gets `root/` (the notebooks), the Jupyter and IPython
        dirs, and `server.log`.
    env
        Extra environment for the server and so for every kernel it starts.
    timeout
        Seconds to wait for `/api/status` to answer.
    server_config
        Written as the server's user `jupyter_server_config.json` (it wins over
        the environment's, which the package installs).
    root
        The notebooks' folder, if not `base_dir/root` (a restarted server serves
        the same one).
    """
    root_dir = base_dir / "root" if root is None else root
    root_dir.mkdir(parents=True, exist_ok=root is not None)
    full_env = server_env(base_dir, env)
    _write_lab_settings(Path(full_env["JUPYTER_CONFIG_DIR"]))
    if server_config is not None:
        config_file = Path(full_env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
        config_file.write_text(json.dumps(server_config))
    token = secrets.token_hex(24)
    port = free_port()
    log_path = base_dir / "server.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            _lab_command(port, token, root_dir),
            cwd=root_dir,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    lab = JupyterLab(f"http://127.0.0.1:{port}", token, root_dir, log_path, process)
    try:
        _wait_until_up(lab, timeout)
        yield lab
    finally:
        stop_jupyterlab(lab)


def _wait_until_up(lab: JupyterLab, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        code = lab.process.poll()
        if code is not None:
            raise JupyterLabError(f"jupyter-lab exited with code {code}; log:\n{lab.log()}")
        try:
            lab.api("status")
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise JupyterLabError(
                f"jupyter-lab did not answer {lab.url}/api/status within {timeout} s; "
                f"log:\n{lab.log()}"
            )
        time.sleep(0.25)


def stop_jupyterlab(lab: JupyterLab, grace: float = 10) -> None:
    """Shut the server and its kernels down: /api/shutdown, then SIGTERM, then SIGKILL."""
    if lab.process.poll() is None:
        try:
            lab.api("shutdown", method="POST")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            lab.process.terminate()
    try:
        lab.process.wait(grace)
    except subprocess.TimeoutExpired:
        lab.process.terminate()
        try:
            lab.process.wait(grace)
        except subprocess.TimeoutExpired:
            lab.process.kill()
            lab.process.wait()
    # Kernels run in the server's session; reap any the shutdown left behind.
    with suppress(ProcessLookupError):
        os.killpg(lab.process.pid, signal.SIGKILL)


def launch_chromium(playwright: Playwright) -> Browser:
    """Launch Debian's Chromium headless; Playwright gives it a fresh, temporary profile."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(
            f"Chromium not found at {CHROMIUM}; the e2e tests need Debian's package: "
            "run `apt-get install -y chromium` (Playwright's browser download is not used)"
        )
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )


def screenshot(page: Page, name: str) -> Path:
    """Save a PNG of the page as `test-artifacts/e2e/<name>.png` and return its path."""
    path = ARTIFACTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path


def write_notebook(path: Path, cells: list[str]) -> None:
    """Write a Python 3 notebook with one code cell per source string."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(source) for source in cells],
        metadata={
            "kernelspec": {
                "name": "python3",
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            },
            "language_info": {"name": "python"},
        },
    )
    nbformat.write(notebook, str(path))


def open_notebook(
    page: Page, lab: JupyterLab, cells: list[str], name: str | None = None, timeout: float = 60
) -> NotebookPage:
    """Write `cells` to `<name>.ipynb` in the root dir, open it, and wait for an idle kernel."""
    name = name or f"nb-{secrets.token_hex(4)}"
    path = f"{name}.ipynb"
    write_notebook(lab.root_dir / path, cells)
    nb = NotebookPage(page, path)
    page.goto(lab.lab_url(path))
    ms = timeout * 1000
    page.wait_for_function("() => !!window.jupyterapp", timeout=ms, polling=500)
    nb.cells.nth(len(cells) - 1).wait_for(timeout=ms)
    nb.wait_for_idle(timeout)
    return nb


class NotebookPage:
    """One notebook open in JupyterLab; cells are addressed by index from 0."""

    def __init__(self, page: Page, path: str) -> None:
        self.page = page
        self.path = path
        self.cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def cell(self, index: int) -> Locator:
        return self.cells.nth(index)

    def output(self, index: int) -> Locator:
        """The output area of cell `index` (its source holds the same strings)."""
        return self.cell(index).locator(".jp-Cell-outputArea")

    def execution_count(self, index: int) -> int | None:
        return self.page.evaluate(_JS_EXECUTION_COUNT, [self.path, index])

    def is_kernel_idle(self) -> bool:
        return bool(self.page.evaluate(_JS_KERNEL_IDLE, self.path))

    def wait_for_idle(self, timeout: float = 60) -> None:
        self.page.wait_for_function(
            _JS_KERNEL_IDLE, arg=self.path, timeout=timeout * 1000, polling=500
        )

    def run_cell(self, index: int, timeout: float = 60, wait: bool = True) -> None:
        """Run cell `index` as a person would: click its prompt, Escape, Shift+Enter.

        Returns once the cell has a new execution count and the kernel is idle;
        with `wait=False`, right after the keys (for a cell that awaits a click).
        Shift+Enter on the last cell adds an empty cell below, as it does for a person.
        """
        before = self.execution_count(index)
        self.cell(index).locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Shift+Enter")
        if not wait:
            return
        self._poll(
            lambda: self.execution_count(index) not in (None, before) and self.is_kernel_idle(),
            timeout,
            lambda: f"cell {index} did not finish running within {timeout} s",
        )

    def run_panel(self, index: int = 1) -> tuple[Locator, Locator]:
        """Run the cells up to `index`, the last one showing the chat panel; its output and
        input box, once the box is drawn."""
        for n in range(index + 1):
            self.run_cell(n)
        out = self.output(index)
        box = out.locator(".nbchat-panel textarea")
        box.wait_for(timeout=30_000)
        return out, box

    def wait_for_text(self, index: int, text: str, timeout: float = 30) -> None:
        """Wait until the output of cell `index` contains `text`."""
        self._poll(
            lambda: text in self.output(index).inner_text(),
            timeout,
            lambda: (
                f"cell {index} output never showed {text!r} within {timeout} s; "
                f"it shows {self.output(index).inner_text()!r}"
            ),
        )

    def screenshot(self, name: str) -> Path:
        """Save `test-artifacts/e2e/<notebook name>/<name>.png`."""
        return screenshot(self.page, f"{self.name}/{name}")

    def _poll(
        self, condition: Callable[[], bool], timeout: float, message: Callable[[], str]
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.screenshot("timeout")
                raise AssertionError(message())
            time.sleep(POLL_SECONDS)


def safe_name(text: str) -> str:
    """Turn a test node name into a file-name-safe notebook name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80]
