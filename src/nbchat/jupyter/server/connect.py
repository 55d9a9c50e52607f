"""The Connect dialog's routes: connect an endpoint once, its key kept on the server.

``GET nbchat/connections`` lists the connected endpoints (whether a key is
kept, never the key), the models chosen, the presets and where keys are kept.
``POST nbchat/connections/test`` lists an endpoint's models with a key given
(or the one kept), answering ``{"models": [...]}`` or ``{"error": one line}``.
``POST nbchat/connections`` keeps the key (keyring or 0600 file) first, then
writes the connection; ``PUT nbchat/connections/choice`` saves the chat's and
suggestions' models; ``DELETE nbchat/connections/<name>`` forgets both.

Every route is a Jupyter Server API handler: the page's login and XSRF check.
A key goes from the browser to here once and never back.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ...base import connections
from ...base._across import CONNECTIONS_CHOICE_ROUTE, CONNECTIONS_ROUTE, CONNECTIONS_TEST_ROUTE
from ...base._secrets import redact_url, remember, scrub
from ...base.config import Settings, api_url, guess_provider
from ...base.connections import PRESETS, Choice, Connection
from ...base.errors import NbchatError
from ...base.keys import key_store

ROUTE = CONNECTIONS_ROUTE
MAX_MODELS = 500


def one_line(error: BaseException) -> str:
    """The first line of an error, with every known secret scrubbed."""
    text = str(error).strip().splitlines()
    return scrub(text[0] if text else type(error).__name__)


def _kept(name: str) -> bool:
    try:
        return key_store().get(name) is not None
    except NbchatError:
        return False


def listing() -> dict[str, Any]:
    """What the dialog shows: endpoints (no key), choices, presets, where keys are kept."""
    found = connections.load_all()
    endpoints = []
    for c in found.endpoints.values():
        known = PRESETS.get(c.kind)
        endpoints.append({"name": c.name, "kind": c.kind, "provider": c.provider,
                          "label": known.label if known else (c.kind or c.provider),
                          "base_url": redact_url(c.base_url), "models": list(c.models),
                          "key": c.provided or _kept(c.name), "provided": c.provided})  # fmt: skip
    try:
        where = key_store().where()
    except NbchatError as error:
        where = one_line(error)
    return {
        "endpoints": endpoints,
        "chat": found.chat.to_dict() if found.chat else None,
        "suggestions": found.suggestions.to_dict() if found.suggestions else None,
        "presets": [{"kind": kind, "label": p.label, "base_url": p.base_url,
                     "needs_key": p.needs_key, "key_hint": p.key_hint}
                    for kind, p in PRESETS.items()],  # fmt: skip
        "keys": where,
    }


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} must be text")
    return value.strip()


def _endpoint(body: dict[str, Any]) -> tuple[str, str, str]:
    """The kind, wire format and URL a request names; ValueError/ConfigError if unusable."""
    kind = _text(body, "kind") or "compatible"
    known = connections.preset(kind)
    url = _text(body, "base_url") or known.base_url
    if not url:
        example = "https://RESOURCE.openai.azure.com" if kind == "azure" else "http://HOST:PORT/v1"
        raise ValueError(f"give the URL of the {known.label} endpoint, e.g. {example}")
    if url != "local" and not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"the URL must start with http:// or https://, got {redact_url(url)!r}")
    provider = guess_provider(url) if kind == "compatible" else known.provider
    return kind, provider, url


def try_endpoint(body: dict[str, Any]) -> dict[str, Any]:
    """List the endpoint's models with the key given (else the one kept for ``name``)."""
    from ...llm.client import LLMClient

    key = _text(body, "key")
    remember(key or None)
    try:
        kind, provider, url = _endpoint(body)
        name = _text(body, "name")
        source = "the Key field"
        if not key and name:
            key = key_store().get(connections.check_name(name)) or ""
            source = f"the key kept for {name}"
        version = _text(body, "api_version") or None if provider == "azure" else None
        settings = Settings(base_url=api_url(url, provider), provider=provider,  # type: ignore[arg-type]
                            api_key=key or None, key_source=source, api_version=version,
                            model=_text(body, "model") or None,
                            connection=name or None)  # fmt: skip
        models = LLMClient(settings).list_models()
    except (NbchatError, ValueError) as error:
        return {"error": one_line(error)}
    except Exception as error:  # noqa: BLE001 - any failure is the dialog's one line
        return {"error": one_line(error) or type(error).__name__}
    return {"models": models[:MAX_MODELS]}


def save(body: dict[str, Any]) -> dict[str, Any]:
    """Keep the key first (nothing written if that fails), then the connection."""
    kind, provider, url = _endpoint(body)
    name = connections.check_name(_text(body, "name") or kind)
    key = _text(body, "key")
    models = body.get("models") or []
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ValueError("models must be a list of names")
    if key:
        key_store().set(name, key)
    version = _text(body, "api_version") or None if provider == "azure" else None
    connection = Connection(name, provider, url, kind, tuple(models[:MAX_MODELS]), version)
    with connections.update() as box:
        box[0] = box[0].with_endpoint(connection)
        if box[0].chat is None and connection.models:
            box[0] = replace(box[0], chat=Choice(name, connection.models[0]))
    return listing()


def choose(body: dict[str, Any]) -> dict[str, Any]:
    """Save the models chosen for the chat and for suggestions (null: none chosen)."""
    with connections.update() as box:
        changes: dict[str, Choice | None] = {}
        for field in ("chat", "suggestions"):
            if field not in body:
                continue
            value = body[field]
            if value is None:
                changes[field] = None
                continue
            if not (isinstance(value, dict) and isinstance(value.get("endpoint"), str)
                    and isinstance(value.get("model"), str) and value["model"]):  # fmt: skip
                raise ValueError(f'{field} must be {{"endpoint": NAME, "model": MODEL}} or null')
            if value["endpoint"] not in box[0].endpoints:
                raise ValueError(f"no endpoint is connected as {value['endpoint']!r}")
            changes[field] = Choice(value["endpoint"], value["model"])
        box[0] = replace(box[0], **changes)  # type: ignore[arg-type]
    return listing()


def remove(name: str) -> dict[str, Any]:
    """Forget endpoint ``name``'s key, then the endpoint."""
    connections.check_name(name)
    key_store().remove(name)
    with connections.update() as box:
        box[0] = box[0].without(name)
    return listing()


class _Handler(APIHandler):
    async def answer(self, work: Any, *args: Any) -> None:
        try:
            found = await asyncio.to_thread(work, *args)
        except (NbchatError, ValueError) as error:
            self.set_status(400)
            found = {"error": one_line(error)}
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(found))

    def body(self) -> dict[str, Any]:
        try:
            found = json.loads(self.request.body or b"{}")
        except ValueError:
            raise web.HTTPError(400, "send a JSON object") from None
        if not isinstance(found, dict):
            raise web.HTTPError(400, "send a JSON object")
        return found


class ConnectionsHandler(_Handler):
    @web.authenticated
    async def get(self) -> None:
        await self.answer(listing)

    @web.authenticated
    async def post(self) -> None:
        await self.answer(save, self.body())


class NamedHandler(_Handler):
    @web.authenticated
    async def delete(self, name: str) -> None:
        await self.answer(remove, name)


class TryHandler(_Handler):
    @web.authenticated
    async def post(self) -> None:
        await self.answer(try_endpoint, self.body())

    @web.authenticated
    async def delete(self) -> None:  # an endpoint named "test"
        await self.answer(remove, "test")


class ChoiceHandler(_Handler):
    @web.authenticated
    async def put(self) -> None:
        await self.answer(choose, self.body())

    @web.authenticated
    async def delete(self) -> None:  # an endpoint named "choice"
        await self.answer(remove, "choice")


def add_routes(serverapp: Any) -> None:
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    web_app.add_handlers(".*$", [
        (f"{base}{CONNECTIONS_TEST_ROUTE}", TryHandler),
        (f"{base}{CONNECTIONS_CHOICE_ROUTE}", ChoiceHandler),
        (f"{base}{ROUTE}", ConnectionsHandler),
        (f"{base}{ROUTE}/([A-Za-z0-9][A-Za-z0-9_.-]*)", NamedHandler),
    ])  # fmt: skip
