"""The proxy to the endpoints the administrator provides: ``{base_url}nbchat/provided/<name>/…``.

A kernel sends its request here with the server's token (its announcement's)
as its key; the proxy checks that it comes from this machine and carries the
token, applies the administrator's model caps, and sends it on to the real
endpoint with the real key, streaming the answer back as it arrives.

The path maps exactly: ``{proxy}/<name>/<path>`` is ``{api_url}/<path>``, where
``api_url`` is :func:`nbchat.base.config.api_url` of the configured
``base_url``. For Anthropic, whose ``api_url`` ends in ``/v1``, a kernel's base
is ``{proxy}/<name>/v1`` (:func:`nbchat.base.connections.provided`), so
``{proxy}/<name>/<path>`` is the root above ``/v1`` followed by ``<path>``:
``…/claude/v1/messages`` is ``https://api.anthropic.com/v1/messages``.

This is not a route behind Jupyter's login: kernels have no browser cookie.
The token is its only key, and a request from another machine is refused
before it is looked at.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import unquote

import httpx
from tornado import web
from tornado.iostream import StreamClosedError

from ...base._provided import PROXY_ROUTE
from ...base._secrets import redact_url, scrub
from ...base.config import api_url
from ...base.connections import Connection
from ...base.policy import ENV_ALLOWED_MODELS, ENV_FORCE_MODEL, Policy
from ._offered import Offered

try:
    from jupyter_server.auth.decorator import allow_unauthenticated
except ImportError:  # jupyter_server before 2.13 checks no handler's decorators
    F = TypeVar("F", bound=Callable[..., Any])

    def allow_unauthenticated(method: F) -> F:
        return method


__all__ = ["ProxyHandler", "add_route", "is_local_client", "model_refusal", "offered_tokens",
           "upstream_url"]  # fmt: skip

FORWARDED = ("Content-Type", "Accept", "anthropic-version", "anthropic-beta")
MAX_ERROR_BODY = 64 * 1024  # bytes of an upstream error passed on (scrubbed)
TIMEOUT = httpx.Timeout(10.0, read=600.0)  # a model may think for minutes between chunks
AZURE_DEPLOYMENT = "openai/deployments/"


def upstream_url(connection: Connection, path: str) -> str:
    """The real URL of ``path`` (what follows ``{proxy}/<name>/``) on ``connection``."""
    base = api_url(connection.base_url, connection.provider).rstrip("/")
    if connection.provider == "anthropic":
        base = base.removesuffix("/v1")  # the kernel's base ends in /v1, its path starts with it
    path = path.lstrip("/")
    return f"{base}/{path}" if path else base


def is_local_client(remote_ip: str | None, server_ip: str = "") -> bool:
    """Whether a request comes from this machine: loopback, or the one address the server
    listens on (a kernel beside a server bound to it connects from it)."""
    try:
        address = ipaddress.ip_address((remote_ip or "").strip("[]"))
    except ValueError:
        return False
    if address.is_loopback:
        return True
    try:
        listening = ipaddress.ip_address(server_ip.strip("[]"))
    except ValueError:
        return False
    return not listening.is_unspecified and address == listening


def offered_tokens(headers: Mapping[str, str]) -> list[str]:
    """What a request sends as its key: a bearer token, ``x-api-key`` or ``api-key``."""
    found = []
    auth = headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        found.append(auth[7:].strip())
    found += [headers.get(name, "").strip() for name in ("x-api-key", "api-key")]
    return [token for token in found if token]


def requested_model(provider: str, path: str, body: bytes) -> str | None:
    """The model a request asks for: Azure's deployment in the path, else the body's ``model``."""
    clean = path.lstrip("/")
    if provider == "azure" and clean.startswith(AZURE_DEPLOYMENT):
        return unquote(clean[len(AZURE_DEPLOYMENT):].split("/", 1)[0]) or None
    try:
        data = json.loads(body or b"null")
    except ValueError:
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model if isinstance(model, str) and model else None


def model_refusal(policy: Policy, provider: str, path: str, body: bytes) -> str | None:
    """Why the administrator's model caps refuse this POST, in one line; None if they allow it.

    With a cap set, a request that names no model is refused: the cap fails closed.
    """
    if not (policy.force_model or policy.allowed_models):
        return None
    model = requested_model(provider, path, body)
    shown = repr(model[:100]) if model else None
    if policy.force_model:
        if model == policy.force_model:
            return None
        return (f"model {shown} is not allowed here; the administrator sets "
                f"{policy.force_model} ({ENV_FORCE_MODEL})")  # fmt: skip
    if model in policy.allowed_models:
        return None
    return (f"model {shown} is not allowed here; the administrator allows "
            f"{', '.join(policy.allowed_models)} ({ENV_ALLOWED_MODELS})")  # fmt: skip


def key_headers(provider: str, key: str | None) -> dict[str, str]:
    """The real key, in the header the provider reads."""
    if not key:
        return {}
    if provider == "anthropic":
        return {"x-api-key": key}
    if provider == "azure":
        return {"api-key": key}
    return {"Authorization": f"Bearer {key}"}


def _has_dot_segment(path: str) -> bool:
    return any(part in (".", "..") for part in unquote(path).replace("\\", "/").split("/"))


class ProxyHandler(web.RequestHandler):
    """GET and POST under ``nbchat/provided/<name>/``, sent on with the real key."""

    offered: Offered
    client: httpx.AsyncClient

    def initialize(self, offered: Offered, clients: list[httpx.AsyncClient], prefix: str,
                   server_ip: str) -> None:  # fmt: skip
        self.offered, self.prefix, self.server_ip = offered, prefix, server_ip
        if not clients:  # one pooled client for the server's life, made in its loop
            # As nbchat's own client: no proxy from the environment. Redirects are not
            # followed: the key would go along to wherever they point.
            clients.append(httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False,
                                             trust_env=False))  # fmt: skip
        self.client = clients[0]
        self._task: asyncio.Task[Any] | None = None
        self._gone = False

    def check_xsrf_cookie(self) -> None:
        """No XSRF check: kernels send no cookie, and the token in a header is the check (a
        page elsewhere can neither read the token nor send that header cross-site)."""

    def on_connection_close(self) -> None:
        self._gone = True  # the client went away: end the upstream request with it
        if self._task is not None:
            self._task.cancel()

    @allow_unauthenticated
    async def get(self, name: str) -> None:
        await self._forward(name)

    @allow_unauthenticated
    async def post(self, name: str) -> None:
        await self._forward(name)

    def _refuse(self, status: int, message: str) -> None:
        if status == 401:
            self.set_header("WWW-Authenticate", 'Bearer realm="nbchat"')
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps({"error": {"message": message, "type": "nbchat_proxy"}}))

    def _refusal(self, name: str, path: str) -> tuple[int, str] | None:
        """Why this request goes no further, checked in this order; None when it may."""
        request = self.request
        if not is_local_client(request.remote_ip, self.server_ip):
            return 403, "nbchat's provided endpoints answer this machine's kernels only"
        secret = self.offered.token.encode()
        sent = offered_tokens(request.headers)
        if not any(hmac.compare_digest(token.encode(), secret) for token in sent):
            return 401, "send the Jupyter server's nbchat token (its announcement's) as the key"
        endpoint = self.offered.endpoints.get(name)
        if endpoint is None:
            return 404, f"no endpoint named {name!r} is provided here"
        if _has_dot_segment(path):
            return 400, "a path with . or .. segments is not sent on"
        if request.method == "POST":
            refused = model_refusal(Policy.from_env(), endpoint.connection.provider, path,
                                    request.body or b"")  # fmt: skip
            if refused:
                return 403, refused
        return None

    async def _forward(self, name: str) -> None:
        path = self.request.path[len(self.prefix) + len(name):]  # raw, as the kernel sent it
        refusal = self._refusal(name, path)
        if refusal is not None:
            self._refuse(*refusal)
            return
        endpoint = self.offered.endpoints[name]
        provider = endpoint.connection.provider
        url = upstream_url(endpoint.connection, path)
        if self.request.query:
            url += f"?{self.request.query}"
        headers = {k: v for k in FORWARDED if (v := self.request.headers.get(k))}
        headers.update(key_headers(provider, endpoint.key))
        self._task = asyncio.current_task()
        try:
            await self._stream(url, headers)
        except asyncio.CancelledError:
            if not self._gone:
                raise
        except StreamClosedError:
            pass  # the kernel went away mid-answer; leaving the block closed upstream
        except httpx.HTTPError as error:
            if not self._headers_written:
                line = f"the provided endpoint {name!r} did not answer: {error}".splitlines()[0]
                self._refuse(502, scrub(redact_url(line)))
        finally:
            self._task = None
        if not self._finished and not self._gone:
            self.finish()

    async def _stream(self, url: str, headers: dict[str, str]) -> None:
        """Send the request on; pass status, type and body back, chunk by chunk."""
        method, body = self.request.method or "GET", self.request.body or None
        async with self.client.stream(method, url, content=body, headers=headers) as response:
            self.set_status(response.status_code, response.reason_phrase or "Upstream")
            kind = response.headers.get("content-type")
            if kind:
                self.set_header("Content-Type", kind)
            self.set_header("Cache-Control", "no-store")
            if response.status_code >= 400:  # an error may quote the key: scrubbed, whole
                text = await _bounded(response)
                self.finish(scrub(text))
                return
            async for chunk in response.aiter_bytes():
                self.write(chunk)
                await self.flush()


async def _bounded(response: httpx.Response) -> str:
    found = b""
    async for chunk in response.aiter_bytes():
        found += chunk
        if len(found) >= MAX_ERROR_BODY:
            break
    return found[:MAX_ERROR_BODY].decode("utf-8", "replace")


def add_route(serverapp: Any, offered: Offered) -> None:
    """Mount the proxy under the server's base URL."""
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    prefix = f"{base}{PROXY_ROUTE}"
    options = {"offered": offered, "clients": [], "prefix": prefix,
               "server_ip": str(getattr(serverapp, "ip", ""))}  # fmt: skip
    web_app.add_handlers(".*$", [
        (f"{prefix}([A-Za-z0-9][A-Za-z0-9_.-]*)(?:/.*)?", ProxyHandler, options),
    ])  # fmt: skip
