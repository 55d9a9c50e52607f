"""Settings, and where each one comes from.

Precedence, highest first: explicit arguments (``Chat(model=...)``, magic
options, ``%config ChatMagics.*``, which the magics pass as explicit) >
``NBCHAT_*`` environment variables > defaults. Resolving settings never
touches the network: with no endpoint configured, ``base_url`` stays empty
and the LLM client finds one (:mod:`nbchat.llm.discovery`);
``NBCHAT_BASE_URL=demo`` asks for the offline demo model on purpose.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from jupyter_core import paths as jupyter_paths

from ._secrets import redact_url as redact_url
from ._secrets import redacted_repr
from .errors import ConfigError
from .policy import ENV_ALLOWED_MODELS as ENV_ALLOWED_MODELS
from .policy import ENV_DISABLE_LOCAL_MODEL as ENV_DISABLE_LOCAL_MODEL
from .policy import ENV_FORCE_BASE_URL as ENV_FORCE_BASE_URL
from .policy import ENV_FORCE_MODEL as ENV_FORCE_MODEL
from .policy import ENV_HARD_BUDGET as ENV_HARD_BUDGET
from .policy import ENV_MAX_APPROVAL as ENV_MAX_APPROVAL
from .policy import ENV_MAX_BUDGET as ENV_MAX_BUDGET
from .policy import ENV_MAX_KERNEL_BUDGET as ENV_MAX_KERNEL_BUDGET
from .policy import Policy

if TYPE_CHECKING:
    from .connections import Connection, Connections

ENV_BASE_URL = "NBCHAT_BASE_URL"
ENV_API_KEY = "NBCHAT_API_KEY"
ENV_OPENAI_API_KEY = "OPENAI_API_KEY"
ENV_ANTHROPIC_API_KEY = "ANTHROPIC_API_KEY"
ENV_AZURE_API_KEY = "AZURE_OPENAI_API_KEY"
ENV_AZURE_AD_TOKEN = "AZURE_OPENAI_AD_TOKEN"  # a Microsoft Entra ID token, sent as a bearer
ENV_GEMINI_API_KEY = "GEMINI_API_KEY"
ENV_API_VERSION = "NBCHAT_API_VERSION"
ENV_AZURE_API_VERSION = "OPENAI_API_VERSION"  # what the openai SDK's Azure client reads
ENV_PROVIDER = "NBCHAT_PROVIDER"
ENV_MODEL = "NBCHAT_MODEL"
ENV_STORE = "NBCHAT_STORE"
ENV_STORE_URL = "NBCHAT_STORE_URL"
ENV_USER = "NBCHAT_USER"
ENV_JUPYTERHUB_USER = "JUPYTERHUB_USER"
ENV_HISTORY_LIMIT = "NBCHAT_HISTORY_LIMIT"
ENV_OPTIONS = "NBCHAT_OPTIONS"
ENV_CONTEXT_SIZE = "NBCHAT_CONTEXT_SIZE"
ENV_TOOLLESS_MODELS = "NBCHAT_TOOLLESS_MODELS"
ENV_LOCAL_MODEL = "NBCHAT_LOCAL_MODEL"
ENV_NO_AUTOLOAD = "NBCHAT_NO_AUTOLOAD"
ENV_LIVE = "NBCHAT_LIVE"
ENV_PRICES = "NBCHAT_PRICES"
ENV_BUDGET = "NBCHAT_BUDGET"  # dollars a thread may cost before a question asks first
ENV_KERNEL_BUDGET = "NBCHAT_KERNEL_BUDGET"  # dollars this kernel may spend before that
ENV_WINDOW = "NBCHAT_WINDOW"  # "summarize": long threads send a summary of their oldest turns
ENV_MCP = "NBCHAT_MCP"  # "off": no MCP server starts
ENV_MCP_ALLOW = "NBCHAT_MCP_ALLOW"  # patterns a server's command line or URL must match
ENV_MCP_ADMIN_CONFIG = "NBCHAT_MCP_ADMIN_CONFIG"  # the administrator's mcp.json, if not the default
ENV_ACP = "NBCHAT_ACP"  # "off": no coding agent is hosted in the chat
ENV_ACP_ALLOW = "NBCHAT_ACP_ALLOW"  # patterns a hosted agent's command line must match
ENV_ACP_ADMIN_CONFIG = "NBCHAT_ACP_ADMIN_CONFIG"  # the administrator's agents.json, if elsewhere
ENV_INSTRUCTIONS = "NBCHAT_INSTRUCTIONS"  # "auto": AGENTS.md / .nbchat.md join the system prompt
ENV_AGENT_TOKENS = "NBCHAT_AGENT_TOKENS"  # the folder of outside agents' token files
ENV_AGENT_TOKEN = "NBCHAT_AGENT_TOKEN"  # the token `python -m nbchat mcp` sends for its agent
ENV_JUPYTER_RUNTIME_DIR = "JUPYTER_RUNTIME_DIR"  # Jupyter's own; nbchat only names it
ENV_KERNEL_PARENT = "JPY_PARENT_PID"  # set by jupyter_client in every kernel it starts
LOCAL_MODEL_OFF = ("off", "0", "no", "false")
STORE_URL_SCHEMES = ("postgresql://", "postgres://")
DEMO_URL = "demo"  # NBCHAT_BASE_URL=demo: the offline demo model, on purpose
LOCAL_URL = "local"  # NBCHAT_BASE_URL=local: the bundled local model, on purpose

Provider = Literal["openai", "ollama", "anthropic", "azure"]
PROVIDERS: tuple[str, ...] = ("openai", "ollama", "anthropic", "azure")
OLLAMA_DEFAULT_URL = "http://127.0.0.1:11434"
ANTHROPIC_URL = "https://api.anthropic.com/v1"
AZURE_API_VERSION = "2024-10-21"  # the newest generally available data-plane version
GEMINI_HOST = "generativelanguage.googleapis.com"
# The key each provider's own SDK reads, tried after NBCHAT_API_KEY.
PROVIDER_KEYS = {
    "openai": (ENV_OPENAI_API_KEY,),
    "anthropic": (ENV_ANTHROPIC_API_KEY,),
    "azure": (ENV_AZURE_API_KEY, ENV_AZURE_AD_TOKEN),
    "ollama": (ENV_OPENAI_API_KEY,),
}
DEMO_MODEL = "nbchat-demo"
CONNECT_HINT = (
    "connect a real model with %env NBCHAT_BASE_URL=https://api.openai.com/v1 "
    "then %chat --key"
)


@dataclass(frozen=True)
class Settings:
    """Resolved settings for one endpoint and one user's store.

    Neither ``api_key`` nor a user or password in ``base_url`` appears in the
    repr; ``key_source`` names the variable the key came from, so error
    messages can say which one to fix.
    """

    base_url: str
    provider: Provider = "openai"
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    key_source: str = ENV_API_KEY
    store: Path | str = field(default_factory=lambda: store_location())
    user: str = field(default_factory=lambda: default_user())
    history_limit: int | None = None
    context_size: int | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 120.0
    max_retries: int = 3
    retry_budget: float = 30.0
    origin: str = "configured"
    api_version: str | None = None  # Azure OpenAI's api-version query parameter
    connection: str | None = None  # the connected endpoint's name (nbchat.base.connections)

    def __repr__(self) -> str:
        return redacted_repr(self)

    def with_(self, **changes: object) -> Settings:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]


def default_user() -> str:
    """``NBCHAT_USER``, else ``JUPYTERHUB_USER``, else the OS login."""
    for var in (ENV_USER, ENV_JUPYTERHUB_USER):
        value = os.environ.get(var, "").strip()
        if value:
            return value
    try:
        return getpass.getuser()
    except Exception:  # no login name (containers without passwd entries)
        return "default"


def jupyter_data_dir() -> Path:
    """Jupyter's per-user data directory (``JUPYTER_DATA_DIR``, else the platform's)."""
    return Path(jupyter_paths.jupyter_data_dir())


def jupyter_runtime_dir() -> Path:
    """Jupyter's runtime directory (``JUPYTER_RUNTIME_DIR``, else the platform's)."""
    return Path(jupyter_paths.jupyter_runtime_dir())


def default_store_path() -> Path:
    """``NBCHAT_STORE``, else ``<jupyter data dir>/nbchat``."""
    configured = os.environ.get(ENV_STORE, "").strip()
    if is_store_url(configured):
        raise ConfigError(
            f"{ENV_STORE} is a database URL, not a folder; open it with nbchat.open_store()"
        )
    return Path(configured).expanduser() if configured else jupyter_data_dir() / "nbchat"


def is_store_url(location: object) -> bool:
    """Whether *location* names a PostgreSQL store (``postgresql://…``) rather than a folder."""
    return isinstance(location, str) and location.strip().startswith(STORE_URL_SCHEMES)


def store_location(explicit: str | os.PathLike[str] | None = None) -> Path | str:
    """Where threads are kept: a ``postgresql://`` URL or a folder.

    *explicit* wins, then ``NBCHAT_STORE_URL``, then ``NBCHAT_STORE`` (a folder
    or a URL), then ``<jupyter data dir>/nbchat``.
    """
    if explicit is None:
        explicit = os.environ.get(ENV_STORE_URL, "").strip() or None
    if explicit is None:
        configured = os.environ.get(ENV_STORE, "").strip()
        explicit = configured if is_store_url(configured) else None
    if explicit is None:
        return default_store_path()
    if is_store_url(explicit):
        return str(explicit).strip()
    return Path(explicit).expanduser()


def guess_provider(url: str) -> Provider:
    """The provider an URL names: Anthropic's and Azure's hosts, Ollama's port, else ``openai``."""
    lowered = url.lower().rstrip("/")
    host = lowered.split("://", 1)[-1].split("/", 1)[0]
    if host.endswith("anthropic.com"):
        return "anthropic"
    if host.endswith((".openai.azure.com", ".cognitiveservices.azure.com")):
        return "azure"
    if ":11434" in lowered or lowered.endswith("/api") or "ollama" in lowered:
        return "ollama"
    return "openai"


def api_url(url: str, provider: str) -> str:
    """The base URL requests go under: Anthropic's takes ``…/v1``, given or not.

    >>> api_url("https://api.anthropic.com", "anthropic")
    'https://api.anthropic.com/v1'
    """
    if provider == "anthropic" and url and not url.rstrip("/").endswith("/v1"):
        return url.rstrip("/") + "/v1"
    return url


def parse_history_limit(value: object, *, source: str = ENV_HISTORY_LIMIT) -> int | None:
    """A non-negative message count, or None for no limit."""
    if value is None or value == "":
        return None
    try:
        limit = int(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"{source} must be a whole number of messages, got {value!r}; "
            f"unset it for no limit"
        ) from None
    if limit < 0:
        raise ConfigError(f"{source} must be 0 or more (0 means no limit), got {limit}")
    return limit


def parse_context_size(value: object, *, source: str = ENV_CONTEXT_SIZE) -> int | None:
    """The model's context window in tokens (a whole number above 0), or None: discover it."""
    if value is None or str(value).strip() == "":
        return None
    try:
        size = int(str(value).strip().replace("_", "").replace(",", ""))
    except ValueError:
        size = 0
    if size < 1:
        raise ConfigError(
            f"{source} must be the model's context size in tokens (e.g. 4096), got {value!r}; "
            f"unset it to let nbchat ask the endpoint"
        )
    return size


def resolve(
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    store: str | os.PathLike[str] | None = None,
    user: str | None = None,
    history_limit: int | None = None,
) -> Settings:
    """Settings from explicit arguments, then ``NBCHAT_*`` variables, then defaults.

    With no endpoint anywhere, ``base_url`` is empty: the LLM client then
    finds one (a local Ollama, the local model, the offline demo model). The
    administrator's policy (:mod:`nbchat.base.policy`) overrides all.
    """
    env = os.environ
    policy = Policy.from_env()
    url = policy.force_base_url or base_url or env.get(ENV_BASE_URL, "").strip() or None
    chosen_provider = provider or env.get(ENV_PROVIDER, "").strip() or None
    if chosen_provider is not None and chosen_provider not in PROVIDERS:
        raise ConfigError(
            f"unknown provider {chosen_provider!r} (from {ENV_PROVIDER} or the provider "
            f"argument); use one of: {', '.join(PROVIDERS)}"
        )
    model = model or env.get(ENV_MODEL, "").strip() or None
    from .connections import load_all

    found = load_all()
    connected = _connected(found, url, model, chosen_provider)
    if connected is not None and url is None:
        url, chosen_provider = connected.base_url, connected.provider
        model = model or _chosen_model(found, connected.name)
    chosen = chosen_provider or (guess_provider(url) if url and url not in (DEMO_URL, LOCAL_URL)
                                 else "openai")  # fmt: skip
    if chosen == "anthropic" and not url:
        url = ANTHROPIC_URL
    if chosen == "azure" and not url:
        raise ConfigError(
            f"{ENV_PROVIDER}=azure needs the resource's URL: set {ENV_BASE_URL}="
            "https://RESOURCE.openai.azure.com and NBCHAT_MODEL to the deployment's name"
        )
    key, key_source = _resolve_key(api_key, chosen, url or "", connected)
    version = env.get(ENV_API_VERSION, "").strip() or env.get(ENV_AZURE_API_VERSION, "").strip()
    return Settings(
        base_url=api_url(url or "", chosen),
        provider=chosen,  # type: ignore[arg-type]
        api_version=(version or (connected.api_version if connected else None)
                     or AZURE_API_VERSION) if chosen == "azure" else None,  # fmt: skip
        model=policy.model(model),
        api_key=key,
        key_source=key_source,
        store=store_location(store),
        user=user or default_user(),
        history_limit=history_limit
        if history_limit is not None
        else parse_history_limit(env.get(ENV_HISTORY_LIMIT)),
        context_size=parse_context_size(env.get(ENV_CONTEXT_SIZE)),
        connection=connected.name if connected is not None else None,
    )


def _connected(found: Connections, url: str | None, model: str | None,
               provider: str | None) -> Connection | None:  # fmt: skip
    """The connected endpoint these settings use: the one at ``url``, else the one serving
    ``model``, else the one chosen for the chat, else the first; None with none connected."""
    from . import connections

    if not found.endpoints:
        return None
    if url is not None:
        wanted = url.rstrip("/")
        return next((c for c in found.endpoints.values() if c.base_url.rstrip("/") == wanted
                     or api_url(c.base_url, c.provider).rstrip("/") == wanted), None)  # fmt: skip
    if provider is not None:  # NBCHAT_PROVIDER alone: its endpoint, as before
        return next((c for c in found.endpoints.values() if c.provider == provider), None)
    if model is not None:
        serving = connections.endpoint_for_model(found, model)
        if serving is not None:
            return serving
    if found.chat is not None and found.chat.endpoint in found.endpoints:
        return found.endpoints[found.chat.endpoint]
    return next(iter(found.endpoints.values()))


def _chosen_model(found: Connections, name: str) -> str | None:
    return found.chat.model if found.chat is not None and found.chat.endpoint == name else None


def _resolve_key(explicit: str | None, provider: str, url: str,
                 connected: Connection | None = None) -> tuple[str | None, str]:  # fmt: skip
    """The key: given, else from the environment, else the one kept for the connected endpoint."""
    if explicit:
        return explicit, "the api_key argument"
    if connected is not None and connected.provided:  # the server's proxy takes its token only
        from .connections import provided

        given = provided()
        return (given.token if given else None), "the Jupyter server's provided endpoint"
    own = PROVIDER_KEYS.get(provider, ())
    if GEMINI_HOST in url:
        own = (ENV_GEMINI_API_KEY,)
    for var in (ENV_API_KEY, *own):
        value = os.environ.get(var, "").strip()
        if value:
            return value, var
    if connected is not None:
        from .keys import key_store, stored_key

        key = stored_key(connected.name)
        if key:
            return key, f"the key kept for {connected.name!r} in {key_store().where()}"
    return None, ENV_API_KEY
