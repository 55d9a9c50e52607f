"""The kernel's line to its notebook in JupyterLab, through nbchat's lab extension.

The extension registers the comm target ``nbchat.notebook`` on every
notebook's kernel connection. :class:`NotebookBridge` opens a comm to it with
``{"path": <JPY_SESSION_NAME>}``; the page that has this notebook open answers
``{"op": "hello", "path": <the notebook's path>, "client": <that page>}``. A
request is ``{"id", "op", ...}`` and its reply ``{"id", "ok", "error"?, ...}``:

- ``insert``: ``index`` (None: at the end), ``cell_type`` (``code`` or
  ``markdown``), ``source``, ``metadata`` -> ``cell_id``, ``index``. The cell is
  not run.
- ``edit``: ``cell_id``, ``source``, ``metadata`` (merged) -> ``cell_id``.
- ``execute``: ``cell_id`` -> ``cell_id``, ``execution_count``, ``outputs``
  (nbformat dicts), ``status``, once the run has finished. The cell runs as if
  the person ran it: its outputs and count show in the notebook.

Requests carry the ``client`` of the first hello, so only that page acts on
them when several pages show the notebook. A reply reaches the kernel only
once the cell or callback running now returns: never wait for one in the code
that sent the request; ``on_reply`` is called when it comes.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from typing import Any

from IPython import get_ipython

__all__ = ["TARGET", "NotebookBridge"]

TARGET = "nbchat.notebook"

Reply = dict[str, Any]

_BRIDGES: dict[int, NotebookBridge] = {}


class NotebookBridge:
    """Requests from this kernel to change its notebook in JupyterLab; one per kernel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._comm: Any = None
        self._attached = False
        self._client: str | None = None  # the page that answered first
        self._path: str | None = None
        self._queued: list[dict[str, Any]] = []  # sent before the hello
        self._waiting: dict[str, Callable[[Reply], None]] = {}

    @classmethod
    def for_kernel(cls) -> NotebookBridge | None:
        """The bridge of the running kernel, made on first use; None outside a kernel."""
        kernel = getattr(get_ipython(), "kernel", None)
        if kernel is None:
            return None
        return _BRIDGES.setdefault(id(kernel), cls())

    @property
    def is_attached(self) -> bool:
        """Whether a JupyterLab page with this notebook open has answered."""
        return self._attached

    @property
    def path(self) -> str | None:
        """The notebook's path as the page that answered names it; None before it has."""
        return self._path

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

    def _open(self) -> None:
        import comm

        path = os.environ.get("JPY_SESSION_NAME", "")
        self._comm = comm.create_comm(target_name=TARGET, data={"path": path})
        self._comm.on_msg(self._on_msg)
        self._comm.on_close(self._on_close)

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data")
        if not isinstance(data, dict):
            return
        if data.get("op") == "hello":
            self._on_hello(data)
            return
        with self._lock:
            callback = self._waiting.pop(str(data.get("id")), None)
        if callback is not None:
            callback(data)

    def _on_hello(self, data: dict[str, Any]) -> None:
        with self._lock:
            if self._attached:
                return  # another page showing the notebook: the first one serves
            self._attached = True
            client, path = data.get("client"), data.get("path")
            self._client = client if isinstance(client, str) else None
            self._path = path if isinstance(path, str) else None
            queued, self._queued = self._queued, []
            comm = self._comm
        for message in queued:
            comm.send(self._addressed(message))

    def _addressed(self, message: dict[str, Any]) -> dict[str, Any]:
        return message if self._client is None else {**message, "client": self._client}

    def _on_close(self, msg: dict[str, Any]) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
            self._comm, self._attached, self._client = None, False, None
            self._path, self._queued = None, []
        error = "JupyterLab closed the connection to the notebook: no page with nbchat's extension"
        for request_id, callback in waiting.items():
            callback({"id": request_id, "ok": False, "error": error})
