"""``python -m nbchat mcp``: nbchat's MCP endpoint for clients that start a command (stdio).

The bridge holds no tools of its own: each JSON-RPC message read from stdin
is POSTed to the Jupyter server's ``nbchat/mcp`` endpoint with the agent's
token (``NBCHAT_AGENT_TOKEN``), and what the endpoint answers (JSON, or the
events of a stream) is written to stdout, one message a line. So the same
checks, gate and store serve both transports. A refused request (no token,
a revoked one) becomes a JSON-RPC error naming why, and a line on stderr.
The endpoint's address is ``--url``, else the one running Jupyter server
found in Jupyter's runtime folder (only its address is read there; the
server's own token never is).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

import httpx

from ..base._across import MCP_ROUTE
from ..base.config import ENV_AGENT_TOKEN, jupyter_runtime_dir
from ..base.errors import ConfigError

ROUTE = MCP_ROUTE
TIMEOUT = httpx.Timeout(60.0, connect=10.0)
WORKERS = 8


def find_endpoint(runtime: Path | None = None) -> str:
    """The endpoint of the one Jupyter server running here; ConfigError if none or several."""
    folder = runtime if runtime is not None else jupyter_runtime_dir()
    found = []
    for path in sorted(folder.glob("jpserver-*.json")):
        try:
            info = json.loads(path.read_text())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a stale file, or not a server's
        found.append(str(info.get("url", "")).rstrip("/") + "/" + ROUTE)
    if len(found) == 1:
        return found[0]
    what = "no Jupyter server is running" if not found else f"{len(found)} Jupyter servers run"
    raise ConfigError(f"{what} here; give the endpoint: python -m nbchat mcp --url "
                      f"http://127.0.0.1:8888/{ROUTE}")  # fmt: skip


class Bridge:
    """Relays newline-delimited JSON-RPC between stdio and the HTTP endpoint."""

    def __init__(self, url: str, token: str, out: TextIO = sys.stdout) -> None:
        self.url = url
        self.out = out
        self._write_lock = threading.Lock()
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        self._client = httpx.Client(timeout=TIMEOUT)

    def serve(self, lines: Iterator[str]) -> None:
        """Relay every message read until stdin closes; requests run side by side."""
        with ThreadPoolExecutor(WORKERS) as pool:
            for line in lines:
                if line.strip():
                    pool.submit(self.relay, line.strip())
        self._client.close()

    def relay(self, line: str) -> None:
        """POST one message; write what comes back."""
        try:
            message = json.loads(line)
        except ValueError:
            self._error(None, -32700, "the bridge read a line that is not JSON")
            return
        ident = message.get("id") if isinstance(message, dict) else None
        try:
            with self._client.stream("POST", self.url, content=line.encode(),
                                     headers=self._headers) as response:  # fmt: skip
                self._answer(ident, response)
        except httpx.HTTPError as exc:
            self._error(ident, -32000, f"nbchat's endpoint at {self.url} did not answer ({exc})")

    def _answer(self, ident: object, response: httpx.Response) -> None:
        if response.status_code == 202:
            return  # a notification, accepted
        if response.status_code >= 400:
            response.read()
            try:
                why = str(response.json().get("error") or response.text)
            except ValueError:
                why = response.text
            print(f"nbchat mcp: {response.status_code}: {why}", file=sys.stderr, flush=True)
            self._error(ident, -32001, f"refused ({response.status_code}): {why}")
            return
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            for data in _events(response.iter_lines()):
                self._write(data)
        else:
            self._write(response.read().decode())

    def _error(self, ident: object, code: int, message: str) -> None:
        if ident is not None:
            self._write(json.dumps({"jsonrpc": "2.0", "id": ident,
                                    "error": {"code": code, "message": message}}))  # fmt: skip

    def _write(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        with self._write_lock:
            self.out.write(json.dumps(json.loads(text)) + "\n")  # one line, whatever came
            self.out.flush()


def _events(lines: Iterator[str]) -> Iterator[str]:
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
    if data:
        yield "\n".join(data)


def main(url: str | None) -> int:
    """Run the bridge on this process's stdin and stdout; the exit code."""
    token = os.environ.get(ENV_AGENT_TOKEN, "").strip()
    if not token:
        print(f"nbchat mcp: set {ENV_AGENT_TOKEN} to an agent token (mint one with "
              "python -m nbchat agents mint LABEL)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        endpoint = url or find_endpoint()
    except ConfigError as error:
        print(f"nbchat mcp: {error}", file=sys.stderr)
        return 2
    Bridge(endpoint, token).serve(iter(sys.stdin.readline, ""))
    return 0
