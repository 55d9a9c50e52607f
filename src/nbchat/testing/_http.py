"""The HTTP side: a thread per connection, HTTP/1.1 keep-alive, chunked streams.

This module holds the transport the handler (:mod:`._handler`, which routes
each request to its protocol) stands on: the server that knows its open
connections, and the writing of whole and chunked responses with a reply's
faults (a stall, a cut, a malformed piece, an error mid-stream). Streams go
out pre-encoded: with no delay the pieces are written in 64 KiB batches (one
HTTP chunk each), so the server is never the bottleneck of a client
benchmark. With a delay, the pause between chunks watches the socket, so a
client that hangs up is noticed at once, and a stopping server ends it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import sys
import threading
import time
import typing
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._protocols import Answer, StreamPlan, dumps
from ._record import RecordedRequest
from ._script import Body, Reply

_BATCH_BYTES = 64 * 1024
_POLL_SECONDS = 0.05


class Owner(typing.Protocol):
    """What the handler threads use of the server that owns them (a ScriptedServer).

    Declared here, not imported, so that the server can import this module.
    """

    models: tuple[str, ...]
    api_key: str | None
    text_only_models: tuple[str, ...]
    context_size: int | None
    template_tools: bool | None
    _stopping: threading.Event

    def _record(self, **fields: Any) -> RecordedRequest: ...

    def _update(self, request: RecordedRequest, **changes: Any) -> None: ...

    def _progress(
        self, request: RecordedRequest, chunks: int, completed: bool | None = None
    ) -> None: ...

    def _pick(self, body: Body) -> Reply | None: ...

    def _answer(
        self, reply: Reply | None, body: Body, model: str, anthropic: Body | None = None
    ) -> Answer: ...


class ClientGone(Exception):
    """The client closed the connection before the response ended."""


class Stopped(Exception):
    """The server is stopping; the response is abandoned."""


class HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its open connections, to close them on stop."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type, *, owner: Owner):
        self.owner = owner
        self._live: set[socket.socket] = set()
        self._live_changed = threading.Condition()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn: a DNS lookup we don't need.
        socketserver.TCPServer.server_bind(self)
        host, port = self.socket.getsockname()[:2]
        self.server_name, self.server_port = host, port

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its pooled keep-alive connection is normal, not news.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._live_changed:
            self._live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        with self._live_changed:
            self._live.discard(request)
            self._live_changed.notify_all()

    def close_connections(self) -> None:
        """Shut every open connection down; their threads then end."""
        with self._live_changed:
            live = list(self._live)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def wait_closed(self, timeout: float) -> None:
        with self._live_changed:
            self._live_changed.wait_for(lambda: not self._live, timeout)


class Connection(BaseHTTPRequestHandler):
    """One client connection's HTTP: its request bodies, and responses written whole or in
    chunks, with the reply's faults; the handler routes each request (:mod:`._handler`)."""

    protocol_version = "HTTP/1.1"
    server_version = "nbchat-testing"
    sys_version = ""
    disable_nagle_algorithm = True
    server: HTTPServer
    record: RecordedRequest

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server's request log is the record."""

    # -- whole responses ----------------------------------------------------

    def _send_json(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_bytes(status, "application/json", dumps(obj).encode(), headers)

    def _send_bytes(
        self, status: int, content_type: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        self._start(status, content_type, {"Content-Length": str(len(data)), **(headers or {})})
        self._write(data, completes=True)

    def _whole(self, reply: Reply, data: bytes) -> None:
        if reply.stall_after is not None:
            self._pause(reply.stall)
        if reply.cut_after is not None:
            self._start(200, "application/json", {"Content-Length": str(len(data))})
            self.wfile.write(data[: len(data) // 2])
            return self._abort()
        if reply.malformed_after is not None:
            data = data[: len(data) // 2]
        self._send_bytes(200, "application/json", data)

    def _start(self, status: int, content_type: str, headers: Mapping[str, str]) -> None:
        self.server.owner._update(self.record, status=status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        self._headers_sent = True
        self.end_headers()

    # -- streams ------------------------------------------------------------

    def _stream(self, reply: Reply, plan: StreamPlan) -> None:
        chunked = {"Transfer-Encoding": "chunked", "Cache-Control": "no-cache"}
        self._start(200, plan.content_type, chunked)
        self._write_chunk(plan.preamble)
        count = len(plan.pieces)
        faults = (reply.cut_after, reply.malformed_after, reply.stall_after, reply.error_after)
        done = 0
        for edge in sorted({min(f, count) for f in faults if f is not None} | {count}):
            self._send_pieces(plan.pieces[done:edge], reply.delay, pause_first=done > 0)
            done = edge
            if edge == _clamp(reply.stall_after, count):
                self._pause(reply.stall)
            if edge == _clamp(reply.cut_after, count):
                return self._abort()
            if edge == _clamp(reply.malformed_after, count):
                self._write_chunk(plan.malformed)
                return self._end_chunks()
            if edge == _clamp(reply.error_after, count):
                self._write_chunk(plan.failure)
                return self._end_chunks()
        if reply.repeat_bytes:
            self._send_again(plan.pieces, reply)
        self._write_chunk(plan.closing)
        self._end_chunks()

    def _send_pieces(self, pieces: list[bytes], delay: float, pause_first: bool) -> None:
        if delay:
            for i, piece in enumerate(pieces):
                if i or pause_first:
                    self._pause(delay)
                self._write_chunk(piece, chunks=1)
            return
        batch: list[bytes] = []
        size = 0
        for piece in pieces:
            batch.append(piece)
            size += len(piece)
            if size >= _BATCH_BYTES:
                self._write_chunk(b"".join(batch), chunks=len(batch))
                batch, size = [], 0
        if batch:
            self._write_chunk(b"".join(batch), chunks=len(batch))

    def _send_again(self, pieces: list[bytes], reply: Reply) -> None:
        """The pieces over and over, up to ``repeat_bytes`` or ``repeat_seconds``."""
        owner = self.server.owner
        size, count = sum(map(len, pieces)), len(pieces)
        if not reply.delay:  # one write per batch, as the plain stream does
            copies = max(1, _BATCH_BYTES // max(size, 1))
            batch, size, count = b"".join(pieces * copies), size * copies, count * copies
        deadline = time.monotonic() + reply.repeat_seconds
        sent = 0
        while size and sent < (reply.repeat_bytes or 0) and time.monotonic() < deadline:
            if owner._stopping.is_set():
                raise Stopped
            if reply.delay:
                self._send_pieces(pieces, reply.delay, pause_first=True)
            else:
                self._write_chunk(batch, chunks=count)
            sent += size

    def _write_chunk(self, data: bytes, chunks: int = 0) -> None:
        if data:  # an empty chunk would end the body
            self._write(b"%X\r\n%b\r\n" % (len(data), data), chunks=chunks)

    def _end_chunks(self) -> None:
        self._write(b"0\r\n\r\n", completes=True)

    def _write(self, data: bytes, *, chunks: int = 0, completes: bool = False) -> None:
        # Progress is recorded before the bytes go out, so a client that has
        # read them never finds the record behind; a failed write undoes it.
        owner = self.server.owner
        owner._progress(self.record, chunks, completed=completes or None)
        try:
            self.wfile.write(data)
        except OSError:
            owner._progress(self.record, -chunks, completed=False if completes else None)
            raise

    def _abort(self) -> None:
        """Drop the connection mid-body, as a crashing server would."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _pause(self, seconds: float) -> None:
        """Wait, but end at once if the client hangs up or the server stops."""
        owner = self.server.owner
        deadline = time.monotonic() + seconds
        is_watching = True
        while (remaining := deadline - time.monotonic()) > 0:
            step = min(remaining, _POLL_SECONDS)
            if is_watching:
                readable = select.select([self.connection], [], [], step)[0]
            else:
                readable = []
                owner._stopping.wait(step)
            if owner._stopping.is_set():
                raise Stopped
            if readable:
                if self._is_peer_closed():
                    owner._update(self.record, disconnected=True)
                    raise ClientGone
                is_watching = False  # the client sent more (pipelining): just wait

    def _is_peer_closed(self) -> bool:
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""


def _clamp(value: int | None, limit: int) -> int | None:
    return None if value is None else min(value, limit)
