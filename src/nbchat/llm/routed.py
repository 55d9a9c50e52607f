"""One client in front of every connected endpoint: each model goes to the endpoint serving it.

With several endpoints connected (:mod:`nbchat.base.connections`) and none
set by ``NBCHAT_BASE_URL`` or an argument, a Chat talks to all of them: the
panel's picker lists each one's models, and a question asked with a model goes
to the endpoint that listed it (or, for ``claude-…`` and ``gemini-…``, the one
of that family). The default endpoint (the one chosen for the chat) answers
everything else, so the client is an :class:`~.client.LLMClient` of that
endpoint whose model-taking methods first look for the model's own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..base import connections
from ..base.config import ENV_BASE_URL, Settings, resolve
from ..base.errors import LLMError
from ..base.events import ReplyEvent
from ..base.policy import Policy
from ._stop import StopSignal
from .client import ChatRequest, LLMClient

__all__ = ["EndpointModels", "RoutedClient", "client_for"]


@dataclass(frozen=True)
class EndpointModels:
    """The models one connected endpoint offers, for a picker grouped by endpoint."""

    endpoint: str
    label: str
    models: tuple[str, ...]
    error: str = ""  # why it could not list them, in one line


class RoutedClient(LLMClient):
    """The default endpoint's client, sending a model another endpoint serves to that one.

    ``settings_for(model)`` gives the settings of the endpoint serving
    ``model`` (None: the default's); their clients are made once each.
    """

    def __init__(self, settings: Settings,
                 settings_for: Callable[[str], Settings | None],
                 endpoints: Callable[[], Sequence[tuple[str, str, Settings]]]) -> None:  # fmt: skip
        super().__init__(settings)
        self._settings_for = settings_for
        self._endpoints = endpoints
        self._others: dict[str | None, LLMClient] = {}
        self._by_model: dict[str, LLMClient] = {}

    def client_for(self, model: str) -> LLMClient:
        """The client of the endpoint serving ``model``: this one unless another lists it.

        Found once per model (a file and a key read): a turn asks it for every request.
        """
        found = self._by_model.get(model)
        if found is not None:
            return found
        wanted = self._settings_for(model)
        if wanted is None or wanted.connection in (None, self.wanted.connection):
            found = self
        else:
            found = self._others.get(wanted.connection)
            if found is None:
                found = self._others[wanted.connection] = LLMClient(wanted)
        self._by_model[model] = found
        return found

    def endpoint_models(self) -> list[EndpointModels]:
        """Each connected endpoint's models (those allowed), the default's first."""
        found = []
        for name, label, settings in self._endpoints():
            own = settings.connection == self.wanted.connection
            try:
                models = (self.list_one() if own else
                          self._client_named(name, settings).list_models())  # fmt: skip
                found.append(EndpointModels(name, label, tuple(models)))
            except LLMError as error:
                found.append(EndpointModels(name, label, (), str(error).splitlines()[0]))
        return found

    def _client_named(self, name: str, settings: Settings) -> LLMClient:
        client = self._others.get(name)
        if client is None:
            client = self._others[name] = LLMClient(settings)
        return client

    def list_models(self) -> list[str]:
        """Every connected endpoint's models, once each; one that cannot list is left out,
        unless it is the default one."""
        models: list[str] = []
        for group in self.endpoint_models():
            if group.error and group.endpoint == self.wanted.connection:
                return super().list_models()  # raises the default's error, as one endpoint does
            models.extend(m for m in group.models if m not in models)
        return Policy.from_env().models(models)

    def list_one(self) -> list[str]:
        """The default endpoint's own models."""
        return super().list_models()

    def _on(self, model: str, name: str) -> Any:
        """Method ``name`` of the client serving ``model`` (this one's own, not routed again)."""
        client = self.client_for(model)
        return getattr(super(), name) if client is self else getattr(client, name)

    def stream(self, messages: Sequence[dict[str, Any]], *, model: str,
               tools: Sequence[dict[str, Any]] | None = None,
               options: Mapping[str, Any] | None = None,
               stop: StopSignal | None = None) -> Generator[ReplyEvent, None, None]:  # fmt: skip
        return self._on(model, "stream")(messages, model=model, tools=tools, options=options,
                                         stop=stop)  # fmt: skip

    def request(self, messages: Sequence[dict[str, Any]], *, model: str,
                tools: Sequence[dict[str, Any]] | None = None,
                options: Mapping[str, Any] | None = None) -> ChatRequest:  # fmt: skip
        return self._on(model, "request")(messages, model=model, tools=tools, options=options)

    def complete(self, messages: Sequence[dict[str, Any]], *, model: str,
                 tools: Sequence[dict[str, Any]] | None = None,
                 options: Mapping[str, Any] | None = None) -> Any:  # fmt: skip
        return self._on(model, "complete")(messages, model=model, tools=tools, options=options)

    def context_size(self, model: str, options: Mapping[str, Any] | None = None) -> int | None:
        return self._on(model, "context_size")(model, options)

    def learn_context_size(self, model: str, size: int) -> None:
        self._on(model, "learn_context_size")(model, size)

    def token_scale(self, model: str) -> float:
        return float(self._on(model, "token_scale")(model))

    def learn_token_count(self, model: str, estimated: int, counted: int) -> None:
        self._on(model, "learn_token_count")(model, estimated, counted)


def client_for(explicit: Mapping[str, Any]) -> LLMClient:
    """The client for settings resolved from ``explicit`` (``resolve``'s arguments): a routed
    one when several endpoints are connected and none is set by URL, else a plain one."""
    settings = resolve(**explicit)
    if settings.connection is None or explicit.get("base_url") or _url_set():
        return LLMClient(settings)
    found = connections.load_all()
    if len(found.endpoints) < 2:
        return LLMClient(settings)

    def settings_for(model: str) -> Settings | None:
        if connections.endpoint_for_model(connections.load_all(), model) is None:
            return None
        return resolve(**{**explicit, "model": model})

    def endpoints() -> list[tuple[str, str, Settings]]:
        listed = connections.load_all().endpoints.values()
        return [(c.name, _label(c), resolve(**{**explicit, "base_url": c.base_url,
                                               "provider": c.provider, "model": None}))
                for c in listed]  # fmt: skip

    return RoutedClient(settings, settings_for, endpoints)


def _label(connection: connections.Connection) -> str:
    kind = connections.PRESETS.get(connection.kind)
    return f"{connection.name} ({kind.label})" if kind and kind.label != connection.name else (
        connection.name)


def _url_set() -> bool:
    return bool(os.environ.get(ENV_BASE_URL, "").strip() or Policy.from_env().force_base_url)
