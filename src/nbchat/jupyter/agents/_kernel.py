"""The kernel's side of outside agents: careful reads, and the gate's prompts and actions.

nbchat's Jupyter Server extension (:mod:`nbchat.jupyter.server.mcp`) calls into the
kernel of the notebook an agent names, silently and without touching its
history: :func:`variables_text` and :func:`describe_text` for reads, and
:func:`wake` when a gated call waits for this notebook. ``wake`` shows the
call in the notebook: the side panel opens on the agent's thread with the
call's prompt (Run / Edit / Reject, the code through the same view as
``run_code``'s), and ``%chat --agents`` shows the waiting calls in a cell.

A call is answered only in the kernel of its own notebook: the server tells
the kernel the exact server-relative paths of its sessions each time it
wakes it, and a call whose notebook is not one of them, to the letter, is
neither shown here nor answered (``sub/work.ipynb``'s kernel never answers
``work.ipynb``'s call). A kernel the server has not told yet answers none
until it is woken (the agent's next ``call_status`` does).
Code runs as ``run_code``'s does; cell changes go to the notebook's
JupyterLab front end through :mod:`nbchat.jupyter.notebook._lab_bridge`, whose reply ends the call,
or, when no page answers for the notebook, into its saved file
(:mod:`nbchat.jupyter.notebook._file`): a yes is never spent on nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from ...agents.gate import AGENT_MODEL, TOOL_PREFIX, AgentGate
from ...agents.server import NotebookSession, file_under
from ...agents.tools import answering_tools
from ...base._secrets import scrub
from ...base.errors import ToolRequirementsNotMet
from ...context import describe
from ...context._trust import kind_of, library_type, module_of, type_name
from ...context.run_code import CodeDecision, RunCode
from .._loaded import chat_of
from ..notebook.tools import HIDDEN, Notebook

_PATHS: set[str] = set()  # the server-relative paths of this kernel's sessions, as told
_SHOWN: set[str] = set()  # the calls whose prompt this kernel has shown
FRONT_END_WAIT = 10.0  # seconds for a JupyterLab page with the notebook to answer, else the file


# -- which notebook this kernel is ---------------------------------------------------
def is_mine(path: object) -> bool:
    """Whether ``path`` (relative to the server's root) is exactly one of this kernel's
    notebooks, as the server last said."""
    return isinstance(path, str) and path in _PATHS


def knows_its_notebook() -> bool:
    """Whether the server (or an in-process server) has told this kernel its notebook."""
    return bool(_PATHS)


# -- reads ------------------------------------------------------------------------------
def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _kind(value: object) -> str:
    """``list_variables``' kind and size; an object of the notebook's own classes by type only."""
    if library_type(type(value)):  # its shape or len() is the library's code
        return kind_of(value)
    return f"{type_name(type(value))} (from {module_of(type(value))})"


def _line(name: str, value: object) -> str:
    try:
        return f"{name}: {_kind(value)}"
    except Exception:  # a library object that cannot tell its size: its type is enough
        return f"{name}: {type_name(type(value))}"


def variables_text() -> str:
    """The user's variables, one a line: name and type (size for library objects), no values.

    Nothing the notebook defined runs: not a metaclass's ``__name__``, not a
    ``__len__``; one odd object never hides the others.
    """
    shell = _shell()
    names = Notebook(shell).variable_names()
    lines = [_line(name, shell.user_ns[name]) for name in names]
    return scrub("\n".join(lines) or "The notebook defines no variables yet.")


def describe_text(name: str) -> str:
    """``name`` described as ``@name`` would be, running no code of the notebook's own.

    What holds an object of the notebook's classes (in a column, an array, a
    list) is named by type, shape and dtype only (``describe(..., safe=True)``).
    """
    namespace = _shell().user_ns
    if not name.isidentifier() or name not in namespace or name in HIDDEN:
        return f"{name!r} is not a variable of this notebook; list_variables shows them."
    item = describe(namespace[name], name, image=False, safe=True)
    return f"{item.kind}\n{item.text}"


# -- the gate's prompts -------------------------------------------------------------------
def wake(path: str = "", paths: list[str] | None = None) -> None:
    """A gated call waits for ``path``, this kernel's notebook: show it in the side panel.

    ``paths`` are all the server's sessions of this kernel, replacing what it was told
    before (a renamed notebook is no longer its old name); without them ``path`` is
    added (one kernel serving one named notebook in-process).
    """
    if paths is not None:
        _PATHS.clear()
        _PATHS.update(p for p in paths if isinstance(p, str) and p)
    elif path:
        _PATHS.add(path)
    chat = _chat()
    calls = [call for call in waiting_calls(chat) if call.call_id not in _SHOWN]
    if not calls:
        return
    _SHOWN.update(call.call_id for call in calls)
    from ..panel._side import side_area_unavailable, side_panel

    if side_area_unavailable() is None:
        side_panel(chat, thread_id=calls[0].thread_id)


def seen(call_id: str) -> None:
    """The call's prompt is shown (in a cell): waking again does not open it in the panel."""
    _SHOWN.add(call_id)


def agent_calls(chat: Any) -> list[Any]:
    """Every outside agent's call that waits, whichever notebook it is for, oldest first."""
    calls = []
    for info in chat.store.threads():
        if info.model == AGENT_MODEL:
            calls += [call for call in chat.pending_calls(info.id)
                      if call.tool.startswith(TOOL_PREFIX)]  # fmt: skip
    return sorted(calls, key=lambda call: (call.thread_id, call.turn))


def waiting_calls(chat: Any) -> list[Any]:
    """The outside agents' calls that wait for this kernel's notebook, oldest first."""
    return [call for call in agent_calls(chat) if is_mine(call.arguments.get("notebook"))]


def _chat() -> Any:
    """The magics' Chat (it answers agents' calls), loading the extension if need be."""
    return chat_of(_shell())


# -- acting on an answer ---------------------------------------------------------------------
def kernel_answering_tools(shell: Any) -> list[RunCode]:
    """The tools that answer agents' calls in this kernel, each refusing other notebooks'."""
    notebook = Notebook(shell)

    def runner(code: str) -> Any:
        from ..notebook.tools import show_run

        ran = notebook.run(code)
        show_run(ran)
        return ran

    tools = answering_tools(runner, _apply, _read)
    for tool in tools:
        tool.check_requirements = _mine_only(tool.check_requirements)  # type: ignore[method-assign]
    return tools


def _read(arguments: dict[str, Any]) -> str:
    """A read the person said yes to, done here, as the endpoint would have done it."""
    read = arguments.get("read")
    if read == "list_variables":
        return variables_text()
    if read == "describe_variable":
        return describe_text(str(arguments.get("name", "")))
    from ...agents.server import cells_text
    from ..notebook._file import own_file

    path = str(arguments.get("notebook", ""))
    file = own_file(path)
    if file is None:
        return f"This kernel cannot find the file of {path!r} (it may have been renamed)."
    with open(file, encoding="utf-8") as handle:
        notebook = json.load(handle)
    return cells_text(notebook, path, int(arguments.get("start", 0)),
                      int(arguments.get("count", 20)))  # fmt: skip


def _mine_only(check: Any) -> Any:
    def checked(context: Any, arguments: dict[str, Any]) -> None:
        where = arguments.get("notebook")
        if not is_mine(where):
            raise ToolRequirementsNotMet(
                f"this call is for the notebook {where!r}; answer it there, where it runs"
            )
        check(context, arguments)

    return checked


def _apply(op: str, arguments: dict[str, Any], decision: CodeDecision) -> None:
    """Make the change the person said yes to; the result ends the call.

    The page that holds the notebook makes it, when one answers within
    FRONT_END_WAIT; otherwise it goes into the saved file (:mod:`nbchat.jupyter.notebook._file`),
    never nowhere.
    """
    from ..notebook._lab_bridge import NotebookBridge

    handle = str(arguments["handle"])
    notebook = str(arguments.get("notebook", ""))
    gate = AgentGate(_chat().store)
    outside = (gate.store.get(int(handle.split(".")[0])).settings or {}).get("outside") or {}
    metadata = {"nbchat": {
        "agent": str(outside.get("agent", "")), "agent_call": handle,
        "approved": str(decision), "edited": decision.action == "edit",
    }}  # fmt: skip
    source = decision.code

    def done(reply: dict[str, Any]) -> None:
        gate.complete(handle, _reply_text(op, reply, decision))

    def in_file() -> None:
        done(_in_file(op, notebook, arguments, source, metadata))

    bridge = NotebookBridge.for_kernel(notebook)
    if bridge is None:  # no kernel, so no page: the file it is
        in_file()
        return
    if op == "insert":
        first = {"op": "insert", "index": arguments.get("index"), "source": source,
                 "cell_type": arguments.get("cell_type") or "code", "metadata": metadata}
    elif op in ("delete", "move"):  # only the cell as the person saw it
        first = {"op": op, "cell_id": arguments["cell_id"], "index": arguments.get("index"),
                 "metadata": metadata, "expected": arguments.get("saved"), "strict": True}
    else:  # an execute runs exactly what was shown (or edited): the source first
        first = {"op": "edit", "cell_id": arguments["cell_id"], "source": source,
                 "metadata": metadata}
        # What the person was shown as saved (an execute's code is the saved source);
        # a call stored before edits carried it has none, and claims nothing was replaced.
        shown = arguments.get("code" if op == "execute" else "saved")
        if isinstance(shown, str):
            first["expected"] = shown
        first["strict"] = op == "edit"  # a diff lands only on the text it was made on

    def answered(reply: dict[str, Any]) -> None:
        if reply.get("unsent"):  # JupyterLab has no page for it: nothing was done there
            in_file()
        elif op == "execute" and reply.get("ok"):
            bridge.request({"op": "execute", "cell_id": arguments["cell_id"]},
                           lambda ran: done({**ran, "replaced_unsaved":
                                             reply.get("replaced_unsaved")}))  # fmt: skip
        else:
            done(reply)

    sent = bridge.request(first, answered)

    def unanswered() -> None:  # no page took it in time: it is withdrawn, so made only here
        if bridge.withdraw(sent):
            in_file()

    _later(FRONT_END_WAIT, unanswered)


def _in_file(op: str, notebook: str, arguments: dict[str, Any], source: str,
             metadata: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The change made in the notebook's saved file (no page holds it); the reply."""
    from ...agents import cells
    from ..notebook import _file as _agent_file

    if op == "insert":
        return _agent_file.change(notebook, lambda nb: cells.insert(
            nb, arguments.get("index"), source, str(arguments.get("cell_type") or "code"),
            metadata))  # fmt: skip
    cell_id = str(arguments["cell_id"])
    saved = arguments.get("saved")

    def changed(nb: dict[str, Any]) -> dict[str, Any]:
        cells.check_source(nb, cell_id, saved)  # the cell as the person saw it, or nothing
        if op == "delete":
            return cells.delete(nb, cell_id)
        if op == "move":
            return cells.move(nb, cell_id, arguments.get("index"))
        return cells.edit(nb, cell_id, source, metadata)

    if op in ("edit", "delete", "move"):
        return _agent_file.change(notebook, changed)
    return _agent_file.run_in_file(notebook, cell_id, source, metadata, Notebook(_shell()).run)


def _later(seconds: float, then: Any) -> None:
    """Call ``then`` in ``seconds`` on the kernel's event loop (never, outside one)."""
    import asyncio

    with contextlib.suppress(RuntimeError):  # no running loop: nothing to wait on
        asyncio.get_running_loop().call_later(seconds, then)


def _reply_text(op: str, reply: dict[str, Any], decision: CodeDecision) -> str:
    if not reply.get("ok"):
        return scrub(f"The change failed in the notebook: {reply.get('error') or 'no reason'}; "
                     "nothing more was done.")  # fmt: skip
    edited = ""
    if decision.action == "edit":
        edited = f"The person edited it first; this is what went in:\n{decision.code}\n"
    where = ""
    if reply.get("in_file"):
        where = ("No JupyterLab page with nbchat's extension holds the notebook, so the change "
                 "was made in its saved file. ")
    if reply.get("replaced_unsaved"):
        edited += "It replaced edits to the cell the person had not saved.\n"
    if op == "execute":
        outputs = json.dumps(reply.get("outputs") or [], ensure_ascii=False)[:20_000]
        count = reply.get("execution_count")
        ran = "The cell ran in the notebook's kernel" if reply.get("in_file") else \
            f"The cell ran (execution count {count})"  # fmt: skip
        return scrub(f"{edited}{where}{ran}. Its outputs: {outputs}")
    verb = {"insert": "inserted", "delete": "deleted", "move": "moved"}.get(op, "edited")
    if decision.chunks:
        taken = ", ".join(map(str, decision.chunks))
        edited = (f"The person accepted chunks {taken} of {decision.of} of the diff only; this "
                  f"is what went in:\n{decision.code}\n")  # fmt: skip
    return scrub(f"{edited}{where}The cell was {verb}; its id is {reply.get('cell_id')}.")


# -- in-process: this kernel as the notebook an agent sees ----------------------------------
class KernelNotebooks:
    """This kernel as the one notebook the MCP tools see, in-process (no Jupyter server)."""

    def __init__(self, path: str) -> None:
        self.path = path
        _PATHS.add(path)

    async def sessions(self) -> list[NotebookSession]:
        return [NotebookSession(self.path, "this-kernel", "python3", "python", "idle")]

    async def resolve(self, path: str) -> str | None:
        return file_under(os.getcwd(), path)  # the kernel's folder stands for the server's root

    async def read(self, path: str) -> dict[str, Any]:
        if path != self.path:  # only this notebook's own file, never another path
            raise FileNotFoundError(path)
        try:
            with open(path, encoding="utf-8") as file:
                return dict(json.load(file))
        except OSError:
            raise FileNotFoundError(path) from None

    async def evaluate(self, path: str, expression: str) -> str:
        return repr(eval(expression, {}))  # nbchat's own read functions, as the server calls them

    async def wake(self, path: str) -> None:
        wake(path)


def this_kernel_server(secret: str, path: str) -> Any:
    """nbchat's MCP server for one agent token, serving this kernel as the notebook ``path``.

    The same tools, checks and gate as the Jupyter server's endpoint, without
    HTTP: connect the SDK's client to it in-process (``mcp.Client(server)``).
    For tutorials and tests where no Jupyter server runs.
    """
    from ...agents import server as agent_server
    from ...agents.tokens import TokenStore

    chat = _chat()
    token = TokenStore(chat.user).verify(secret)
    return agent_server.build(KernelNotebooks(path), lambda: AgentGate(chat.store), token)
