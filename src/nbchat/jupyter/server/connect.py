"""The Connect dialog's routes: connect an endpoint once, its key kept on the server.

The endpoints go into the connections file (:mod:`nbchat.base.connections`),
their keys into the key store (:mod:`nbchat.base.keys`: the system keyring, or a
file only the user reads); every kernel started afterwards uses them with no
``--key``. Every route is a Jupyter Server API handler: the page's login, and
for POST, PUT and DELETE the XSRF check (unless the request carries the
server's token)::

    GET    nbchat/connections         the listing
    POST   nbchat/connections/test    {"kind", "name"?, "base_url"?, "key"?, "models"?,
                                       "api_version"?} -> {"models": [...]} | {"error": line}
    POST   nbchat/connections         {"kind", "name", "base_url"?, "key"?, "models"?,
                                       "api_version"?} -> the listing
    PUT    nbchat/connections/choice  {"chat": {"endpoint", "model"} | null,
                                       "suggestions": … | null} -> the listing
    DELETE nbchat/connections/NAME    the endpoint and its key -> the listing

The listing is ``{"endpoints": [{"name", "kind", "label", "provider",
"base_url", "models", "api_version", "key", "provided"}], "chat",
"suggestions", "presets": [{"kind", "label", "base_url", "needs_key",
"key_hint"}], "keys", "own_allowed"}``; an endpoint's ``key`` says where its
key is kept (null: none is), never what it is, and a URL's user and password
are ``[redacted]``. The endpoints the administrator provides
(:mod:`.provided`) are listed with ``"provided": true``.

A test the endpoint fails (a refused key, nothing listening, a page that is
not an API, an Azure deployment that does not exist) answers 200 with
``{"error": one line}``: nbchat's own message for that failure, scrubbed of
every key. A request refused here answers ``{"error": one line}`` too, with
400 (malformed; a key store that refuses the key, and then nothing is
written), 403 (the administrator allows only the endpoints this server
provides, or the name is one of them) or 404 (no endpoint of that name).

A key reaches an endpoint only at the URL it was given or kept for: a test at
another URL goes without it, and a save that moves an endpoint forgets its
kept key unless a new one is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ...base._across import CONNECTIONS_CHOICE_ROUTE, CONNECTIONS_ROUTE, CONNECTIONS_TEST_ROUTE
from ...base._secrets import redact_url, remember, scrub
from ...base.config import AZURE_API_VERSION, LOCAL_URL, Settings, api_url, guess_provider
from ...base.connections import (
    PRESETS,
    Choice,
    Connection,
    Connections,
    Preset,
    check_name,
    load,
    preset,
    update,
)
from ...base.errors import ConfigError, NbchatError
from ...base.keys import key_store
from . import provided

ROUTE = CONNECTIONS_ROUTE
NAME = r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})"
MAX_MODELS = 500
MAX_TEXT = 300  # characters of a URL, a model name, an api-version
MAX_KEY = 4096
MAX_LINE = 500  # characters of an error line
TYPED = "the Key field"  # where an error says a typed key came from
PROVIDED_KEY = "the Jupyter server (the administrator's)"
NOT_OWN = ("the administrator allows only the endpoints this Jupyter server provides; "
           "ask them for the one you need")  # fmt: skip
_URL = re.compile(r"https?://[^\s/?#]+(?:[/?#]\S*)?\Z", re.IGNORECASE)
_KEY = re.compile(r"[\x21-\x7e]+\Z")  # printable ASCII without spaces: what a header takes


class Refused(Exception):
    """A request refused: its HTTP status and one line for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def one_line(error: BaseException | str) -> str:
    """An error as one bounded line, every secret this process knows scrubbed."""
    line = " ".join(scrub(str(error)).split()) or type(error).__name__
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 1] + "…"


# -- what is connected --------------------------------------------------------------------------
def everything(serverapp: Any) -> tuple[Connections, bool]:
    """The person's endpoints (none where the administrator forbids them) and this server's
    provided ones, which win by name; and whether people's own are allowed."""
    own, offered = load(), provided.offered(serverapp)
    if offered is None:
        return own, True
    given = {name: e.connection for name, e in offered.endpoints.items()}
    endpoints = {**(own.endpoints if offered.own_allowed else {}), **given}
    chat = own.chat if own.chat and own.chat.endpoint in endpoints else offered.chat
    suggestions = (own.suggestions if own.suggestions and own.suggestions.endpoint in endpoints
                   else offered.suggestions)  # fmt: skip
    return Connections(endpoints, chat, suggestions), offered.own_allowed


def listing(serverapp: Any) -> dict[str, Any]:
    """What the dialog shows: endpoints (where each key is kept), choices, presets."""
    found, allowed = everything(serverapp)
    try:
        where = key_store().where()
    except NbchatError as error:
        where = one_line(error)
    return {
        "endpoints": [_shown(c) for c in found.endpoints.values()],
        "chat": found.chat.to_dict() if found.chat else None,
        "suggestions": found.suggestions.to_dict() if found.suggestions else None,
        "presets": [{"kind": kind, "label": p.label, "base_url": p.base_url,
                     "needs_key": p.needs_key, "key_hint": p.key_hint}
                    for kind, p in PRESETS.items()],  # fmt: skip
        "keys": where,
        "own_allowed": allowed,
    }


def _shown(c: Connection) -> dict[str, Any]:
    known = PRESETS.get(c.kind)
    return {"name": c.name, "kind": c.kind, "provider": c.provider,
            "label": known.label if known else (c.kind or c.provider),
            "base_url": redact_url(c.base_url), "models": list(c.models),
            "api_version": c.api_version, "key": PROVIDED_KEY if c.provided else _kept(c.name),
            "provided": c.provided}  # fmt: skip


def _kept(name: str) -> str | None:
    """Where ``name``'s key is kept, None if it is not (or the store cannot tell)."""
    try:
        store = key_store()
        return store.where() if store.get(name) is not None else None
    except NbchatError:
        return None


# -- what a request asks for --------------------------------------------------------------------
@dataclass(frozen=True)
class Wanted:
    """An endpoint as the page describes it, every field checked."""

    kind: str
    preset: Preset
    provider: str
    name: str
    base_url: str
    key: str | None
    models: tuple[str, ...]
    api_version: str | None


def wanted(body: dict[str, Any]) -> Wanted:
    """The endpoint a test or a save names; Refused(400) with one line if it is unusable."""
    key = _key(body.get("key"))
    kind = _text(body, "kind") or "compatible"
    try:
        known = preset(kind)
        name = check_name(_text(body, "name") or kind)
    except ConfigError as error:
        raise Refused(400, str(error)) from None
    url = _url(_text(body, "base_url") or known.base_url, known)
    models = body.get("models") or []
    if _text(body, "model"):
        models = [_text(body, "model"), *models]
    if not isinstance(models, list) or not all(isinstance(m, str) and 0 < len(m.strip())
                                               <= MAX_TEXT for m in models):  # fmt: skip
        raise Refused(400, "models must be a list of model names")
    provider = guess_provider(url) if kind == "compatible" else known.provider
    version = _text(body, "api_version") or None
    return Wanted(kind, known, provider, name, url, key,
                  tuple(dict.fromkeys(m.strip() for m in models))[:MAX_MODELS],
                  version if provider == "azure" else None)  # fmt: skip


def _text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise Refused(400, f"{name} must be text of at most {MAX_TEXT} characters")
    return value.strip()


def _key(value: object) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > MAX_KEY:
        raise Refused(400, f"the key must be text of at most {MAX_KEY} characters; paste it again")
    key = value.strip()
    remember(key)  # scrubbed from every answer from now on, whatever happens next
    if not _KEY.match(key):
        raise Refused(400, "the key holds characters no key has (spaces, line breaks, "
                           "accents); paste it again")  # fmt: skip
    return key


def _url(url: str, known: Preset) -> str:
    if not url:
        example = ("https://RESOURCE.openai.azure.com" if known.provider == "azure"
                   else "http://HOST:PORT/v1")  # fmt: skip
        raise Refused(400, f"give the URL of the {known.label} endpoint, e.g. {example}")
    if url == LOCAL_URL:
        return url
    if not _URL.match(url):
        raise Refused(400, f"the URL must start with http:// or https://, got "
                           f"{redact_url(url)[:80]!r}")  # fmt: skip
    if "@" in url.split("://", 1)[1].split("/", 1)[0]:
        raise Refused(400, "give no user or password in the URL; put the key in the Key field")
    return url.rstrip("/")


# -- the routes' work ---------------------------------------------------------------------------
def try_endpoint(serverapp: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The endpoint's models with the key given (else the one kept for its name at that URL).

    Azure OpenAI lists no deployments: the first one named is asked for one
    token, which tries the URL, the key, the api-version and the name at once.
    """
    from ...llm.client import LLMClient

    asked = wanted(body)
    key, source = asked.key, TYPED
    kept = load().get(asked.name)
    if key is None and kept is not None and _same_url(kept, asked):
        key, source = key_store().get(asked.name), f"the key kept for {asked.name}"
    azure = asked.provider == "azure"
    settings = Settings(
        base_url=api_url(asked.base_url, asked.provider), provider=asked.provider,  # type: ignore[arg-type]
        api_key=key or None, key_source=source, connection=asked.name, max_retries=0,
        model=asked.models[0] if azure and asked.models else None, read_timeout=30.0,
        api_version=(asked.api_version or AZURE_API_VERSION) if azure else None,
    )  # fmt: skip
    try:
        client = LLMClient(settings)
        if not azure:
            return {"models": client.list_models()[:MAX_MODELS]}
        if not asked.models:
            return {"error": "Azure OpenAI lists no deployments: give the deployment's name "
                             "as the model, then test again"}  # fmt: skip
        client.complete([{"role": "user", "content": "Say OK."}], model=asked.models[0],
                        options={"max_tokens": 1})  # fmt: skip
        return {"models": list(asked.models)}
    except NbchatError as error:
        return {"error": one_line(error)}


def _same_url(connection: Connection, asked: Wanted) -> bool:
    return connection.base_url.rstrip("/") == asked.base_url.rstrip("/")


def save(serverapp: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Keep the key first (nothing written if the store refuses it), then the connection."""
    asked = wanted(body)
    _check_own(serverapp, asked.name, "give yours another name")
    store = key_store()
    before = load().get(asked.name)
    moved = before is not None and not _same_url(before, asked)
    had = store.get(asked.name)
    if asked.key is None and asked.preset.needs_key and (moved or had is None):
        raise Refused(400, f"give the key of the {asked.preset.label} endpoint"
                           + (" again: its URL changed" if moved else ""))  # fmt: skip
    if asked.key is not None:
        store.set(asked.name, asked.key)
    models = asked.models or (before.models if before is not None and not moved else ())
    connection = Connection(asked.name, asked.provider, asked.base_url, asked.kind, models,
                            asked.api_version)  # fmt: skip
    try:
        with update() as box:
            box[0] = box[0].with_endpoint(connection)
            if box[0].chat is None and models:
                box[0] = replace(box[0], chat=Choice(asked.name, models[0]))
    except NbchatError:
        if asked.key is not None:
            _put_back(asked.name, had)
        raise
    if moved and asked.key is None:
        store.remove(asked.name)  # a key kept for one URL never goes to another
    return listing(serverapp)


def _put_back(name: str, key: str | None) -> None:
    store = key_store()
    with contextlib.suppress(NbchatError):  # the first error is the one the page is told
        store.set(name, key) if key else store.remove(name)


def _check_own(serverapp: Any, name: str, fix: str) -> None:
    offered = provided.offered(serverapp)
    if offered is None:
        return
    if not offered.own_allowed:
        raise Refused(403, NOT_OWN)
    if name in offered.endpoints:
        raise Refused(403, f"{name!r} is an endpoint this Jupyter server provides; {fix}")


def choose(serverapp: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Save the models chosen for the chat and for suggestions (null: none; absent: as is)."""
    known, _ = everything(serverapp)
    changes: dict[str, Choice | None] = {}
    for field in ("chat", "suggestions"):
        if field not in body:
            continue
        value = body[field]
        if value is not None and not (
                isinstance(value, dict) and isinstance(value.get("endpoint"), str)
                and isinstance(value.get("model"), str) and value["model"].strip()):  # fmt: skip
            raise Refused(400, f'{field} must be {{"endpoint": NAME, "model": MODEL}} or null')
        chosen = known.get(value["endpoint"]) if value is not None else None
        if value is not None and chosen is None:
            raise Refused(400, f"no endpoint is connected as {value['endpoint'][:64]!r}; "
                               f"connect it first")  # fmt: skip
        if chosen is not None and chosen.provided:  # the file keeps choices of its own only
            raise Refused(400, f"{chosen.name!r} is provided by this Jupyter server; the "
                               f"administrator chooses its models (c.NbchatProvided.{field})")
        changes[field] = None if value is None else Choice(value["endpoint"],
                                                           value["model"].strip())  # fmt: skip
    with update() as box:
        box[0] = replace(box[0], **changes)  # type: ignore[arg-type]
    return listing(serverapp)


def remove(serverapp: Any, name: str) -> dict[str, Any]:
    """Forget endpoint ``name``'s key, then the endpoint and the choices naming it."""
    _check_own(serverapp, name, "only the administrator can remove it")
    removed = key_store().remove(name)
    with update() as box:
        known = box[0].get(name) is not None
        box[0] = box[0].without(name)
    if not known and not removed:
        raise Refused(404, f"no endpoint is connected as {name!r}")
    return listing(serverapp)


# -- the handlers -------------------------------------------------------------------------------
class _Handler(APIHandler):
    async def answer(self, work: Callable[..., dict[str, Any]], *args: Any) -> None:
        try:
            found = await asyncio.to_thread(work, self.serverapp, *args)
        except Refused as refused:
            self.set_status(refused.status)
            found = {"error": one_line(refused)}
        except NbchatError as error:  # a key store that refuses, a damaged connections file
            self.set_status(400)
            found = {"error": one_line(error)}
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(found))

    def body(self) -> dict[str, Any]:
        try:
            found = json.loads(self.request.body or b"{}")
        except ValueError:
            found = None
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
    """Mount the Connect dialog's routes under the server's base URL."""
    web_app = serverapp.web_app
    base = web_app.settings.get("base_url", "/").rstrip("/") + "/"
    web_app.add_handlers(".*$", [
        (f"{base}{CONNECTIONS_TEST_ROUTE}", TryHandler),
        (f"{base}{CONNECTIONS_CHOICE_ROUTE}", ChoiceHandler),
        (f"{base}{ROUTE}", ConnectionsHandler),
        (f"{base}{ROUTE}/{NAME}", NamedHandler),
    ])  # fmt: skip
