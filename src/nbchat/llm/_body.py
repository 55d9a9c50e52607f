"""Reading a response body: its bytes as nbchat errors when the transport fails mid-way,
counted, drained so the connection is reused, or parsed as JSON with an error naming the URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from ..base._secrets import excerpt
from ..base.errors import (
    LLMError,
    LLMTimeout,
    MalformedStream,
    StreamCutOff,
)


class Counted:
    """Body chunks passed through, counting the bytes (an empty body is its own failure)."""

    __slots__ = ("_chunks", "size")

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.size = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.size += len(chunk)
            yield chunk


def body_bytes(response: httpx.Response, url: str) -> Iterator[bytes]:
    """The body's bytes, with transport failures mid-stream as nbchat errors."""
    try:
        yield from response.iter_bytes()
    except httpx.ReadTimeout as exc:
        raise LLMTimeout(
            f"the model endpoint at {url} stopped sending in the middle of the answer; "
            f"the answer is incomplete — ask again",
            url=url,
        ) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise StreamCutOff(
            f"the connection to {url} broke in the middle of the answer; "
            f"the answer is incomplete — ask again",
            url=url,
        ) from exc


def drain(chunks: Iterable[bytes], limit: int = 65536) -> None:
    """Read what follows the end marker (the body's last chunk) so the connection is reused."""
    seen = 0
    try:
        for chunk in chunks:
            seen += len(chunk)
            if seen > limit:
                return
    except LLMError:
        return


def parse_json(body: bytes, url: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        start = excerpt(body.decode("utf-8", "replace"), 80)
        raise MalformedStream(
            f"the endpoint at {url} answered something that is not JSON: {start!r}; "
            f"check that NBCHAT_BASE_URL points at the API (e.g. ends in /v1)",
            url=url,
        ) from None
