"""The HTTP side: a thread per connection, HTTP/1.1 keep-alive, chunked streams.

Streams go out pre-encoded: with no delay the pieces are written in 64 KiB
batches (one HTTP chunk each), so the server is never the bottleneck of a
client benchmark. With a delay, the pause between chunks watches the socket,
so a client that hangs up is noticed at once, and a stopping server ends it.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import socketserver
import sys
import threading
import time
import typing
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from ._anthropic import ANTHROPIC, Anthropic, openai_messages, request_problem
from ._anthropic import prompt_tokens as anthropic_prompt_tokens
from ._fim import FIM_CLASSES, FIM_PATHS, NOTHING, FimForm, fim_messages
from ._protocols import (
    OLLAMA,
    OPENAI,
    Answer,
    Ollama,
    OpenAI,
    StreamPlan,
    count_prompt_tokens,
    dumps,
    ollama_name,
)
from ._record import AZURE_CHAT, RecordedRequest
from ._responses import RESPONSES, Responses
from ._responses import openai_messages as responses_messages
from ._responses import request_problem as responses_problem
from ._script import Body, Reply, request_images

_BATCH_BYTES = 64 * 1024
_POLL_SECONDS = 0.05
_NO_FAULTS = Reply()

Protocol = OpenAI | Ollama | Anthropic | Responses


class Owner(typing.Protocol):
    """What the handler threads use of the server that owns them (a ScriptedServer).

    Declared here, not imported, so that the server can import the handler.
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


class _ClientGone(Exception):
    """The client closed the connection before the response ended."""


class _Stopped(Exception):
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


class Handler(BaseHTTPRequestHandler):
    """Serves the requests of one client connection, in order."""

    protocol_version = "HTTP/1.1"
    server_version = "nbchat-testing"
    sys_version = ""
    disable_nagle_algorithm = True
    server: HTTPServer
    record: RecordedRequest

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the server's request log is the record."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        owner = self.server.owner
        raw = self._read_body()
        path = urlsplit(self.path).path
        protocol = _protocol_of(path, self.headers)
        try:
            body = json.loads(raw) if raw else None
            is_valid = True
        except ValueError:
            body, is_valid = None, False
        azure = AZURE_CHAT.match(path)
        if azure and isinstance(body, dict):
            body.setdefault("model", azure.group(1))  # the deployment is the model
        view = {"messages": _openai_view(protocol, body)} if (
            (protocol in (ANTHROPIC, RESPONSES) or isinstance(protocol, FIM_CLASSES))
            and isinstance(body, dict)) else {}  # fmt: skip
        self.record = owner._record(
            **view,
            method=self.command,
            path=self.path,
            headers=dict(self.headers.items()),
            body=body,
            raw=raw,
            protocol=protocol.name,
            connection=tuple(self.client_address[:2]),
        )
        self._headers_sent = False
        try:
            self._route(path, protocol, is_valid)
        except (_ClientGone, _Stopped):
            self.close_connection = True
        except OSError:
            self.close_connection = True
            if not owner._stopping.is_set():
                owner._update(self.record, disconnected=True)
        except Exception as exc:
            self.close_connection = True
            if not self._headers_sent:
                self._send_json(500, protocol.error(500, f"scripted server failed: {exc!r}"))
            raise

    def _route(self, path: str, protocol: Protocol, is_valid: bool) -> None:
        owner = self.server.owner
        if owner.api_key is not None and not self._has_key(owner.api_key, protocol, path):
            return self._send_json(401, protocol.error(401))
        request = (self.command, path)
        if self.command == "POST" and isinstance(protocol, FIM_CLASSES):
            return self._fim(protocol, is_valid)
        if request == ("POST", protocol.chat_path) or (
            self.command == "POST" and AZURE_CHAT.match(path)
        ):
            return self._chat(protocol, is_valid)
        if request == ("GET", "/v1/models") and protocol is ANTHROPIC:
            return self._send_json(200, ANTHROPIC.models(owner.models))
        if request == ("GET", "/v1/models"):
            return self._send_json(200, OPENAI.models(owner.models))
        if self.command == "GET" and path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if _is_known(model, owner.models, OPENAI):
                return self._send_json(200, OPENAI.model_entry(model))
            return self._send_json(404, OPENAI.unknown_model(model))
        if request == ("GET", "/api/tags"):
            return self._send_json(200, OLLAMA.models(owner.models))
        if request == ("GET", "/api/version"):
            return self._send_json(200, OLLAMA.version())
        if request == ("GET", "/"):
            return self._send_bytes(200, "text/plain; charset=utf-8", b"Ollama is running")
        llama_props = owner.context_size or owner.template_tools is not None
        if request == ("GET", "/props") and llama_props:
            return self._send_json(200, OPENAI.props(owner.context_size, owner.template_tools))
        if request == ("POST", "/api/show") and owner.context_size:
            return self._send_json(200, OLLAMA.show(owner.context_size))
        return self._send_json(404, protocol.not_found(self.command, path))

    def _has_key(self, key: str, protocol: Protocol, path: str) -> bool:
        """Bearer everywhere; Anthropic's ``x-api-key`` and Azure's ``api-key`` where they apply."""
        if self.headers.get("Authorization") == f"Bearer {key}":
            return True
        if protocol is ANTHROPIC:
            return self.headers.get("x-api-key") == key
        return bool(AZURE_CHAT.match(path)) and self.headers.get("api-key") == key

    def _chat(self, protocol: Protocol, is_valid: bool) -> None:
        owner = self.server.owner
        body = self.record.body
        if not is_valid or not isinstance(body, dict):
            return self._send_json(400, protocol.bad_json())
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return self._send_json(400, protocol.missing_model())
        if not _is_known(model, owner.models, protocol):
            return self._send_json(404, protocol.unknown_model(model))
        refuses = owner.text_only_models and _is_known(model, owner.text_only_models, protocol)
        if refuses and request_images(self.record.messages):
            return self._send_json(400, protocol.no_images(model))
        if protocol is ANTHROPIC:
            return self._anthropic_chat(body)
        if protocol is RESPONSES:
            return self._responses_chat(body)
        prompt = count_prompt_tokens(body)
        if protocol is OPENAI and owner.context_size and prompt > owner.context_size:
            return self._send_json(400, OPENAI.overflow(prompt, owner.context_size))
        self._answer_chat(protocol, body, body)

    def _anthropic_chat(self, body: dict[str, Any]) -> None:
        """Checked as the API checks it, then answered from the OpenAI-shaped view of it."""
        owner = self.server.owner
        problem = request_problem(body)
        if problem is not None:
            return self._send_json(400, ANTHROPIC.error(400, problem))
        prompt = anthropic_prompt_tokens(body)
        if owner.context_size and prompt > owner.context_size:
            return self._send_json(400, ANTHROPIC.overflow(prompt, owner.context_size))
        view = {**body, "messages": self.record.messages}
        self._answer_chat(ANTHROPIC, body, view)

    def _responses_chat(self, body: dict[str, Any]) -> None:
        """Checked as the API checks it, then answered from the OpenAI-shaped view of it."""
        problem = responses_problem(body)
        if problem is not None:
            return self._send_json(400, RESPONSES.error(400, problem))
        self._answer_chat(RESPONSES, body, {**body, "messages": self.record.messages})

    def _answer_chat(self, protocol: Protocol, body: dict[str, Any], view: dict[str, Any]) -> None:
        """Answer ``body`` by the rule ``view`` (its conversation in OpenAI's shape) matches."""
        owner = self.server.owner
        model = str(body.get("model"))
        reply = owner._pick(view)
        if self._plays_failure(reply, protocol.error):
            return
        answer = owner._answer(reply, view, model, body if protocol is ANTHROPIC else None)
        if protocol.is_stream(body):
            self._stream(reply or _NO_FAULTS, protocol.stream(answer, body))
        else:
            whole = (
                RESPONSES.whole(answer, body) if protocol is RESPONSES else protocol.whole(answer)
            )
            self._whole(reply or _NO_FAULTS, dumps(whole).encode())

    def _fim(self, form: FimForm, is_valid: bool) -> None:
        """Fill-in-the-middle: checked as the form's server checks it, then answered by the
        first rule the prefix matches, or with nothing (an empty middle)."""
        owner = self.server.owner
        body = self.record.body
        if not is_valid or not isinstance(body, dict):
            return self._send_json(400, form.bad_json())
        problem = form.problem(body)
        if problem is not None:
            return self._send_json(400, form.error(400, problem))
        model = body.get("model")
        if form.model_required and (not isinstance(model, str) or not model):
            return self._send_json(400, form.missing_model())
        if form.model_required and not _is_known(str(model), owner.models, form):
            return self._send_json(404, form.unknown_model(str(model)))
        view = {**body, "messages": self.record.messages}
        reply = owner._pick(view)

        def error(status: int, message: str | None) -> Any:
            return form.error(status, message or form.refusal(status, body))

        if self._plays_failure(reply, error):
            return
        answer = owner._answer(reply or NOTHING, view, str(model or "scripted.gguf"))
        if form.is_stream(body):
            self._stream(reply or _NO_FAULTS, form.stream(answer, body))
        else:
            self._whole(reply or _NO_FAULTS, dumps(form.whole(answer, body)).encode())

    def _plays_failure(self, reply: Reply | None, error: Callable[[int, str | None], Any]) -> bool:
        """Play the reply's ``hold``, then its HTTP error or empty body; whether it answered."""
        if reply is not None and reply.hold:
            self._pause(reply.hold)
        if reply is not None and reply.status is not None:
            headers = {}
            if reply.retry_after is not None:
                headers["Retry-After"] = _seconds(reply.retry_after)
            if reply.error_body is not None:
                page = reply.error_body.encode()
                self._send_bytes(reply.status, "text/plain; charset=utf-8", page, headers)
            else:
                self._send_json(reply.status, error(reply.status, reply.error_message), headers)
            return True
        if reply is not None and reply.empty_body:
            self._send_bytes(200, "application/json", b"")
            return True
        return False

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
                raise _Stopped
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
                raise _Stopped
            if readable:
                if self._is_peer_closed():
                    owner._update(self.record, disconnected=True)
                    raise _ClientGone
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


def _protocol_of(path: str, headers: Any) -> Protocol:
    """The fill-in-the-middle forms at their paths (``/infill``, ``/v1/completions``,
    ``/beta/completions``, ``/v1/fim/completions``, ``/api/generate``); Ollama under
    ``/api``; Anthropic at ``/v1/messages`` or when the client names its version
    (``GET /v1/models`` is both Anthropic's and OpenAI's); OpenAI's Responses at
    ``/v1/responses``; else OpenAI."""
    if path in FIM_PATHS:
        return FIM_PATHS[path]
    if path == "/" or path.startswith("/api/"):
        return OLLAMA
    if path == RESPONSES.chat_path:
        return RESPONSES
    if path == ANTHROPIC.chat_path or (headers.get("anthropic-version") and path == "/v1/models"):
        return ANTHROPIC
    return OPENAI


def _openai_view(protocol: Protocol, body: dict[str, Any]) -> list[dict[str, Any]]:
    if isinstance(protocol, FIM_CLASSES):
        return fim_messages(protocol, body)
    return openai_messages(body) if protocol is ANTHROPIC else responses_messages(body)


def _is_known(model: str, models: tuple[str, ...], protocol: Protocol) -> bool:
    if not models:
        return True
    if isinstance(protocol, Ollama):
        return ollama_name(model) in {ollama_name(m) for m in models}
    return model in models


def _clamp(value: int | None, limit: int) -> int | None:
    return None if value is None else min(value, limit)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
