"""The kernel's line to its notebook in JupyterLab, through nbchat's lab extension.

The extension registers the comm target ``nbchat.notebook`` on every
notebook's kernel connection. :class:`NotebookBridge` opens a comm to it with
``{"path": <JPY_SESSION_NAME>, "notebook": <the notebook's server-relative
path>}``; the page that has exactly that notebook open on this kernel answers
``{"op": "hello", "path": <the notebook's path>, "client": <that page>}``, and
a hello for another notebook (two notebooks sharing one kernel) is not taken.
A request is ``{"id", "op", ...}`` and its reply ``{"id", "ok", "error"?, ...}``:

- ``insert``: ``index`` (None: at the end), ``cell_type`` (``code`` or
  ``markdown``), ``source``, ``metadata`` -> ``cell_id``, ``index``. The cell is
  not run.
- ``edit``: ``cell_id``, ``source``, ``metadata`` (merged), ``expected`` (the
  source the person was shown, optional) -> ``cell_id``, ``replaced_unsaved``
  (the live cell held edits that differed from ``expected``).
- ``execute``: ``cell_id`` -> ``cell_id``, ``execution_count``, ``outputs``
  (nbformat dicts), ``status``, once the run has finished. The cell runs as if
  the person ran it: its outputs and count show in the notebook.

- ``delete``: ``cell_id`` -> ``cell_id``; ``move``: ``cell_id``, ``index`` -> ``cell_id``;
  ``outputs``: ``cell_id``, ``outputs`` (nbformat dicts) kept in the cell. With
  ``strict`` and ``expected``, an ``edit``, ``delete`` or ``move`` whose cell no
  longer holds exactly ``expected`` is refused, nothing changed; an ``insert``
  may name the new cell's ``cell_id``.

Unasked, the page sends ``{"op": "cells", "order": [ids], "cells": {id: cell}}``
after its hello and whenever cells change (the cells that changed, as nbformat
dicts): the kernel's copy of the live notebook (:meth:`NotebookBridge.mirror`).

A page reloaded on a running kernel (a reload sends no close) opens a comm of its
own to the kernel's ``nbchat.notebook`` target with its hello, when it finds that
target's comm open in the kernel: the kernel then serves that page
(:meth:`NotebookBridge.adopt`).

Requests carry the ``client`` of the first hello, so only that page acts on
them when several pages show the notebook. A request no page has taken yet
can be withdrawn (:meth:`NotebookBridge.withdraw`); one still unsent when the
comm closes is answered ``{"ok": False, "unsent": True}``: nothing was done.
A reply reaches the kernel only once the cell or callback running now
returns: never wait for one in the code that sent the request; ``on_reply``
is called when it comes.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

from IPython import get_ipython

__all__ = ["TARGET", "NotebookBridge"]

TARGET = "nbchat.notebook"

Reply = dict[str, Any]

_BRIDGES: dict[tuple[int, str], NotebookBridge] = {}
_HOOKS: dict[str, list[Callable[[dict[str, Any]], None]]] = {}  # the page's unasked messages


class NotebookBridge:
    """Requests from this kernel to change one of its notebooks in JupyterLab."""

    def __init__(self, notebook: str = "") -> None:
        self.notebook = notebook
        self._lock = threading.Lock()
        self._comm: Any = None
        self._attached = False
        self._client: str | None = None  # the page that answered first
        self._path: str | None = None
        self._queued: list[dict[str, Any]] = []  # sent before the hello
        self._waiting: dict[str, Callable[[Reply], None]] = {}
        self._order: list[str] | None = None  # the page's cells, as it last said
        self._cells: dict[str, dict[str, Any]] = {}

    @classmethod
    def for_kernel(cls, notebook: str = "") -> NotebookBridge | None:
        """The running kernel's bridge to ``notebook`` (server-relative; empty: the one its
        session names), made on first use; None outside a kernel."""
        kernel = getattr(get_ipython(), "kernel", None)
        if kernel is None:
            return None
        return _BRIDGES.setdefault((id(kernel), notebook), cls(notebook))

    @staticmethod
    def on_op(op: str, callback: Callable[[dict[str, Any]], None]) -> None:
        """Call ``callback(data)`` for each message ``op`` a page sends unasked (after a
        ``hello`` has been taken, for ``hello``)."""
        _HOOKS.setdefault(op, []).append(callback)

    def notify(self, message: dict[str, Any]) -> None:
        """Send the page that answered a message that needs no reply; dropped before one has."""
        with self._lock:
            comm = self._comm if self._attached else None
        if comm is not None:
            comm.send(self._addressed(message))

    @property
    def is_attached(self) -> bool:
        """Whether a JupyterLab page with this notebook open has answered."""
        return self._attached

    @property
    def path(self) -> str | None:
        """The notebook's path as the page that answered names it; None before it has."""
        return self._path

    def open(self) -> None:
        """Open the comm now (a page answers once the kernel is idle); no-op if open."""
        with self._lock:
            if self._comm is None:
                self._open()

    def mirror(self) -> dict[str, Any] | None:
        """The live notebook as the page last sent it (an nbformat dict, to read, not change);
        None before the page has sent it."""
        with self._lock:
            if not self._attached or self._order is None:
                return None
            cells = [self._cells[i] for i in self._order if i in self._cells]
        return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}

    def apply_to_mirror(self, change: Callable[[dict[str, Any]], object]) -> None:
        """Make ``change`` on the copy too, so reads before the page's next word see it.

        It works on copies of the cells: a read holding the notebook keeps what it read.
        """
        with self._lock:
            if not self._attached or self._order is None:
                return
            # The changes reassign a cell's fields and update its metadata: these copies do.
            cells = [{**self._cells[i], "metadata": dict(self._cells[i].get("metadata") or {})}
                     for i in self._order if i in self._cells]  # fmt: skip
        notebook: dict[str, Any] = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                    "cells": cells}  # fmt: skip
        change(notebook)
        with self._lock:
            self._order = [str(cell.get("id")) for cell in notebook["cells"]]
            self._cells = {str(cell.get("id")): cell for cell in notebook["cells"]}

    def request(self, op: dict[str, Any], on_reply: Callable[[Reply], None]) -> str:
        """Send ``op`` (``{"op": ..., ...}``) to the notebook; return the request's id.

        ``on_reply`` gets the reply dict, from the comm's message handler. Sent
        before the page has answered, the request waits and goes with its hello.
        """
        request_id = uuid.uuid4().hex
        message = {**op, "id": request_id}
        with self._lock:
            self._waiting[request_id] = on_reply
            if self._comm is None:
                self._open()
            if not self._attached:
                self._queued.append(message)
                return request_id
            comm = self._comm
        comm.send(self._addressed(message))
        return request_id

    def withdraw(self, request_id: str) -> bool:
        """Take back a request no page has taken (it is dropped); whether it was one."""
        with self._lock:
            for message in self._queued:
                if message["id"] == request_id:
                    self._queued.remove(message)
                    self._waiting.pop(request_id, None)
                    return True
        return False

    def _open(self) -> None:
        import comm

        path = os.environ.get("JPY_SESSION_NAME", "")
        self._comm = comm.create_comm(target_name=TARGET,
                                      data={"path": path, "notebook": self.notebook})  # fmt: skip
        self._listen(self._comm)

    def _listen(self, comm: Any) -> None:
        comm.on_msg(self._on_msg)
        comm.on_close(lambda msg: self._on_close(msg) if self._comm is comm else None)

    def adopt(self, comm: Any, data: dict[str, Any]) -> bool:
        """A page opened its own comm with a hello (it was reloaded): it serves from now on.

        The page the kernel heard from before is gone (a reload sends no close), so the
        newest page with the notebook takes its place; whether this one was taken.
        """
        path, client = data.get("path"), data.get("client")
        if data.get("op") != "hello" or not isinstance(client, str) or (
                self.notebook and path != self.notebook):  # fmt: skip
            return False
        with self._lock:
            old, self._comm = self._comm, comm
            self._attached, self._client = True, client
            self._path = path if isinstance(path, str) else None
            self._order, self._cells = None, {}
            queued, self._queued = self._queued, []
        self._listen(comm)
        if old is not None and old is not comm:
            with contextlib.suppress(Exception):  # the departed page's comm: nobody listens
                old.close()
        for message in queued:
            comm.send(self._addressed(message))
        _call_hooks("hello", data)
        return True

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data")
        if not isinstance(data, dict):
            return
        if data.get("op") == "hello":
            if self._on_hello(data):
                _call_hooks("hello", data)
            return
        if data.get("op") == "cells" and "id" not in data:
            self._on_cells(data)
            return
        if "id" not in data and data.get("op") in _HOOKS:
            if data.get("client") in (None, self._client):
                _call_hooks(str(data["op"]), data)
            return
        with self._lock:
            callback = self._waiting.pop(str(data.get("id")), None)
        if callback is not None:
            callback(data)

    def _on_hello(self, data: dict[str, Any]) -> bool:
        with self._lock:
            client, path = data.get("client"), data.get("path")
            if self._attached:
                return False  # another page showing the notebook: the first one serves
            if self.notebook and path != self.notebook:
                return False  # a page of another notebook on this kernel: never its changes
            self._attached = True
            self._client = client if isinstance(client, str) else None
            self._path = path if isinstance(path, str) else None
            queued, self._queued = self._queued, []
            comm = self._comm
        for message in queued:
            comm.send(self._addressed(message))
        return True

    def _on_cells(self, data: dict[str, Any]) -> None:
        order, cells = data.get("order"), data.get("cells")
        if not isinstance(order, list) or not isinstance(cells, dict):
            return
        with self._lock:
            if not self._attached or data.get("client") not in (None, self._client):
                return  # another page's copy
            self._order = [str(i) for i in order]
            self._cells.update({str(k): v for k, v in cells.items() if isinstance(v, dict)})
            kept = set(self._order)
            self._cells = {k: v for k, v in self._cells.items() if k in kept}

    def _addressed(self, message: dict[str, Any]) -> dict[str, Any]:
        return message if self._client is None else {**message, "client": self._client}

    def _on_close(self, msg: dict[str, Any]) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            unsent = {message["id"] for message in self._queued}
            self._comm, self._attached, self._client = None, False, None
            self._path, self._queued = None, []
            self._order, self._cells = None, {}
        error = "JupyterLab closed the connection to the notebook: no page with nbchat's extension"
        for request_id, callback in waiting.items():
            reply = {"id": request_id, "ok": False, "error": error}
            callback({**reply, "unsent": True} if request_id in unsent else reply)


def _call_hooks(op: str, data: dict[str, Any]) -> None:
    for callback in list(_HOOKS.get(op, ())):
        try:
            callback(data)
        except Exception:  # one hook's failure never stops the comm's other messages
            import logging

            logging.getLogger("nbchat").exception("nbchat: the page's %r message failed", op)


def register_target() -> None:
    """Let a reloaded page open its own comm to this kernel (once per kernel)."""
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or getattr(kernel, "_nbchat_target", False):
        return
    import comm

    def opened(opened_comm: Any, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        bridge = NotebookBridge.for_kernel()
        if not isinstance(data, dict) or bridge is None or not bridge.adopt(opened_comm, data):
            with contextlib.suppress(Exception):
                opened_comm.close()

    comm.get_comm_manager().register_target(TARGET, opened)
    kernel._nbchat_target = True

