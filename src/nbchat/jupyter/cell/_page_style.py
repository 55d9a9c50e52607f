"""Whether the page holds the renderer's stylesheet, so that a streaming update can leave it out.

Each update of a cell's output replaces its HTML whole, and a ``<style>`` in it makes
the browser check the whole page's styles again (a stylesheet went and came). nbchat's
JupyterLab extension holds the same stylesheet (``labextension/style/markup.css``, with
its version): the kernel asks once, on the comm target ``nbchat.page``, which version
the page holds, and streaming updates leave the stylesheet out when it is this one. The
final render always carries it (saved notebooks, nbconvert, other front ends). A page
answers once the kernel is idle, so the first cell that streams still carries it.

The same answer says the page can draw :data:`LIVE_MIME_TYPE`: the streaming markup,
redrawn only where it changed. A page whose extension predates that renderer shows the
update's ``text/html`` beside it, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from typing import Any

from IPython import get_ipython

from ...base import markup

__all__ = ["LIVE_MIME_TYPE", "TARGET", "VERSION", "page_holds_style"]

TARGET = "nbchat.page"
# What the extension (``labextension/src/live.ts``) redraws only where it changed: the same
# safe markup as the update's text/html, for trusted outputs only.
LIVE_MIME_TYPE = "application/vnd.nbchat.live+html"
VERSION = hashlib.sha256(markup.STYLE.encode()).hexdigest()[:12]

_answers: dict[int, list[str]] = {}  # a kernel's versions, one a page that answered


def page_holds_style() -> bool:
    """Whether every page that answered this kernel holds this version of the stylesheet.

    Asks the pages the first time, from the kernel's main thread (where comms are made);
    False until one has answered, and outside a kernel.
    """
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return False
    answers = _answers.get(id(kernel))
    if answers is None:
        if threading.current_thread() is not threading.main_thread():
            return False
        answers = _answers[id(kernel)] = []
        _ask(answers)
    return bool(answers) and all(version == VERSION for version in answers)


def _ask(answers: list[str]) -> None:
    try:
        import comm

        asked = comm.create_comm(target_name=TARGET, data={"op": "style"})
    except Exception:  # noqa: BLE001 - no front end to ask: the stylesheet stays in
        return

    def on_msg(msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data")
        if isinstance(data, dict):
            answers.append(str(data.get("style", "")))
        with contextlib.suppress(Exception):  # closed already
            asked.close()

    asked.on_msg(on_msg)
