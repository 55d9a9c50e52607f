"""Endpoints the administrator provides: users' kernels use them, no user reads their keys.

The administrator writes them in the server's configuration
(``jupyter_server_config.py``, on a hub the single-user servers')::

    c.NbchatProvided.endpoints = {
        "course": {"provider": "openai", "base_url": "https://llm.example.edu/v1",
                   "key_env": "COURSE_KEY", "models": ["gpt-4o-mini"]},
    }
    c.NbchatProvided.chat = {"endpoint": "course", "model": "gpt-4o-mini"}
    c.NbchatProvided.suggestions = {"endpoint": "course", "model": "gpt-4o-mini"}
    c.NbchatProvided.allow_own = False  # people's own endpoints are ignored

Each endpoint has the fields of a connection (:mod:`nbchat.base.connections`:
``provider``, ``base_url``, ``kind``, ``models``, ``api_version``) and at most
one of ``key`` (the key itself), ``key_env`` (a variable of the server's
environment, read once at start and then removed from it, so that no kernel
inherits it) or ``key_file`` (a file the server reads once at start). An entry
that is wrong is logged in one line naming it, without its key, and skipped.

The keys stay in this process. The server announces what it provides, with a
token of its own and never a key, in the file
:func:`nbchat.base._provided.announcement_path` names (0600, removed at exit);
kernels reach a provided endpoint at ``{base_url}nbchat/provided/<name>``
sending that token, and the proxy (:mod:`.provided_proxy`) sends the request
on with the real key.

For the other routes of this server:

- :func:`provided_public` -- the provided endpoints as the Connect dialog may
  show them (no key, no token, URLs without user or password) and the choices;
- :func:`own_allowed` -- whether people may connect endpoints of their own;
- :func:`provided_settings` -- the real :class:`~nbchat.base.config.Settings` of a
  provided endpoint, key included, for requests this server makes itself
  (code suggestions); they must never be sent to a browser or a kernel.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import tempfile
from collections.abc import MutableMapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict
from traitlets.config import Configurable

from ...base._provided import PROXY_ROUTE, announcement_path
from ...base._secrets import redact_url, remember
from ...base.config import AZURE_API_VERSION, Settings, api_url
from ...base.connections import Choice, check_name, parse
from ...base.errors import ConfigError
from ...base.policy import Policy
from . import provided_proxy
from ._offered import Endpoint, Offered

__all__ = ["NbchatProvided", "Offered", "add_routes", "own_allowed", "provided_public",
           "provided_settings", "read_config"]  # fmt: skip

WHERE = "c.NbchatProvided"
SETTINGS_KEY = "nbchat_provided"  # where the web app's settings keep what is offered
PUBLIC_FIELDS = ("provider", "base_url", "kind", "models", "api_version")
KEY_FIELDS = ("key", "key_env", "key_file")


class NbchatProvided(Configurable):
    """The endpoints, choices and switch an administrator sets as ``c.NbchatProvided.*``."""

    endpoints = Dict(
        help="Endpoints by name: provider, base_url, models, and one of key, key_env "
        "(a variable of the server's environment) or key_file. Kernels use them "
        "through this server; no kernel or user gets the key.",
    ).tag(config=True)
    chat = Dict(
        default_value=None, allow_none=True,
        help='The chat\'s model: {"endpoint": NAME, "model": MODEL}.',
    ).tag(config=True)  # fmt: skip
    suggestions = Dict(
        default_value=None, allow_none=True,
        help='The code suggestions\' model: {"endpoint": NAME, "model": MODEL}.',
    ).tag(config=True)  # fmt: skip
    allow_own = Bool(
        True, help="Whether people may use endpoints they connect themselves."
    ).tag(config=True)


def read_config(
    config: NbchatProvided, environ: MutableMapping[str, str] | None = None
) -> tuple[Offered, list[str]]:
    """What the configuration provides, and one line for each entry skipped.

    The variables ``key_env`` names are removed from ``environ`` (the server's
    environment) once read, so kernels started afterwards do not inherit them.
    """
    environ = os.environ if environ is None else environ
    errors: list[str] = []
    endpoints: dict[str, Endpoint] = {}
    read_vars: set[str] = set()
    for name, value in (config.endpoints or {}).items():
        try:
            endpoints[name] = _endpoint(name, value, environ, read_vars)
        except ConfigError as error:
            errors.append(str(error))
    for var in read_vars:
        environ.pop(var, None)
    for endpoint in endpoints.values():
        remember(endpoint.key, f"the key of the provided endpoint {endpoint.connection.name!r}")
    chat = _choice("chat", config.chat, endpoints, errors)
    suggestions = _choice("suggestions", config.suggestions, endpoints, errors)
    return Offered(endpoints, chat, suggestions, bool(config.allow_own)), errors


def _endpoint(name: object, value: object, environ: MutableMapping[str, str],
              read_vars: set[str]) -> Endpoint:  # fmt: skip
    where = f"{WHERE}.endpoints[{name!r}]"
    try:
        check_name(name)
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a dict with provider, base_url and a key "
                          f"(key, key_env or key_file)")  # fmt: skip
    unknown = sorted(str(k) for k in value if k not in (*PUBLIC_FIELDS, *KEY_FIELDS))
    if unknown:
        raise ConfigError(f"{where} has unknown fields {', '.join(unknown)}; use "
                          f"{', '.join(PUBLIC_FIELDS)} and one of "
                          f"{', '.join(KEY_FIELDS)}")  # fmt: skip
    public = {k: value[k] for k in PUBLIC_FIELDS if k in value}
    try:
        connection = parse({"endpoints": {name: public}}, WHERE).endpoints[str(name)]
    except ConfigError as error:  # its message names "endpoint 'x' in c.NbchatProvided"
        raise ConfigError(str(error).replace(f"endpoint {name!r} in {WHERE}", where)) from None
    url = connection.base_url
    if "?" in url or "#" in url:  # a query may hold a key: never shown, never announced
        raise ConfigError(f"{where} has a base_url with a query; give the URL alone and the key "
                          f"as key, key_env or key_file")  # fmt: skip
    if not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where} needs a base_url starting with http:// or https://, e.g. "
                          f"https://api.openai.com/v1; got {redact_url(url)!r}")  # fmt: skip
    key = _key(where, value, environ, read_vars)
    return Endpoint(replace(connection, provided=True), key)


def _key(where: str, value: dict[str, Any], environ: MutableMapping[str, str],
         read_vars: set[str]) -> str | None:  # fmt: skip
    """The key from ``key``, ``key_env`` or ``key_file``; None for an endpoint that needs none."""
    given = [k for k in KEY_FIELDS if value.get(k) not in (None, "")]
    if len(given) > 1:
        raise ConfigError(f"{where} has {' and '.join(given)}; keep one of them")
    if not given:
        return None
    kind, source = given[0], value[given[0]]
    if not isinstance(source, str):
        raise ConfigError(f"{where}: {kind} must be text")
    if kind == "key":
        if not source.strip():
            raise ConfigError(f"{where}: key is empty; give the key, or key_env or key_file")
        return source.strip()
    if kind == "key_env":
        found = environ.get(source, "").strip()
        if not found:
            raise ConfigError(f"{where}: key_env names {source}, which is not set in the "
                              f"server's environment; set it (c.Spawner.environment) or use "
                              f"key_file")  # fmt: skip
        read_vars.add(source)
        return found
    try:
        found = Path(source).expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not text"
        raise ConfigError(f"{where}: cannot read key_file {source} ({reason}); make it "
                          f"readable by the server's account") from None  # fmt: skip
    if not found:
        raise ConfigError(f"{where}: key_file {source} is empty; write the key in it")
    return found


def _choice(label: str, value: object, endpoints: dict[str, Endpoint],
            errors: list[str]) -> Choice | None:  # fmt: skip
    if not value:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("endpoint"), str)
            and isinstance(value.get("model"), str) and value["model"]):  # fmt: skip
        errors.append(f'{WHERE}.{label} must be {{"endpoint": NAME, "model": MODEL}}')
        return None
    if value["endpoint"] not in endpoints:
        errors.append(f"{WHERE}.{label} names {value['endpoint']!r}, which is not a provided "
                      f"endpoint; name one of {', '.join(endpoints) or 'none'}")  # fmt: skip
        return None
    return Choice(value["endpoint"], value["model"])


def offered(serverapp: Any) -> Offered | None:
    """What this server provides, once :func:`add_routes` has read it."""
    found = serverapp.web_app.settings.get(SETTINGS_KEY)
    return found if isinstance(found, Offered) else None


def provided_public(serverapp: Any) -> dict[str, Any]:
    """The provided endpoints without keys, the choices and ``own_allowed``, for a browser."""
    found = offered(serverapp)
    return (found or Offered(token="")).public()


def own_allowed(serverapp: Any) -> bool:
    """Whether the administrator lets people use endpoints of their own here."""
    found = offered(serverapp)
    return found is None or found.own_allowed


def provided_settings(serverapp: Any, name: str, model: str | None = None) -> Settings | None:
    """The provided endpoint ``name``'s settings with its real key, None if none is provided.

    For requests this server makes itself; ``model`` passes the administrator's
    policy (:class:`~nbchat.base.errors.ModelNotAllowed` if it may not be used).
    """
    found = offered(serverapp)
    endpoint = found.endpoints.get(name) if found is not None else None
    if endpoint is None:
        return None
    c = endpoint.connection
    return Settings(
        base_url=api_url(c.base_url, c.provider), provider=c.provider,  # type: ignore[arg-type]
        model=Policy.from_env().model(model), api_key=endpoint.key,
        key_source=f"the administrator's key for {name!r} ({WHERE}.endpoints)",
        api_version=(c.api_version or AZURE_API_VERSION) if c.provider == "azure" else None,
        connection=name,
    )  # fmt: skip


def proxy_url(serverapp: Any) -> str:
    """Where kernels reach the proxy: this server's port on loopback (or the one address it
    listens on), under its base URL."""
    import ipaddress

    ip = str(getattr(serverapp, "ip", "") or "")
    host = "127.0.0.1"
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(ip.strip("[]"))
        if address.version == 6:
            host = "[::1]" if address.is_loopback or address.is_unspecified else f"[{address}]"
        elif not (address.is_loopback or address.is_unspecified):
            host = str(address)
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/") + "/"
    return f"http://{host}:{serverapp.port}{base}{PROXY_ROUTE.rstrip('/')}"


def write_announcement(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` whole (a reader sees the old file or the new), 0600."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:  # mkstemp's file is 0600
            json.dump(data, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_announcement(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def add_routes(serverapp: Any) -> None:
    """Read ``c.NbchatProvided``, mount the proxy and announce what it provides.

    The announcement is written when the server's loop starts, once its port is
    known (before any kernel can start), and removed when the process exits.
    """
    path = announcement_path()
    remove_announcement(path)  # a stale one, of an earlier process with this pid
    found, errors = read_config(NbchatProvided(parent=serverapp))
    for error in errors:
        serverapp.log.warning("nbchat: %s; that entry is not provided", error)
    web_app = serverapp.web_app
    web_app.settings[SETTINGS_KEY] = found
    if found.is_empty:
        return
    if getattr(serverapp, "sock", ""):
        serverapp.log.warning("nbchat: %s needs the server on a TCP port; with "
                              "ServerApp.sock nothing is provided", WHERE)  # fmt: skip
        return
    provided_proxy.add_route(serverapp, found)

    def announce() -> None:
        try:
            write_announcement(path, found.announcement(proxy_url(serverapp)))
        except OSError as error:
            serverapp.log.warning("nbchat: cannot write %s (%s); kernels will not find the "
                                  "provided endpoints", path, error.strerror)  # fmt: skip
            return
        serverapp.log.info("nbchat: provides %s to this server's kernels",
                           ", ".join(found.endpoints) or "no endpoint")  # fmt: skip

    atexit.register(remove_announcement, path)
    serverapp.io_loop.add_callback(announce)
