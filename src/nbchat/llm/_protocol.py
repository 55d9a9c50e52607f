"""What a provider is: the wire format of one family of endpoints, nothing else.

A provider builds request bodies and decodes responses. It never touches the
network: the client in :mod:`nbchat.llm.client` owns the connection, retries
and timeouts, so adding a provider is a small module, not a fork of the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..base.events import ReplyEvent, ToolCall, Usage
from ..base.records import token_count


@dataclass(frozen=True)
class Reply:
    """A whole, non-streamed model reply."""

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


class Provider(Protocol):
    """The wire format of one family of endpoints."""

    name: str
    models_path: str
    chat_path: str

    def parse_models(self, data: Any) -> list[str]:
        """Model names from the model-list response."""

    def chat_body(
        self,
        messages: Sequence[dict[str, Any]],
        model: str,
        tools: Sequence[dict[str, Any]] | None,
        stream: bool,
        options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON body of a chat request (messages in OpenAI format, options mapped)."""

    def decode_stream(self, chunks: Iterable[bytes]) -> Iterator[ReplyEvent]:
        """Reply events from the raw body, raising on a malformed or cut-off stream."""

    def parse_reply(self, data: Any) -> Reply:
        """A whole reply from a non-streamed response body."""

    def error_detail(self, body: bytes) -> str:
        """The endpoint's own error message from an error response body."""


def usage_from(
    prompt: object, completion: object, cache_read: object = None, cache_write: object = None
) -> Usage:
    """Usage from counts that may be missing or malformed (:class:`Usage` checks them)."""
    return Usage(*map(token_count, (prompt, completion, cache_read, cache_write)))


def listed_ids(data: Any) -> list[str]:
    """The sorted ``id`` of each entry of a ``{"data": [...]}`` models list (OpenAI's shape)."""
    items = data.get("data", []) if isinstance(data, dict) else []
    return sorted(str(item["id"]) for item in items if isinstance(item, dict) and "id" in item)
