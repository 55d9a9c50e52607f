"""What this server provides, checked: the records the proxy and the other routes share."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from ...base._secrets import redact_url
from ...base.connections import Choice, Connection

__all__ = ["Endpoint", "Offered"]


@dataclass(frozen=True)
class Endpoint:
    """One provided endpoint: what a kernel may know of it, and the key only this server uses."""

    connection: Connection
    key: str | None = field(default=None, repr=False)

    def public(self) -> dict[str, Any]:
        found = self.connection.to_dict()
        found["base_url"] = redact_url(found["base_url"])
        return found


@dataclass(frozen=True)
class Offered:
    """What this server provides, checked; ``token`` is what kernels send instead of a key."""

    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    chat: Choice | None = None
    suggestions: Choice | None = None
    own_allowed: bool = True
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @property
    def is_empty(self) -> bool:
        """Nothing provided and nothing forbidden: no announcement, no route."""
        return not self.endpoints and self.own_allowed

    def public(self) -> dict[str, Any]:
        """The endpoints (no key), the choices and whether people's own are allowed."""
        found: dict[str, Any] = {
            "endpoints": {name: e.public() for name, e in self.endpoints.items()},
            "own_allowed": self.own_allowed,
        }
        for label, choice in (("chat", self.chat), ("suggestions", self.suggestions)):
            if choice is not None:
                found[label] = choice.to_dict()
        return found

    def announcement(self, proxy: str) -> dict[str, Any]:
        """What kernels read (:func:`nbchat.base.connections.provided`): no key."""
        return {"proxy": proxy, "token": self.token, **self.public()}
