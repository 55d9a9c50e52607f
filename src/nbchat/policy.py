"""Administrator policy: what the hub decides for every user, above every other setting.

A JupyterHub sets these variables in each user's server environment
(``c.Spawner.environment``); arguments, magic options and ``%config`` cannot
override them:

``NBCHAT_ALLOWED_MODELS``
    Comma-separated model names: listings show only these, and asking for any
    other raises :class:`~nbchat.errors.ModelNotAllowed`.
``NBCHAT_FORCE_BASE_URL``
    Every request goes to this endpoint, whatever ``base_url`` says.
``NBCHAT_FORCE_MODEL``
    Every request uses this model, whatever the thread or the call asks for.
``NBCHAT_DISABLE_LOCAL_MODEL``
    ``1``/``true``/``yes``: never start the bundled local model as a fallback.

Read at each use, so a server started with them keeps them. They bind
nbchat's own code paths; code a user runs in the kernel can still change its
own process's environment, so an endpoint that must not be used should also be
unreachable (or its key withheld) for the users' servers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from .config import (
    ENV_ALLOWED_MODELS,
    ENV_DISABLE_LOCAL_MODEL,
    ENV_FORCE_BASE_URL,
    ENV_FORCE_MODEL,
    redacted_repr,
)
from .errors import ModelNotAllowed

__all__ = ["Policy"]

_TRUE = ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Policy:
    """The administrator's settings, as the environment gives them now."""

    allowed_models: tuple[str, ...] = ()
    force_base_url: str | None = None
    force_model: str | None = None
    disable_local_model: bool = False

    def __repr__(self) -> str:
        return redacted_repr(self)

    @classmethod
    def from_env(cls) -> Policy:
        """The policy the environment sets (empty when none of its variables is set)."""
        env = os.environ
        allowed = tuple(
            name.strip() for name in env.get(ENV_ALLOWED_MODELS, "").split(",") if name.strip()
        )
        return cls(
            allowed_models=allowed,
            force_base_url=env.get(ENV_FORCE_BASE_URL, "").strip() or None,
            force_model=env.get(ENV_FORCE_MODEL, "").strip() or None,
            disable_local_model=env.get(ENV_DISABLE_LOCAL_MODEL, "").strip().lower() in _TRUE,
        )

    def model(self, asked: str | None) -> str | None:
        """The model to use when *asked* is asked for: the forced one, or *asked* if allowed."""
        if self.force_model:
            return self.force_model
        if asked is None or not self.allowed_models or asked in self.allowed_models:
            return asked
        raise ModelNotAllowed(
            f"model {asked!r} is not allowed here; the administrator allows "
            f"{', '.join(self.allowed_models)} ({ENV_ALLOWED_MODELS}); pick one with -m MODEL",
            model=asked,
        )

    def models(self, offered: Iterable[str]) -> list[str]:
        """The models of *offered* that may be used, in their order."""
        if self.force_model:
            return [self.force_model]
        offered = list(offered)
        if not self.allowed_models:
            return offered
        return [name for name in offered if name in self.allowed_models]
