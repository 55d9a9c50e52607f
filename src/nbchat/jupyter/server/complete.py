"""Code suggestions for JupyterLab's inline completer: ``POST {base_url}nbchat/complete``.

The browser sends the code around the cursor (and the notebook's earlier
cells); the server asks the configured endpoint for the middle, with the same
settings, keys and administrator policy as the chat (keys never leave the
server), adding the names and types of the kernel's live variables. All of it
is scrubbed (:mod:`nbchat.base._secrets`) before it is sent, the code around
the cursor too (:meth:`nbchat.llm.fim.Infill.bounded`). The
suggestion streams back as newline-delimited JSON: ``{"text": piece}`` lines,
then ``{"done": true}`` (or ``{"error": "..."}``). When the browser gives up
on a request (the person typed on), the connection closes and so does the
request to the endpoint.

The route is a Jupyter Server API handler: the page's login and XSRF check.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ...agents.server import kernel_text
from ...base._across import COMPLETE_ROUTE
from ...base._secrets import cut_scrubbed, scrub
from ...base.config import ENV_BASE_URL, Settings, resolve
from ...base.connections import load_all
from ...base.errors import ConfigError, NbchatError
from ...llm._stop import StopSignal
from ...llm.client import LLMClient
from ...llm.fim import Infill, iter_infill
from .connect import everything
from .provided import provided_settings

ROUTE = COMPLETE_ROUTE
MAX_CELLS = 20
CELLS_CHARS = 3000
VARIABLES_TIMEOUT = 0.5  # seconds: a busy kernel's variables are left out, not waited for
VARIABLES_FOR = 10.0  # seconds a kernel's variables are reused: a pause in typing asks again


class Completions:
    """The endpoint client the suggestions share, rebuilt when the settings change."""

    def __init__(self, notebooks: Any, serverapp: Any = None) -> None:
        self.notebooks = notebooks
        self.serverapp = serverapp
        self._client: tuple[Any, LLMClient] | None = None
        self._lock = threading.Lock()
        self._variables_seen: dict[str, tuple[float, str]] = {}

    def client(self) -> LLMClient:
        settings = suggestion_settings(self.serverapp)
        with self._lock:
            if self._client is None or self._client[0] != settings:
                self._client = (settings, LLMClient(settings))
            return self._client[1]

    async def context(self, path: str, cells: list[str]) -> tuple[tuple[str, str], ...]:
        """The earlier cells and the live variables' names and types, bounded and scrubbed."""
        found: list[tuple[str, str]] = []
        if cells:
            earlier = cut_scrubbed("\n\n".join(cells[-MAX_CELLS:]),
                                   lambda whole: whole[-CELLS_CHARS:])  # fmt: skip
            found.append(("The notebook's earlier cells", earlier))
        if path:
            text = await self._recent_variables(path)
            if text:
                found.append(("Variables in the kernel (name: type)", scrub(text)))
        return tuple(found)

    async def _recent_variables(self, path: str) -> str:
        """The kernel's variables, asked at most every VARIABLES_FOR seconds; "" if it is busy."""
        now = time.monotonic()
        seen = self._variables_seen.get(path)
        if seen is not None and now - seen[0] < VARIABLES_FOR:
            return seen[1]
        try:
            text = await asyncio.wait_for(self._variables(path), VARIABLES_TIMEOUT)
        except Exception:  # noqa: BLE001 - optional context: a busy or gone kernel adds none
            text = ""
        self._variables_seen[path] = (now, text)
        return text

    async def _variables(self, path: str) -> str:
        return await kernel_text(self.notebooks, path, "variables_text")


def suggestion_settings(serverapp: Any = None) -> Settings:
    """The endpoint and model chosen for suggestions (in the Connect dialog, else by the
    administrator), else the chat's; ``NBCHAT_BASE_URL`` wins, as for the chat.

    An endpoint this server provides is asked with its real key, here; where the
    administrator allows no endpoint of people's own, theirs is never used.
    """
    if os.environ.get(ENV_BASE_URL, "").strip():
        return resolve()
    found, allowed = everything(serverapp) if serverapp is not None else (load_all(), True)
    chosen = found.suggestions or found.chat
    connected = found.get(chosen.endpoint) if chosen is not None else None
    model = chosen.model if chosen is not None and connected is not None else None
    if connected is None and not allowed:
        connected = next(iter(found.endpoints.values()), None)
        if connected is None:
            raise ConfigError("the administrator allows only the endpoints this Jupyter server "
                              "provides, and it provides none; ask them to add one")  # fmt: skip
    if connected is not None and connected.provided:
        given = provided_settings(serverapp, connected.name, model)
        if given is not None:
            return given
    if connected is not None:
        return resolve(base_url=connected.base_url, provider=connected.provider, model=model)
    return resolve()


def _request(body: Any) -> tuple[Infill, str, list[str]]:
    if not isinstance(body, dict):
        raise web.HTTPError(400, "send a JSON object with prefix and suffix")
    prefix, suffix = body.get("prefix"), body.get("suffix", "")
    cells = body.get("cells") or []
    if not isinstance(prefix, str) or not isinstance(suffix, str) or not isinstance(cells, list):
        raise web.HTTPError(400, "prefix and suffix are text; cells a list of text")
    max_tokens = body.get("max_tokens", 64)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise web.HTTPError(400, "max_tokens is a whole number")
    model = body.get("model") or ""
    language = body.get("language") or "python"
    infill = Infill(prefix, suffix, str(model), max_tokens, (), str(language)[:40])
    return infill, str(body.get("path") or ""), [str(c) for c in cells[-MAX_CELLS:]]


class CompletionHandler(APIHandler):
    """One suggestion, streamed as it arrives; closed when the browser lets go."""

    completions: Completions

    def initialize(self, completions: Completions) -> None:
        self.completions = completions
        self._stop = StopSignal()

    def on_connection_close(self) -> None:
        self._stop.set()

    @web.authenticated
    async def post(self) -> None:
        infill, path, cells = _request(self.get_json_body())
        context = await self.completions.context(path, cells)
        infill = Infill(infill.prefix, infill.suffix, infill.model, infill.max_tokens, context,
                        infill.language)  # fmt: skip
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        stop = self._stop

        def put(kind: str, value: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        def work() -> None:
            try:
                for piece in iter_infill(self.completions.client(), infill, stop):
                    put("text", piece)
                put("done", "")
            except NbchatError as error:
                put("error", str(error))

        threading.Thread(target=work, daemon=True, name="nbchat-suggestion").start()
        self.set_header("Content-Type", "application/x-ndjson")
        self.set_header("Cache-Control", "no-store")
        while not stop.is_set():
            kind, value = await queue.get()
            line = {"text": value} if kind == "text" else (
                {"done": True} if kind == "done" else {"error": value})
            try:
                self.write(json.dumps(line) + "\n")
                await self.flush()
            except Exception:  # noqa: BLE001 - the browser went away
                stop.set()
                return
            if kind != "text":
                break
        if not self._finished:
            self.finish()


def add_routes(serverapp: Any, notebooks: Any) -> None:
    """Mount the suggestion route under the server's base URL."""
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    completions = Completions(notebooks, serverapp)
    web_app.add_handlers(".*$", [(f"{base}{ROUTE}", CompletionHandler,
                                  {"completions": completions})])  # fmt: skip
