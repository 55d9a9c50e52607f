"""Stopping a request from another thread, even while the endpoint sends nothing.

A read blocked on a silent socket wakes only when bytes come or the socket is
shut down: closing the response (or the socket) from another thread does not
wake it on Linux. :class:`StopSignal` runs the hooks of the requests under way
when it is set; the client's hook shuts the connection's socket down, so the
blocked read returns at once and the stream ends. Before the response has
come there is no socket to shut: :func:`send_until_stopped` waits for it in
another thread, so the stop still ends the wait at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import httpx


class StopSignal:
    """A request to stop, set from any thread; what is being read stops at once."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._ran = threading.Event()  # the hooks taken by set() have all returned
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    def __repr__(self) -> str:
        return f"StopSignal(is_set={self.is_set()})"

    def set(self) -> None:
        """Ask to stop: runs the hooks registered with :meth:`on_set`, once."""
        with self._lock:
            if self._set.is_set():
                return
            self._set.set()
            hooks, self._hooks = self._hooks, []
        try:
            for hook in hooks:
                hook()
        finally:
            self._ran.set()

    def is_set(self) -> bool:
        return self._set.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until set or for ``timeout`` seconds; whether it is set."""
        return self._set.wait(timeout)

    def set_after(self, seconds: float) -> threading.Timer:
        """Set this signal in ``seconds`` (a deadline); cancel the returned timer to keep it off."""
        timer = threading.Timer(seconds, self.set)
        timer.daemon = True
        timer.start()
        return timer

    @contextlib.contextmanager
    def on_set(self, hook: Callable[[], None]) -> Iterator[None]:
        """Within the block, ``hook`` runs when the signal is set (at once if it already is).

        Leaving the block waits for a hook another thread is running, so what
        the hook acts on (a connection) is not released to others under it.
        """
        with self._lock:
            is_set = self._set.is_set()
            if not is_set:
                self._hooks.append(hook)
        if is_set:
            hook()
        try:
            yield
        finally:
            with self._lock:
                taken = hook not in self._hooks
                if not taken:
                    self._hooks.remove(hook)
            if taken and not is_set:
                self._ran.wait()


def shut_down(sock: socket.socket) -> None:
    """End every read and write on ``sock``, also those blocked in another thread.

    Done on a duplicate of the descriptor, so the socket object (a TLS one
    keeps state) is not touched while its own thread reads from it.
    """
    with contextlib.suppress(OSError), socket.socket(fileno=os.dup(sock.fileno())) as twin:
        twin.shutdown(socket.SHUT_RDWR)


def shut(response: httpx.Response) -> None:
    """Shut the connection of ``response`` down: a read of its body in any thread ends."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        shut_down(sock)


def on_stop(
    stop: StopSignal | None, hook: Callable[[], None]
) -> contextlib.AbstractContextManager[None]:
    """:meth:`StopSignal.on_set`, or nothing when there is no signal."""
    return contextlib.nullcontext() if stop is None else stop.on_set(hook)


def shut_client(client: httpx.Client) -> None:
    """Shut every connection of ``client`` down (also one still waiting for its headers)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    for connection in list(getattr(pool, "connections", ())):
        stream = getattr(getattr(connection, "_connection", None), "_network_stream", None)
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            shut_down(sock)


def send_until_stopped(
    send: Callable[[], httpx.Response], stop: StopSignal
) -> httpx.Response | None:
    """``send()``, or None as soon as ``stop`` is set, also before the endpoint answers.

    The request runs in a thread of its own, so a stop need not wait for the
    response headers (a server loading a model sends none for a while). A
    response that comes after the stop is closed unread.
    """
    handoff = _Handoff()
    context = contextvars.copy_context()  # the cell's, so notes reach its output
    context.run(_SENDING_FOR.set, stop)
    threading.Thread(target=context.run, args=(handoff.run, send), daemon=True,
                     name="nbchat-send").start()
    try:
        with stop.on_set(handoff.ready.set):
            handoff.ready.wait()
    except BaseException:  # a kernel interrupt while waiting: nobody will read the response
        handoff.abandon()
        raise
    try:
        return handoff.take()
    except Stopped:
        return None


class Stopped(Exception):
    """The request was stopped while it waited to be sent again."""


_SENDING_FOR: contextvars.ContextVar[StopSignal | None] = contextvars.ContextVar(
    "nbchat_sending_for", default=None
)


def retry_sleep(seconds: float) -> None:
    """Wait before sending a request again; raises Stopped once its stop is set."""
    stop = _SENDING_FOR.get()
    if stop is None:
        time.sleep(seconds)
    elif stop.wait(seconds):
        raise Stopped("stopped before the request was sent again")


class _Handoff:
    """One response (or error) passed from the sending thread to the one that waits."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self._lock = threading.Lock()
        self._response: httpx.Response | None = None
        self._error: BaseException | None = None
        self._is_done = self._is_abandoned = False

    def run(self, send: Callable[[], httpx.Response]) -> None:
        try:
            response, error = send(), None
        except BaseException as exc:  # handed to the waiting thread, which raises it
            response, error = None, exc
        with self._lock:
            self._response, self._error, self._is_done = response, error, True
            if self._is_abandoned and response is not None:
                response.close()
        self.ready.set()

    def take(self) -> httpx.Response | None:
        """The response; None (abandoned) when it has not come; the sender's error raised."""
        with self._lock:
            if not self._is_done:
                self._is_abandoned = True
                return None
        if self._error is not None:
            raise self._error
        return self._response

    def abandon(self) -> None:
        with self._lock:
            self._is_abandoned = True
            if self._response is not None:
                self._response.close()
