"""The endpoints a person connected once, by name, for every kernel, the panel and the server.

They are kept in ``<jupyter config dir>/nbchat/connections.json`` (or the file
``NBCHAT_CONFIG`` names), a file people can read and edit, which never holds
a key: keys are kept by :mod:`nbchat.base.keys`, under the endpoint's name.
The file is written atomically under a lock, so two kernels saving at once
lose nothing and a reader never sees half of it::

    {
      "endpoints": {
        "openai": {"provider": "openai", "base_url": "https://api.openai.com/v1",
                   "models": ["gpt-4o-mini", "gpt-4o"]},
        "claude": {"provider": "anthropic", "base_url": "https://api.anthropic.com/v1"}
      },
      "chat": {"endpoint": "openai", "model": "gpt-4o-mini"},
      "suggestions": {"endpoint": "claude", "model": "claude-haiku-4-5"}
    }

``models`` is what the endpoint listed when it was last tested, so a model
can be found by name (``%chat -m claude-…``) without asking every endpoint.
Environment variables (``NBCHAT_BASE_URL``, ``NBCHAT_API_KEY``, …) keep
working and win over this file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["CONFIG_NAME", "ENV_CONFIG", "PRESETS", "Choice", "Connection", "Connections",
           "Preset", "Provided", "check_name", "config_path", "connect_url",
           "endpoint_for_model", "load", "load_all", "name_for", "preset", "provided", "stamp",
           "update"]  # fmt: skip

ENV_CONFIG = "NBCHAT_CONFIG"  # the connections file, if not <jupyter config dir>/nbchat/
CONFIG_NAME = "connections.json"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
WIRE_PROVIDERS = ("openai", "ollama", "anthropic", "azure")
# Model name prefixes only one kind of endpoint serves under that name.
FAMILIES = {"claude": ("anthropic",), "gemini": ("gemini",), "gpt-": ("openai", "azure"),
            "o1": ("openai", "azure"), "o3": ("openai", "azure"), "o4": ("openai", "azure")}


@dataclass(frozen=True)
class Preset:
    """A kind of endpoint people connect: its wire format, its URL, whether it needs a key."""

    label: str
    provider: str
    base_url: str  # "" when the person gives it (Azure's resource, a compatible server)
    needs_key: bool
    key_hint: str = ""


PRESETS: dict[str, Preset] = {
    "openai": Preset("OpenAI", "openai", "https://api.openai.com/v1", True,
                     "starts with sk-; from platform.openai.com/api-keys"),
    "anthropic": Preset("Anthropic", "anthropic", "https://api.anthropic.com/v1", True,
                        "starts with sk-ant-; from console.anthropic.com"),
    "gemini": Preset("Gemini", "openai",
                     "https://generativelanguage.googleapis.com/v1beta/openai", True,
                     "from aistudio.google.com/apikey"),
    "azure": Preset("Azure OpenAI", "azure", "", True,
                    "the resource's key, with its URL https://RESOURCE.openai.azure.com"),
    "ollama": Preset("Ollama", "ollama", "http://127.0.0.1:11434", False),
    "compatible": Preset("OpenAI-compatible", "openai", "", False,
                         "the server's key, if it asks for one"),
    "local": Preset("The local model", "openai", "local", False),
}  # fmt: skip


@dataclass(frozen=True)
class Connection:
    """One connected endpoint: its name, wire format, URL and the models it last listed.

    ``kind`` is the preset it was made from (``gemini`` speaks ``openai``);
    ``provided`` marks one the administrator provides, whose key the person
    can use but never read.
    """

    name: str
    provider: str
    base_url: str
    kind: str = ""
    models: tuple[str, ...] = ()
    api_version: str | None = None
    provided: bool = False

    @property
    def family(self) -> str:
        """What serves the models: the preset's kind, else the wire format."""
        return self.kind if self.kind in PRESETS and self.kind != "compatible" else self.provider

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"provider": self.provider, "base_url": self.base_url}
        if self.kind:
            found["kind"] = self.kind
        if self.models:
            found["models"] = list(self.models)
        if self.api_version:
            found["api_version"] = self.api_version
        return found


@dataclass(frozen=True)
class Choice:
    """A model picked on a named endpoint."""

    endpoint: str
    model: str

    def to_dict(self) -> dict[str, str]:
        return {"endpoint": self.endpoint, "model": self.model}


@dataclass(frozen=True)
class Connections:
    """Every connected endpoint, and the models chosen for the chat and for suggestions."""

    endpoints: Mapping[str, Connection] = field(default_factory=dict)
    chat: Choice | None = None
    suggestions: Choice | None = None

    def get(self, name: str) -> Connection | None:
        return self.endpoints.get(name)

    def with_endpoint(self, connection: Connection) -> Connections:
        """A copy with ``connection`` added, or replacing the one of its name."""
        return replace(self, endpoints={**self.endpoints, connection.name: connection})

    def without(self, name: str) -> Connections:
        """A copy without endpoint ``name``, nor the choices that named it."""
        endpoints = {key: value for key, value in self.endpoints.items() if key != name}
        chat = None if self.chat and self.chat.endpoint == name else self.chat
        suggestions = (None if self.suggestions and self.suggestions.endpoint == name
                       else self.suggestions)  # fmt: skip
        return Connections(endpoints, chat, suggestions)

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "endpoints": {name: c.to_dict() for name, c in self.endpoints.items() if not c.provided}
        }
        if self.chat is not None:
            found["chat"] = self.chat.to_dict()
        if self.suggestions is not None:
            found["suggestions"] = self.suggestions.to_dict()
        return found


def check_name(name: object) -> str:
    """``name`` if it can name an endpoint (letters, digits, ``_ . -``; up to 64), else raise."""
    if not isinstance(name, str) or not NAME.match(name):
        raise ConfigError(
            f"endpoint name {name!r} is not usable; use letters, digits, '_', '.' or '-' "
            f"(up to 64, starting with a letter or digit), e.g. openai or work-ollama"
        )
    return name


def preset(kind: str) -> Preset:
    """The preset named ``kind``, or a ConfigError listing them."""
    try:
        return PRESETS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown kind of endpoint {kind!r}; use one of: {', '.join(PRESETS)}"
        ) from None


def config_path() -> Path:
    """``NBCHAT_CONFIG``, else ``<jupyter config dir>/nbchat/connections.json``."""
    configured = os.environ.get(ENV_CONFIG, "").strip()
    if configured:
        return Path(configured).expanduser()
    from jupyter_core.paths import jupyter_config_dir

    return Path(jupyter_config_dir()) / "nbchat" / CONFIG_NAME


def load(path: Path | None = None) -> Connections:
    """The connections in the file (none when it does not exist); a damaged file raises."""
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Connections()
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}; fix its permissions") from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{path} is not valid JSON (line {err.lineno}: {err.msg}); fix or remove the "
            f"file, then connect again"
        ) from None
    return parse(data, str(path))


def parse(data: object, source: str) -> Connections:
    """Connections from a file's JSON, every field checked; errors name ``source``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a JSON object with \"endpoints\"; fix or remove it")
    raw = data.get("endpoints", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"\"endpoints\" in {source} must be an object of endpoints by name")
    endpoints = {name: _connection(name, value, source) for name, value in raw.items()}
    return Connections(endpoints, _choice(data, "chat", source, endpoints),
                       _choice(data, "suggestions", source, endpoints))  # fmt: skip


def _connection(name: str, value: object, source: str) -> Connection:
    where = f"endpoint {name!r} in {source}"
    check_name(name)
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object with provider and base_url")
    provider = value.get("provider", "openai")
    if provider not in WIRE_PROVIDERS:
        raise ConfigError(f"{where} has provider {provider!r}; use one of: "
                          f"{', '.join(WIRE_PROVIDERS)}")  # fmt: skip
    url = value.get("base_url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{where} needs a base_url, e.g. https://api.openai.com/v1")
    models = value.get("models", [])
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise ConfigError(f"{where} has models that are not a list of names; remove them")
    kind, version = value.get("kind", ""), value.get("api_version")
    if not isinstance(kind, str) or (version is not None and not isinstance(version, str)):
        raise ConfigError(f"{where} has a kind or api_version that is not text")
    return Connection(name, provider, url.strip(), kind, tuple(models), version)


def _choice(data: dict[str, Any], key: str, source: str,
            endpoints: Mapping[str, Connection]) -> Choice | None:  # fmt: skip
    value = data.get(key)
    if value is None:
        return None
    if not (isinstance(value, dict) and isinstance(value.get("endpoint"), str)
            and isinstance(value.get("model"), str)):  # fmt: skip
        raise ConfigError(f"\"{key}\" in {source} must be {{\"endpoint\": NAME, \"model\": "
                          f"MODEL}}; fix or remove it")  # fmt: skip
    if value["endpoint"] not in endpoints:
        return None  # the endpoint was removed by hand: nothing chosen, nothing broken
    return Choice(value["endpoint"], value["model"])


@contextlib.contextmanager
def update(path: Path | None = None) -> Iterator[list[Connections]]:
    """Read, change and write the file under a lock: ``with update() as box: box[0] = …``.

    The new file replaces the old in one step (a crash leaves either); other
    writers wait for the lock, so no change is lost.
    """
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_name(path.name + ".lock")):
        box = [load(path)]
        before = box[0]
        yield box
        if box[0] != before:
            _write(path, json.dumps(box[0].to_dict(), indent=2) + "\n")


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    handle = open(lock, "a+b")  # noqa: SIM115 (held for the block)
    try:
        try:
            import fcntl
        except ImportError:  # Windows: one writer at a time is the person's own
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    finally:
        handle.close()


def endpoint_for_model(connections: Connections, model: str) -> Connection | None:
    """The connected endpoint that serves ``model``: one that listed it, else its family's."""
    endpoints = list(connections.endpoints.values())
    for connection in endpoints:
        if model in connection.models:
            return connection
    for prefix, families in FAMILIES.items():
        if model.startswith(prefix):
            return next((c for c in endpoints if c.family in families), None)
    return None


def load_all(path: Path | None = None) -> Connections:
    """The person's connections with those the administrator provides through this kernel's
    Jupyter server; provided ones win by name, and are the only ones where the
    administrator forbids people's own."""
    own = load(path)
    given = provided()
    if given is None:
        return own
    endpoints = dict(own.endpoints) if given.own_allowed else {}
    endpoints.update(given.endpoints)
    chat, suggestions = own.chat or given.chat, own.suggestions or given.suggestions
    chat = chat if chat is not None and chat.endpoint in endpoints else given.chat
    suggestions = (suggestions if suggestions is not None and suggestions.endpoint in endpoints
                   else given.suggestions)  # fmt: skip
    return Connections(endpoints, chat, suggestions)


def name_for(url: str) -> str:
    """The name an endpoint at ``url`` has, or would get: its connection's, its preset's, its
    host's."""
    wanted = url.rstrip("/")
    for connection in load().endpoints.values():
        if connection.base_url.rstrip("/") == wanted:
            return connection.name
    for kind, known in PRESETS.items():
        if known.base_url and known.base_url.rstrip("/") == wanted:
            return kind
    host = wanted.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1].replace(":", "-")
    return host if NAME.match(host) else "endpoint"


def connect_url(name: str, url: str, provider: str) -> None:
    """Connect the endpoint at ``url`` (speaking ``provider``) as ``name`` unless it is."""
    kind = name if name in PRESETS else "compatible"
    with update() as box:
        if name not in box[0].endpoints:
            box[0] = box[0].with_endpoint(Connection(name, provider, url, kind))


def stamp() -> str:
    """A value that changes when the connections file or the kept-keys file does."""
    from .keys import keys_file

    found = []
    for path in (config_path(), keys_file()):
        try:
            info = path.stat()
        except OSError:
            found.append("-")
        else:
            found.append(f"{info.st_mtime_ns}:{info.st_size}")
    return " ".join(found)


@dataclass(frozen=True)
class Provided:
    """What this kernel's Jupyter server provides: endpoints reached through its proxy,
    choices, whether people may add their own, and the token the proxy takes."""

    endpoints: dict[str, Connection] = field(default_factory=dict)
    chat: Choice | None = None
    suggestions: Choice | None = None
    own_allowed: bool = True
    token: str = field(default="", repr=False)


def provided() -> Provided | None:
    """The endpoints the administrator provides through this kernel's server, or None."""
    from ._provided import announcement

    data = announcement()
    if data is None:
        return None
    found = parse({k: data.get(k) for k in ("endpoints", "chat", "suggestions")
                   if data.get(k) is not None},
                  "the Jupyter server's provided endpoints")  # fmt: skip
    proxy = str(data["proxy"]).rstrip("/")
    endpoints = {
        name: Connection(name, c.provider, f"{proxy}/{name}" + ("/v1" if c.provider ==
                         "anthropic" else ""), c.kind, c.models, c.api_version, provided=True)
        for name, c in found.endpoints.items()
    }  # fmt: skip
    return Provided(endpoints, found.chat, found.suggestions,
                    bool(data.get("own_allowed", True)), str(data.get("token", "")))
