"""An agent's cell change made in the notebook's saved file, when no JupyterLab page holds it.

The person said yes in this kernel, but no page with nbchat's extension
answered for the notebook: rather than spend the yes on nothing, the change
goes into the file the server's session names (the kernel's own
``JPY_SESSION_NAME``), written whole and atomically; an ``execute_cell`` runs
the approved source here, in the notebook's kernel, and keeps its outputs
in that file's cell. A page opened afterwards shows the change.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...agents import cells
from ...agents.server import file_under

if TYPE_CHECKING:
    from .tools import RunResult

Reply = dict[str, Any]


def own_file(path: str) -> str | None:
    """The file of this kernel's notebook ``path`` (relative to the server's root), or None.

    The server's session names it absolutely; a kernel no server started (an
    in-process agent) stands for the notebook ``path`` in its own folder.
    """
    session = os.environ.get("JPY_SESSION_NAME", "")
    if session:
        named = session.replace("\\", "/")
        return session if path and (named == path or named.endswith("/" + path)) else None
    found = file_under(os.getcwd(), path) if path else None
    return os.path.join(os.getcwd(), found) if found is not None else None


def change(path: str, op: Callable[[dict[str, Any]], Reply]) -> Reply:
    """Apply ``op`` to the saved notebook at ``path`` and write it back whole; op's reply.

    A notebook that cannot be read, changed or written is left as it was, and the
    reply says why (``ok`` false).
    """
    file = own_file(path)
    if file is None:
        return {"ok": False, "error": f"this kernel cannot find the file of {path!r} (it may "
                                      "have been renamed); open the notebook in JupyterLab"}
    return change_file(file, op, path)


def change_file(file: str, op: Callable[[dict[str, Any]], Reply], path: str = "") -> Reply:
    """Apply ``op`` to the saved notebook ``file`` (``path``, as named) and write it back whole."""
    path = path or os.path.basename(file)
    try:
        with open(file, encoding="utf-8") as handle:
            notebook = json.load(handle)
        if not isinstance(notebook, dict):
            raise cells.CellError("the saved file is not an nbformat 4 notebook")
        reply = op(notebook)
        _write(file, notebook)
    except cells.CellError as error:
        return {"ok": False, "error": f"{error} ({path})"}
    except (OSError, ValueError) as error:
        return {"ok": False, "error": f"the saved notebook {path!r} could not be changed: "
                                      f"{type(error).__name__}: {error}"}
    return {**reply, "in_file": True}


def run_in_file(path: str, cell_id: str, source: str, metadata: dict[str, Any],
                run: Callable[[str], RunResult]) -> Reply:  # fmt: skip
    """Set the cell to ``source``, run it with ``run`` here, and keep its outputs in the file."""
    def set_source(notebook: dict[str, Any]) -> Reply:
        kind = cells.find(notebook, cell_id).get("cell_type")
        return {**cells.edit(notebook, cell_id, source, metadata), "cell_type": kind}

    edited = change(path, set_source)
    if not edited.get("ok"):
        return edited
    if edited["cell_type"] != "code":  # a markdown cell has nothing to run
        return {"ok": True, "cell_id": cell_id, "execution_count": None, "outputs": [],
                "status": "ok", "in_file": True}  # fmt: skip
    ran = run(source)
    outputs = outputs_of(ran)
    kept = change(path, lambda notebook: _kept(notebook, cell_id, outputs))
    if not kept.get("ok"):
        return {"ok": False, "error": f"the cell ran, but its outputs could not be saved: "
                                      f"{kept.get('error')}"}
    return {"ok": True, "cell_id": cell_id, "execution_count": None, "outputs": outputs,
            "status": "error" if ran.error else "ok", "in_file": True}  # fmt: skip


def _kept(notebook: dict[str, Any], cell_id: str, outputs: list[dict[str, Any]]) -> Reply:
    cells.set_outputs(notebook, cell_id, outputs, None)
    return {"ok": True, "cell_id": cell_id}


def outputs_of(ran: RunResult) -> list[dict[str, Any]]:
    """A run's output as nbformat outputs: its streams, what it displayed, its value, its error."""
    outputs: list[dict[str, Any]] = []
    for name, text in (("stdout", ran.stdout), ("stderr", ran.stderr)):
        if text:
            outputs.append({"output_type": "stream", "name": name, "text": text})
    captured = ran.captured.outputs if ran.captured is not None else []
    for shown in captured:
        outputs.append({"output_type": "display_data", "data": dict(shown.data),
                        "metadata": dict(shown.metadata or {})})  # fmt: skip
    if ran.result is not None:
        outputs.append({"output_type": "execute_result", "execution_count": None,
                        "data": {"text/plain": ran.result}, "metadata": {}})  # fmt: skip
    if ran.error:
        last = ran.error.rstrip().splitlines()[-1]
        name, _, value = last.partition(": ")
        outputs.append({"output_type": "error", "ename": name, "evalue": value,
                        "traceback": ran.error.splitlines()})  # fmt: skip
    return outputs


def _write(file: str, notebook: dict[str, Any]) -> None:
    """Replace ``file`` by the notebook at once: a reader sees the old file or the new, whole."""
    folder = os.path.dirname(os.path.abspath(file))
    mode = os.stat(file).st_mode & 0o777
    descriptor, temporary = tempfile.mkstemp(prefix=".nbchat-", suffix=".ipynb", dir=folder)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(notebook, handle, indent=1, sort_keys=True, ensure_ascii=False)
            handle.write("\n")
        os.chmod(temporary, mode)
        os.replace(temporary, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
