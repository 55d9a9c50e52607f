"""Pure byte-stream decoding: Server-Sent Events and newline-delimited JSON.

Both decoders take the body in arbitrary byte chunks (a chunk may end inside a
line or inside a multibyte character) and return complete payloads. Lines are
split on bytes before decoding, which is safe because a newline byte never
occurs inside a UTF-8 multibyte sequence.
"""

from __future__ import annotations


class SSEDecoder:
    """Turn SSE bytes into the ``data`` payload of each event, as text.

    Follows the WHATWG event-stream rules that matter for LLM endpoints:
    ``\\n``, ``\\r\\n`` and ``\\r`` line ends, multi-line ``data`` joined with
    ``\\n``, comment lines (``:``) and other fields ignored, an event dispatched
    at a blank line.
    """

    __slots__ = ("_buffer", "_data", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[str]:
        """The payloads of the events completed by ``chunk``."""
        if not chunk:
            return []
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith(b"\r")
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()
        events: list[str] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append("\n".join(data))
                    data.clear()
            elif line.startswith(b"data:"):
                value = line[5:]
                if value.startswith(b" "):
                    value = value[1:]
                data.append(value.decode("utf-8"))
        return events

    def close(self) -> list[str]:
        """Payloads still held when the stream ends without a final blank line."""
        events = self.feed(b"\n\n") if self._buffer or self._data else []
        return events


class LineDecoder:
    """Turn newline-delimited bytes into complete, non-empty lines of text."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[str]:
        """The lines completed by ``chunk``."""
        lines = (self._buffer + chunk).split(b"\n")
        self._buffer = lines.pop()
        return [line.decode("utf-8") for line in lines if line.strip()]

    def close(self) -> list[str]:
        """The last line, when the stream does not end with a newline."""
        rest, self._buffer = self._buffer, b""
        return [rest.decode("utf-8")] if rest.strip() else []
