"""nbchat's MCP endpoint for outside agents, on Jupyter Server's own address and port.

``{base_url}nbchat/mcp`` speaks MCP's Streamable HTTP (the official SDK's
server, stateless, JSON responses) behind checks made here, before anything
else runs:

- the feature is on: not switched off by the administrator (``NBCHAT_AGENTS=off``),
  and, where Jupyter listens beyond loopback, allowed for named hosts
  (``NBCHAT_AGENT_HOSTS``);
- the ``Host`` is loopback or one of those names, and an ``Origin``, if sent,
  is one the administrator allowed (``NBCHAT_AGENT_ORIGINS``): a web page
  rebinding a name to 127.0.0.1 gets 403;
- ``Authorization: Bearer`` holds a live nbchat agent token; the Jupyter
  server's own token (which opens ``/api/kernels`` and terminals, around any
  gate) is refused, and so are cookies and ``?token=``. That token is also
  scrubbed from everything this process hands an agent or a model.

A refused request gets its status and one line saying why; nothing is queued.
The handler is a plain Tornado handler, not a ``JupyterHandler``: Jupyter's
login must not let a browser session in. Kernels are reached through the
server's own kernel manager (:class:`ServerNotebooks`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import os
import time
from typing import Any

from tornado import web

from ...agents import server as agent_server
from ...agents.gate import AgentGate
from ...agents.server import KernelBusy, NotebookSession
from ...agents.tokens import TokenStore
from ...base._across import MCP_ROUTE, kernel_call
from ...base._secrets import JUPYTER_TOKEN, remember
from ...base.config import default_user
from ...base.errors import AgentRefused, NbchatError
from ...base.policy import ENV_AGENT_HOSTS, ENV_AGENT_ORIGINS, ENV_AGENTS
from ...store._open import open_store

ROUTE = MCP_ROUTE
EVALUATE_TIMEOUT = 10.0
WAKE_WAIT = 1.0  # seconds a wake waits for the kernel to take in its notebook
WAKE_EVERY = 2.0  # seconds: a kernel told its paths is not told them again sooner
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_loopback(name: str) -> bool:
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _listed(variable: str) -> list[str]:
    return [item.strip().lower() for item in os.environ.get(variable, "").split(",")
            if item.strip()]  # fmt: skip


class AgentAccess:
    """Who may reach the endpoint: the administrator's switch, hosts, origins, tokens."""

    def __init__(self, serverapp: Any, tokens: TokenStore) -> None:
        self.serverapp = serverapp
        self.tokens = tokens

    def check(self, headers: Any, query: str) -> Any:
        """The caller's token, or AgentRefused with the status and why."""
        if os.environ.get(ENV_AGENTS, "").strip().lower() in ("off", "0", "false", "no"):
            raise AgentRefused("outside agents are switched off on this server by its "
                               f"administrator ({ENV_AGENTS}=off)", status=403)  # fmt: skip
        hosts = _listed(ENV_AGENT_HOSTS)
        if not _is_loopback(str(getattr(self.serverapp, "ip", "") or "localhost")) and not hosts:
            raise AgentRefused(
                "this Jupyter server listens beyond loopback, where the agent endpoint is off "
                f"until the administrator names the hosts agents use in {ENV_AGENT_HOSTS}",
                status=403,
            )
        name = _host_name(headers.get("Host", ""))
        if not _is_loopback(name) and name not in hosts:
            raise AgentRefused(f"requests must come to a loopback host or one named in "
                               f"{ENV_AGENT_HOSTS}", status=403)  # fmt: skip
        origin = headers.get("Origin")
        if origin is not None and origin.strip().lower() not in _listed(ENV_AGENT_ORIGINS):
            raise AgentRefused("requests from web pages are refused (their Origin is not one "
                               f"the administrator allowed in {ENV_AGENT_ORIGINS})", status=403)
        if "token=" in query:
            raise AgentRefused("send the agent token in the Authorization header, never in the "
                               "URL", status=401)  # fmt: skip
        scheme, _, secret = headers.get("Authorization", "").partition(" ")
        secret = secret.strip()
        if scheme.lower() == "bearer" and self._is_jupyter_token(secret):
            raise AgentRefused(
                "that is the Jupyter server's own token, which agents must never hold: mint an "
                "agent token with %chat --agent-token LABEL", status=403,
            )  # fmt: skip
        return self.tokens.verify(secret if scheme.lower() in ("bearer", "token") else None)

    def _is_jupyter_token(self, secret: str) -> bool:
        token = jupyter_token(self.serverapp)
        return bool(token) and bool(secret) and hmac.compare_digest(token.encode(), secret.encode())


def jupyter_token(serverapp: Any) -> str:
    """The Jupyter server's own token ("" when it has none)."""
    provider = getattr(serverapp, "identity_provider", None)
    return str(getattr(provider, "token", None) or getattr(serverapp, "token", None) or "")


class ServerNotebooks:
    """The notebooks of a Jupyter server, as the MCP tools see them.

    One kernel client per kernel that a tool reached (its shell channel only),
    dropped when the kernel shuts down or restarts, so a long-running server
    keeps no socket for a kernel that is gone. Waking tells the kernel the exact
    server-relative paths of its sessions: a kernel answers only their calls.
    """

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp
        self._clients: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # kernel: (its paths, its process), when told
        self._told: dict[str, tuple[tuple[tuple[str, ...], object], float]] = {}
        events = getattr(serverapp, "event_logger", None)
        if events is not None:
            events.add_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)

    async def sessions(self) -> list[NotebookSession]:
        found = []
        specs = self.serverapp.kernel_spec_manager
        for session in await self.serverapp.session_manager.list_sessions():
            kernel = session.get("kernel") or {}
            if session.get("type", "notebook") != "notebook" or not kernel.get("id"):
                continue
            language = await _language(specs, kernel.get("name") or "")
            found.append(NotebookSession(str(session.get("path", "")), kernel["id"],
                                         str(kernel.get("name", "")), language,
                                         str(kernel.get("execution_state", "")),))  # fmt: skip
        self._forget_gone()
        return found

    async def resolve(self, path: str) -> str | None:
        manager = self.serverapp.contents_manager
        root = getattr(manager, "root_dir", None)
        if not isinstance(root, str) or not os.path.isdir(root):
            return path  # not files of this machine: no symlinks to follow
        return agent_server.file_under(root, path)

    async def read(self, path: str) -> dict[str, Any]:
        manager = self.serverapp.contents_manager
        try:
            model = await _maybe_await(manager.get(path, content=True, type="notebook"))
        except web.HTTPError as error:
            if error.status_code == 404:
                raise FileNotFoundError(path) from None
            raise
        return json.loads(json.dumps(model["content"]))

    async def evaluate(self, path: str, expression: str) -> str:
        kernel_id = await self._kernel_of(path)
        client = None
        try:
            async with self._locks.setdefault(kernel_id, asyncio.Lock()):
                client = self._client(kernel_id)
                msg_id = client.execute("", silent=True, store_history=False, allow_stdin=False,
                                        user_expressions={"r": expression})  # fmt: skip
                reply = await self._reply(client, msg_id)
        except (KeyError, web.HTTPError):  # the session outlives its kernel while it stops
            raise _stopped(path) from None
        except asyncio.CancelledError:
            if client is None or self._clients.get(kernel_id) is client:
                raise  # the request itself was cancelled
            raise _stopped(path) from None  # the kernel stopped: its client was dropped
        value = reply["content"].get("user_expressions", {}).get("r", {})
        if value.get("status") != "ok":
            if value.get("ename") == "KeyboardInterrupt":  # stopping interrupts it first
                raise AgentRefused(f"the kernel of {path!r} was interrupted before it answered "
                                   "(stopped, or the person pressed Stop); try again",
                                   status=409)  # fmt: skip
            if value.get("ename") == "ModuleNotFoundError":
                raise AgentRefused(f"nbchat is not installed in the kernel of {path!r}; the "
                                   "person can pip install nbchat in its environment", status=403)
            raise AgentRefused(f"the kernel of {path!r} could not answer "
                               f"({value.get('ename', 'no reply')})", status=500)  # fmt: skip
        return str(value.get("data", {}).get("text/plain", ""))

    async def wake(self, path: str) -> None:
        """Tell the kernel of ``path``, if one runs, its paths and that a call waits there."""
        sessions = await self.sessions()
        kernel_id = next((s.kernel_id for s in sessions if s.path == path), None)
        if kernel_id is None or kernel_id not in self.serverapp.kernel_manager:
            return  # no kernel now: the call waits, and shows once one runs and is woken
        paths = tuple(sorted({s.path for s in sessions if s.kernel_id == kernel_id}))
        # A restarted kernel keeps its id but has forgotten what it was told: its process counts.
        process = getattr(self.serverapp.kernel_manager.get_kernel(kernel_id).provisioner,
                          "pid", None)  # fmt: skip
        told = self._told.get(kernel_id)
        if told is not None and told[0] == (paths, process) and \
                time.monotonic() - told[1] < WAKE_EVERY:  # fmt: skip
            return
        self._told[kernel_id] = ((paths, process), time.monotonic())
        call = kernel_call("wake", path, list(paths))
        # Under the kernel's lock: a send while a read waits on the same client can lose
        # the read's wake-up. Its reply is awaited briefly, so that the kernel knows its
        # notebook before the agent holds the handle (a new client's socket may still be
        # connecting while the person's answer arrives on theirs); a busy kernel learns later.
        try:
            async with self._locks.setdefault(kernel_id, asyncio.Lock()):
                client = self._client(kernel_id)
                msg_id = client.execute(call, silent=True, store_history=False,
                                        allow_stdin=False)  # fmt: skip
                with contextlib.suppress(KernelBusy):
                    await self._reply(client, msg_id, WAKE_WAIT)
        except (KeyError, web.HTTPError):
            return  # it stopped meanwhile: the call waits, as with no kernel
        except asyncio.CancelledError:
            if self._clients.get(kernel_id) is not None:
                raise
            # it stopped meanwhile and its client was dropped: the call waits

    async def _kernel_of(self, path: str) -> str:
        for session in await self.sessions():
            if session.path == path and session.kernel_id in self.serverapp.kernel_manager:
                return session.kernel_id
        raise AgentRefused(f"no notebook {path!r} has a running kernel", status=404)

    def _client(self, kernel_id: str) -> Any:
        client = self._clients.get(kernel_id)
        if client is None:
            client = self.serverapp.kernel_manager.get_kernel(kernel_id).client()
            # The shell channel is all a silent request needs: no heartbeat thread, and no
            # iopub socket filling with output nobody reads.
            client.start_channels(shell=True, iopub=False, stdin=False, hb=False,
                                  control=False)  # fmt: skip
            self._clients[kernel_id] = client
        return client

    async def _on_kernel_action(self, logger: Any, schema_id: str, data: dict) -> None:
        """A kernel shut down or restarted: drop its client; a restarted one is told again."""
        kernel_id, action = data.get("kernel_id"), data.get("action")
        if not kernel_id or action not in ("shutdown", "restart"):
            return
        told = self._told.get(kernel_id)
        self._drop(kernel_id)
        if action == "restart" and told is not None and data.get("status") == "success":
            # It knew its paths and had calls waiting: tell the new process, show them again.
            await self.wake(told[0][0][0])

    def _forget_gone(self) -> None:
        """Drop the clients of kernels the server no longer has (culled, died)."""
        manager = self.serverapp.kernel_manager
        for kernel_id in [k for k in self._clients if k not in manager]:
            self._drop(kernel_id)

    def _drop(self, kernel_id: str) -> None:
        self._told.pop(kernel_id, None)
        self._locks.pop(kernel_id, None)
        client = self._clients.pop(kernel_id, None)
        if client is not None:
            client.stop_channels()

    @staticmethod
    async def _reply(client: Any, msg_id: str, timeout: float = EVALUATE_TIMEOUT) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise KernelBusy()
            try:
                reply = await client.get_shell_msg(timeout=left)
            except Exception:  # queue.Empty from jupyter_client: the kernel is busy
                raise KernelBusy() from None
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                return reply


def _stopped(path: str) -> AgentRefused:
    return AgentRefused(f"no notebook {path!r} has a running kernel: it stopped while it was "
                        "read; list_notebooks shows those that run", status=404)


async def _maybe_await(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future) else value


async def _language(specs: Any, name: str) -> str:
    try:
        spec = await _maybe_await(specs.get_kernel_spec(name))
    except Exception:  # an unknown kernelspec: say so rather than fail the listing
        return "unknown"
    return str(getattr(spec, "language", "unknown")).lower()


class McpEndpoint:
    """The SDK's Streamable HTTP app, run inside Jupyter Server's event loop."""

    def __init__(self, serverapp: Any, notebooks: ServerNotebooks | None = None) -> None:
        self.serverapp = serverapp
        self.notebooks = notebooks if notebooks is not None else ServerNotebooks(serverapp)
        user = default_user()
        self.access = AgentAccess(serverapp, TokenStore(user))
        self._user = user
        self._gate: AgentGate | None = None
        self._app: Any = None
        self._running: asyncio.Future[None] | None = None

    def gate(self) -> AgentGate:
        if self._gate is None:
            from ...base.config import store_location

            self._gate = AgentGate(open_store(store_location(), self._user))
        return self._gate

    async def app(self) -> Any:
        """The ASGI app, its session manager started on first use."""
        if self._app is None:
            from mcp.server.transport_security import TransportSecuritySettings

            for name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
                logging.getLogger(name).setLevel(logging.WARNING)  # a line per request else

            server = agent_server.build(self.notebooks, self.gate)
            self._app = server.streamable_http_app(
                streamable_http_path="/mcp", stateless_http=True, json_response=True,
                max_request_body_size=agent_server.MAX_BODY,
                # Host and Origin are checked before the app, with the administrator's names.
                transport_security=TransportSecuritySettings(
                    enable_dns_rebinding_protection=False),
            )  # fmt: skip
            started = asyncio.get_running_loop().create_future()
            self._running = asyncio.ensure_future(_run(server.session_manager, started))
            await started
        return self._app


async def _run(manager: Any, started: asyncio.Future[None]) -> None:
    async with manager.run():
        started.set_result(None)
        await asyncio.Event().wait()  # for the server's lifetime


class McpHandler(web.RequestHandler):
    """POST (and GET, DELETE) at ``nbchat/mcp``: checked here, then handed to the SDK."""

    endpoint: McpEndpoint

    def initialize(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint
        self._closed = asyncio.Event()

    def check_xsrf_cookie(self) -> None:
        """Agents send no cookies; the bearer token is the check."""

    def on_connection_close(self) -> None:
        self._closed.set()

    async def post(self) -> None:
        await self._serve()

    async def get(self) -> None:
        await self._serve()

    async def delete(self) -> None:
        await self._serve()

    async def _serve(self) -> None:
        try:
            token = self.endpoint.access.check(self.request.headers, self.request.query)
        except NbchatError as error:
            status = getattr(error, "status", 403)
            if status == 401:
                self.set_header("WWW-Authenticate", 'Bearer realm="nbchat"')
            self.set_status(status)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": str(error)}))
            return
        try:
            app = await self.endpoint.app()
        except ImportError:
            self.set_status(503)
            self.finish(json.dumps({"error": "nbchat's agent endpoint needs the mcp package: "
                                             "pip install 'nbchat[mcp]' and restart Jupyter"}))
            return
        caller = agent_server.CALLER.set(token)
        try:
            await app(self._scope(), self._receive, self._send)
        finally:
            agent_server.CALLER.reset(caller)
        if not self._finished:
            self.finish()

    def _scope(self) -> dict[str, Any]:
        request = self.request
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                   for k, v in request.headers.get_all()]  # fmt: skip
        return {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": request.protocol, "path": "/mcp",
            "raw_path": b"/mcp", "query_string": request.query.encode("latin-1"),
            "root_path": "", "headers": headers, "client": (request.remote_ip, 0),
            "server": ("127.0.0.1", 0),
        }  # fmt: skip

    async def _receive(self) -> dict[str, Any]:
        if not getattr(self, "_body_sent", False):
            self._body_sent = True
            return {"type": "http.request", "body": self.request.body or b"", "more_body": False}
        await self._closed.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.set_status(message["status"])
            self.clear_header("Content-Type")
            for key, value in message.get("headers", []):
                self.add_header(key.decode("latin-1"), value.decode("latin-1"))
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            if body:
                self.write(body)
            if message.get("more_body"):
                await self.flush()
            elif not self._finished:
                self.finish()


def add_routes(serverapp: Any, notebooks: ServerNotebooks) -> None:
    """Mount the endpoint under the server's base URL.

    The server's token is scrubbed from then on from all this process hands an
    agent or a model: with it, ``/api/kernels`` runs code around any gate.
    """
    remember(jupyter_token(serverapp), JUPYTER_TOKEN)
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    endpoint = McpEndpoint(serverapp, notebooks)
    web_app.add_handlers(".*$", [(f"{base}{ROUTE}/?", McpHandler, {"endpoint": endpoint})])
