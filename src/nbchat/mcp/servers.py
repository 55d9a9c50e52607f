"""MCP servers for this process: started on first use, shared by every question, stopped at exit.

A server starts the first time a question needs its tool list (or
``%chat --mcp`` lists it), not at import or when a Chat is made; its tool
list is kept for the session. Every Chat in the process shares the same
servers (:func:`session_servers`). They are stopped when the interpreter
exits: stdin closed, then SIGTERM, then SIGKILL, as the SDK does. The
official ``mcp`` SDK (``pip install 'nbchat[mcp]'``) runs them on one event
loop in a background thread; nothing here imports Jupyter.

A server that fails to start, dies or does not answer in its ``timeout`` gives
one note naming it and its log, and the question goes on without its tools; a
server that died or timed out starts again the next time it is needed.

A server may change its tools while it runs and say so
(``notifications/tools/list_changed``): they are listed again at once, and
until that list arrives :meth:`SessionServers.current` waits for it (up to
the server's ``timeout``; a server that does not re-list in time has no tool
known), so a call is judged by the annotations the server gives now.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import re
import threading
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..base._notices import notify
from ..base.config import jupyter_runtime_dir
from ..base.errors import McpServerError
from ._config import McpConfig, ServerConfig, load_config

__all__ = ["McpResult", "ServerStatus", "ToolInfo", "session_servers", "tool_name"]

State = Literal["not started", "running", "failed", "stopped"]
START_GRACE = 5.0  # seconds past a server's own timeout before the caller gives up on it
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_MAX_PAGES = 100


@dataclass(frozen=True)
class ToolInfo:
    """One tool a server offers, as nbchat offers it: ``server__tool``."""

    server: str
    name: str  # the server's own name for it (untrusted text)
    exposed: str  # the name the model sees
    description: str
    parameters: Mapping[str, Any]
    read_only: bool


@dataclass(frozen=True)
class McpResult:
    """What a tool call returned: its text parts, images (MIME type, base64), error flag."""

    texts: tuple[str, ...] = ()
    images: tuple[tuple[str, str], ...] = ()
    structured: Any = None
    is_error: bool = False


@dataclass(frozen=True)
class ServerStatus:
    """A configured server as ``%chat --mcp`` lists it."""

    config: ServerConfig
    state: State
    tools: tuple[ToolInfo, ...] = ()
    error: str = ""
    log: str = ""


def tool_name(server: str, tool: str, taken: Iterable[str] = ()) -> str:
    """``server__tool`` within 64 letters, digits, ``_`` and ``-``, unique among ``taken``."""
    base = f"{server}__{_NAME_CHARS.sub('_', tool)}"[:64]
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base[:60]}_{number}"
    return name


class _Server:
    """One server's connection: a task on the loop that holds its session open."""

    def __init__(self, config: ServerConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config, self.loop = config, loop
        self.state: State = "not started"
        self.error = ""
        self.tools: tuple[ToolInfo, ...] = ()
        self.log = "" if config.url else str(_log_path(config.name))
        self._session: Any = None
        self._relisting: concurrent.futures.Future[None] | None = None  # after list_changed
        self._changes = 0  # list_changed notifications heard, so a re-list knows it is stale
        self._stop: asyncio.Event | None = None
        self._task: concurrent.futures.Future[None] | None = None
        self._ready: concurrent.futures.Future[tuple[ToolInfo, ...]] | None = None
        self._lock = threading.Lock()

    def start(self) -> concurrent.futures.Future[tuple[ToolInfo, ...]]:
        """Start the server unless it runs or is starting; a future of its tools."""
        with self._lock:
            if self._ready is not None and (self.state == "running" or not self._ready.done()):
                return self._ready  # one process, however many questions ask at once
            ready: concurrent.futures.Future[tuple[ToolInfo, ...]] = concurrent.futures.Future()
            self._ready = ready
            self._task = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)
        return ready

    def wait_started(self, ready: concurrent.futures.Future[tuple[ToolInfo, ...]]) -> None:
        """Wait for :meth:`start`; a server that does not come up is stopped and marked failed."""
        try:
            ready.result(self.config.timeout + START_GRACE)  # the loop set self.tools
            self.state, self.error = "running", ""
        except concurrent.futures.TimeoutError:
            self._fail(f"did not start within {self.config.timeout:g} s")
        except Exception as exc:  # the SDK's and the OS's errors, whatever they are
            self._fail(_reason(exc))

    def call(self, tool: str, arguments: dict[str, Any]) -> McpResult:
        """Call ``tool``; McpServerError when the server is not running or does not answer."""
        session = self._session
        if self.state != "running" or session is None:
            raise self._error(f"is not running ({self.error or self.state})")
        timeout = self.config.timeout
        future = asyncio.run_coroutine_threadsafe(session.call_tool(tool, arguments), self.loop)
        try:
            result = future.result(timeout)
        except KeyboardInterrupt:
            future.cancel()
            raise
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise self._stopped(f"did not answer {tool!r} within {timeout:g} s") from None
        except Exception as exc:
            raise self._stopped(f"failed on {tool!r}: {_reason(exc)}") from None
        return _result(result)

    def settle(self) -> bool:
        """Wait for a re-list under way; False when it failed (then no tool is known)."""
        relisting = self._relisting
        if relisting is not None:
            try:
                relisting.result(self.config.timeout + START_GRACE)
            except (Exception, concurrent.futures.CancelledError):  # noqa: BLE001  unknown: asks
                return False
        return True

    def current(self, tool: str) -> ToolInfo | None:
        """The tool ``tool`` as the server lists it now; None if it is gone or not known."""
        if not self.settle() or self.state != "running":
            return None
        return next((info for info in self.tools if info.name == tool), None)

    async def _on_message(self, message: Any) -> None:
        """The session's notifications: a changed tool list is listed again."""
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._changes += 1
            if self._relisting is None or self._relisting.done():
                relisting: concurrent.futures.Future[None] = concurrent.futures.Future()
                self._relisting = relisting
                asyncio.get_running_loop().create_task(self._relist(relisting))

    async def _relist(self, done: concurrent.futures.Future[None]) -> None:
        """List the tools again until no change was heard meanwhile; on failure none is known."""
        try:
            while True:
                heard, session = self._changes, self._session
                if session is None:
                    raise RuntimeError("the session closed")
                tools = await asyncio.wait_for(_list_tools(session), self.config.timeout)
                if heard == self._changes:
                    break
            self.tools = _tool_infos(self.config.name, tools)
            done.set_result(None)
        except Exception as exc:  # the SDK's and the transport's, whatever they are
            self.tools = ()
            where = f"; its log: {self.log}" if self.log else ""
            notify(f"MCP server {self.config.name!r} said its tools changed but did not list "
                   f"them again ({_reason(exc)}); its tools ask until it starts again{where}")
            done.set_exception(exc)

    def _stopped(self, why: str) -> McpServerError:
        """Stop a server that failed a call, say so in one note; the error for the model."""
        self.stop()
        where = f"; its log: {self.log}" if self.log else ""
        notify(f"MCP server {self.config.name!r} {why}; it was stopped and starts again when "
               f"next needed{where}")  # fmt: skip
        return self._error(f"{why}; it was stopped")

    def stop(self, wait: float = 10.0) -> None:
        """Close the session and stop the process (the SDK's shutdown: stdin, TERM, KILL)."""
        with self._lock:
            stop, task = self._stop, self._task
            self._session, self._stop, self._task, self._ready = None, None, None, None
            if self.state == "running":
                self.state = "stopped"
        if stop is not None:
            self.loop.call_soon_threadsafe(stop.set)
        if task is not None:
            try:
                task.result(wait)
            except Exception:  # it is going away: how it ends is of no use to anyone
                task.cancel()

    def status(self) -> ServerStatus:
        return ServerStatus(self.config, self.state, self.tools, self.error, self.log)

    async def _serve(self, ready: concurrent.futures.Future[tuple[ToolInfo, ...]]) -> None:
        stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                session = await self._connect(stack)
                await asyncio.wait_for(session.initialize(), self.config.timeout)
                self._session, heard = session, self._changes
                tools = await asyncio.wait_for(_list_tools(session), self.config.timeout)
                if heard == self._changes:  # else the re-list under way sets them
                    self.tools = _tool_infos(self.config.name, tools)
                self._stop = stop
                ready.set_result(self.tools)
                await stop.wait()
        except BaseException as exc:  # noqa: B036  the caller waits on ready: it must hear
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            elif self.state == "running":
                self._fail(f"stopped: {_reason(exc)}")
            if not isinstance(exc, Exception):
                raise

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import ClientSession

        config = self.config
        if config.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=dict(config.headers), timeout=config.timeout)
            )
            streams = streamable_http_client(config.url, http_client=client)
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            Path(self.log).parent.mkdir(parents=True, exist_ok=True)
            log = stack.enter_context(open(self.log, "w", encoding="utf-8"))  # noqa: SIM115
            parameters = StdioServerParameters(
                command=config.command, args=list(config.args), env=dict(config.env) or None,
                cwd=config.cwd,
            )  # fmt: skip
            streams = stdio_client(parameters, errlog=log)
        read, write = await stack.enter_async_context(streams)
        return await stack.enter_async_context(
            ClientSession(read, write, message_handler=self._on_message)
        )

    def _fail(self, why: str) -> None:
        self.state, self.error, self.tools = "failed", why, ()
        where = f"; its log: {self.log}" if self.log else ""
        notify(f"MCP server {self.config.name!r} {why}; going on without its tools{where}")

    def _error(self, why: str) -> McpServerError:
        where = f" (its log: {self.log})" if self.log else ""
        return McpServerError(
            f"MCP server {self.config.name!r} {why}{where}", server=self.config.name, log=self.log
        )


class SessionServers:
    """The process's MCP servers, by name, started when their tools are first needed."""

    def __init__(self) -> None:
        self._servers: dict[str, _Server] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._warned = False
        self._at_exit = False

    def tools(self, names: Iterable[str], config: McpConfig | None = None) -> list[ToolInfo]:
        """The tools of the servers ``names``, starting those that do not run (all at once)."""
        config = config or load_config()
        names = list(names)
        if not names or not self._sdk_available(config):
            return []
        servers = [self._server(config.servers[name]) for name in names]
        starting = [(s, s.start()) for s in servers if s.state != "failed"]
        for server, ready in starting:
            server.wait_started(ready)
        return [tool for server in servers if server.settle() for tool in server.tools]

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> McpResult:
        """Call a tool of a running server (see :meth:`_Server.call`)."""
        with self._lock:
            found = self._servers.get(server)
        if found is None:
            raise McpServerError(f"MCP server {server!r} is not running", server=server)
        return found.call(tool, arguments)

    def current(self, server: str, tool: str) -> ToolInfo | None:
        """A running server's tool as it lists it now (see :meth:`_Server.current`), or None."""
        with self._lock:
            found = self._servers.get(server)
        return None if found is None else found.current(tool)

    def status(self, config: McpConfig | None = None) -> list[ServerStatus]:
        """Every configured server and its state (none is started by this)."""
        config = config or load_config()
        with self._lock:
            known = dict(self._servers)
        return [
            known[name].status() if name in known and known[name].config == server
            else ServerStatus(server, "not started")
            for name, server in config.servers.items()
        ]  # fmt: skip

    def close(self) -> None:
        """Stop every server and the loop (at interpreter exit)."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        stopping = [threading.Thread(target=server.stop, daemon=True) for server in servers]
        for stopper in stopping:  # at once: each may wait seconds for its process to exit
            stopper.start()
        for stopper in stopping:
            stopper.join(10)
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            if not thread.is_alive():
                loop.close()

    def _server(self, config: ServerConfig) -> _Server:
        with self._lock:
            found = self._servers.get(config.name)
            if found is not None and found.config == config:
                return found
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="nbchat-mcp", daemon=True
                )
                self._thread.start()
                if not self._at_exit:
                    self._at_exit = atexit.register(self.close) is not None
            server = _Server(config, self._loop)
            self._servers[config.name] = server
        if found is not None:  # its configuration changed: the old process goes
            found.stop()
        return server

    def _sdk_available(self, config: McpConfig) -> bool:
        try:
            import mcp  # noqa: F401
        except ImportError:
            if not self._warned:
                self._warned = True
                sources = sorted({server.source for server in config.servers.values()})
                notify(f"MCP servers are configured in {', '.join(sources)}, but the mcp "
                       "package is not installed: pip install 'nbchat[mcp]'")  # fmt: skip
            return False
        return True


_session = SessionServers()


def session_servers() -> SessionServers:
    """The MCP servers of this process (one set per kernel)."""
    return _session


def _log_path(name: str) -> Path:
    return jupyter_runtime_dir() / "nbchat-mcp" / f"{name}-{os.getpid()}.log"


async def _list_tools(session: Any) -> list[Any]:
    from mcp_types import PaginatedRequestParams

    tools: list[Any] = []
    cursor = None
    for _ in range(_MAX_PAGES):
        page = await session.list_tools(
            params=None if cursor is None else PaginatedRequestParams(cursor=cursor)
        )
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _tool_infos(server: str, tools: list[Any]) -> tuple[ToolInfo, ...]:
    infos: list[ToolInfo] = []
    for tool in tools:
        annotations = tool.annotations
        infos.append(ToolInfo(
            server=server, name=str(tool.name),
            exposed=tool_name(server, str(tool.name), [info.exposed for info in infos]),
            description=str(tool.description or ""), parameters=dict(tool.input_schema or {}),
            read_only=annotations is not None and annotations.read_only_hint is True,
        ))  # fmt: skip
    return tuple(infos)


def _result(result: Any) -> McpResult:
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    for part in result.content or ():
        kind = getattr(part, "type", "")
        if kind == "text":
            texts.append(str(part.text))
        elif kind == "image":
            images.append((str(part.mime_type), str(part.data)))
        else:
            texts.append(f"({kind} content, not shown)")
    return McpResult(tuple(texts), tuple(images), result.structured_content, bool(result.is_error))


def _reason(exc: BaseException) -> str:
    """One line for an exception, however deeply the SDK's task groups nested it."""
    while getattr(exc, "exceptions", None):  # an ExceptionGroup
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
