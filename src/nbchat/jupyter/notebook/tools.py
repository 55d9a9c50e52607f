"""The notebook as context: the user's namespace, cells, last error and figures, and running code.

This is the Jupyter side of :mod:`nbchat.context`: it resolves ``@name``
mentions in the user's namespace, supplies IPython's ``text/llm+plain``
formatter as the description hook, finds the last exception with the cell
that raised it, and runs code the way a cell runs (magics and ``!`` lines
included) with its output captured. :func:`notebook_tools` gives the model
read access (``read_cells``, ``list_variables``, ``describe_variable``,
``read_cell``, ``last_error``), the cell changes it proposes
(:mod:`nbchat.context.cell_tools`) and ``run_code``, which runs only after
the person's yes.

Code is run here, not with a nested ``run_cell``: a nested cell would bump
the execution count, rewrite ``_``/``Out`` and history, fire the post-execute
hooks and print its traceback into the asking cell. Here the cell is
transformed as IPython does (``%magic`` and ``!cmd`` become calls), compiled
with IPython's compiler (so tracebacks show its lines) and executed in the
user's namespace; the last expression's value is returned, not displayed.

What the tools return to the model holds no key nbchat uses nor the value of
a secret-named environment variable (:func:`nbchat.base._secrets.scrub`), and no
tag that could close or open one of nbchat's blocks around it.
"""

from __future__ import annotations

import ast
import linecache
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...base._delimiters import neutralise
from ...base._secrets import cut_scrubbed, scrub, scrub_pieces
from ...base.content import ContextItem, fit, head_and_tail
from ...base.errors import InputError
from ...base.markup import fence
from ...context import DEFAULT_BUDGET, describe
from ...context._mentions import resolve_mentions
from ...context._trust import kind_of

HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})
RUN_BUDGET = 1500  # tokens of output returned to the model per run


@dataclass(frozen=True)
class Attached:
    """What the ``@mentions`` of a question attached, and the ones not found."""

    items: tuple[ContextItem, ...]
    unresolved: tuple[str, ...]


@dataclass(frozen=True)
class RunResult:
    """What running code did: what it printed, its last value's repr, its error."""

    code: str
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    error: str | None = None
    displays: int = 0
    captured: Any = field(default=None, compare=False, repr=False)
    """IPython's captured output, to show it again in a cell (``captured.show()``)."""

    def as_text(self, budget: int = RUN_BUDGET) -> str:
        """The run as the model reads it: secrets scrubbed, cut to ``budget`` tokens mid-way."""
        parts = []
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout.rstrip()}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr.rstrip()}")
        if self.displays:
            parts.append(f"({self.displays} rich output{'s' * (self.displays > 1)} displayed)")
        if self.result is not None:
            parts.append(f"result:\n{self.result}")
        if self.error is not None:
            parts.append(f"error:\n{self.error}")
        text = "\n".join(parts) or "The code ran and printed nothing; its last line has no value."
        return cut_scrubbed(text, lambda whole: head_and_tail(whole, budget))


class Notebook:
    """One IPython shell seen as context: its namespace, its cells, its errors."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    @property
    def namespace(self) -> dict[str, Any]:
        return dict(self.shell.user_ns)

    def formatter(self, obj: object) -> str | None:
        """IPython's ``text/llm+plain`` formatter, when one is registered and knows ``obj``."""
        formatters = getattr(self.shell.display_formatter, "formatters", {})
        llm = formatters.get("text/llm+plain")
        if llm is None:
            return None
        value = llm(obj)
        return value if isinstance(value, str) else None

    def describe(self, reference: str, budget: int = DEFAULT_BUDGET) -> ContextItem:
        """The object ``reference`` names (``df``, ``df.price``, ``Out[3]``), described."""
        from ...context._interpolate import resolve

        found, value = resolve(reference.lstrip("@"), self.shell.user_ns)
        if not found:
            raise InputError(f"{reference!r} is not defined in this notebook")
        return describe(value, reference.lstrip("@"), budget=budget, formatter=self.formatter)

    def attach(self, text: str, budget: int = DEFAULT_BUDGET) -> Attached:
        """The objects ``text`` mentions with ``@name``, described; unknown names apart."""
        mentions = resolve_mentions(text, self.shell.user_ns)
        items = tuple(
            describe(value, reference, budget=budget, formatter=self.formatter)
            for reference, value in mentions.found
        )
        return Attached(items, mentions.unresolved)

    def variable_names(self) -> list[str]:
        """The user's own variables (not IPython's, not modules, not ``_private``), in order."""
        hidden = set(getattr(self.shell, "user_ns_hidden", {})) | HIDDEN
        return [
            name
            for name, value in self.shell.user_ns.items()
            if type(name) is str and not name.startswith("_") and name not in hidden
            and not _is_module(value)
        ]

    def list_variables(self) -> str:
        """The user's variables, one a line: name, type and size (no values)."""
        namespace = self.shell.user_ns
        lines = [f"{name}: {kind_of(namespace[name])}" for name in self.variable_names()]
        return "\n".join(lines) or "The notebook defines no variables yet."

    def read_cell(self, number: int) -> str:
        """The source of input cell ``number`` (``In[number]``); negative counts from the end."""
        cells = self.shell.user_ns.get("In") or [""]
        try:
            return str(cells[number])
        except IndexError:
            raise InputError(
                f"there is no cell {number}; cells run so far: 1 to {len(cells) - 1}"
            ) from None

    def last_error(self, budget: int = DEFAULT_BUDGET) -> ContextItem | None:
        """The last exception, its traceback and the source of the cell that raised it."""
        error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if error is None:
            return None
        tb = getattr(sys, "last_traceback", None) or error.__traceback__
        trace = "".join(traceback.format_exception(type(error), error, tb)).rstrip()
        cell = self._cell_of(tb)
        text = f"{type(error).__name__}: {error}\n\ntraceback:\n{scrub(trace)[-6000:]}"
        if cell is not None:
            text += f"\n\nthe cell that raised it (In[{cell[0]}]):\n{fence(cell[1], 'python')}"
        item = cut_scrubbed(text, lambda whole: fit(whole, budget))
        return ContextItem("last_error", type(error).__name__, item)

    def failing_source(self) -> str | None:
        """The source of the input cell the last exception came from, if IPython knows it."""
        error = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if error is None:
            return None
        cell = self._cell_of(getattr(sys, "last_traceback", None) or error.__traceback__)
        return None if cell is None else cell[1]

    def _cell_of(self, tb: Any) -> tuple[int, str] | None:
        """(number, source) of the input cell a traceback passes through, if IPython knows it."""
        numbers = getattr(self.shell.compile, "_filename_map", {})
        cells = self.shell.user_ns.get("In") or []
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            number = numbers.get(filename)
            if isinstance(number, int) and 0 < number < len(cells):
                return number, cells[number]
            if isinstance(number, int):  # run without history (nbval): the cell's own lines
                lines = linecache.getlines(filename)
                if lines:
                    return number, "".join(lines)
            tb = tb.tb_next
        return None

    def last_figure(self) -> Any:
        """The open pyplot figure, else the newest Figure (or Axes' figure) in a variable."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and pyplot.get_fignums():
            return pyplot.gcf()
        figure_module = sys.modules.get("matplotlib.figure")
        if figure_module is None:
            return None
        figures = [
            value if isinstance(value, figure_module.Figure) else getattr(value, "figure", None)
            for value in self.shell.user_ns.values()
            if type(value).__module__.startswith("matplotlib.")
        ]
        figures = [f for f in figures if isinstance(f, figure_module.Figure)]
        return max(figures, key=lambda f: getattr(f, "number", 0) or 0, default=None)

    def run(self, code: str) -> RunResult:
        """Run ``code`` as a cell in the user's namespace; its output captured, not shown."""
        from IPython.utils.capture import capture_output

        shell = self.shell
        transformed = shell.transform_cell(code)
        try:
            tree = ast.parse(transformed)
        except SyntaxError as exc:
            return RunResult(code, error="".join(traceback.format_exception_only(exc)).rstrip())
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        filename = shell.compile.cache(transformed)
        value: Any = None
        error = None
        with capture_output(display=True) as captured:
            try:
                exec(shell.compile(tree, filename, "exec"), shell.user_global_ns, shell.user_ns)
                if last is not None:
                    expression = ast.Expression(last.value)
                    value = eval(
                        shell.compile(expression, filename, "eval"),
                        shell.user_global_ns,
                        shell.user_ns,
                    )
            except Exception as exc:  # the model is told what its code raised
                error = _format(exc)
        result = None if value is None else _repr(value)
        return RunResult(
            code, captured.stdout, captured.stderr, result, error, len(captured.outputs), captured
        )


def show_run(result: RunResult) -> None:
    """Show in the current cell the rich outputs (figures, tables) a run displayed.

    What it printed, returned or raised reaches the cell with the tool's result,
    wherever the turn is shown (the cell, the display below a clicked prompt).
    """
    if result.captured is not None:
        for output in result.captured.outputs:
            output.display()


def _for_model(text: str) -> str:
    """What a notebook tool returns to the model: no secrets, no tag of nbchat's blocks."""
    return neutralise(scrub_pieces(text))


def _format(exc: BaseException) -> str:
    """The traceback from the run code's first frame on (this module's frame left out)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    lines = traceback.format_exception(type(exc), exc, tb)
    return "".join(lines[:1] + lines[1:][-8:]).rstrip()


def _repr(value: object) -> str:
    """The value's repr, bounded: containers through reprlib (a huge list is slow to repr)."""
    from ...context._describers import short_repr

    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return short_repr(value)
    try:
        text = scrub(repr(value))  # before the cut, which would leave a secret unrecognised
    except Exception:  # a broken __repr__ is the value's problem, not the run's
        return short_repr(value)
    return text if len(text) <= 4000 else text[:4000] + " …"


def _is_module(value: object) -> bool:
    return issubclass(type(value), types.ModuleType)


def notebook_tools(
    shell: Any = None,
    *,
    approval: str = "always",
    on_run: Callable[[RunResult], None] | None = None,
    mode: Callable[[], str] = lambda: "ask",
    on_change: Callable[[dict[str, Any]], None] | None = None,
    notebook: str = "",
    on_plan: Callable[[int, str], None] | None = None,
) -> list[Any]:
    """Tools that let the model read this notebook and, after a yes, change and run it.

    The same tools, by name, arguments and text, that outside agents get (less
    ``path``): ``read_cells``, ``list_variables``, ``describe_variable``,
    ``read_cell(n)`` and ``last_error`` only read; ``insert_cell``,
    ``edit_cell``, ``delete_cell``, ``move_cell`` and ``execute_cell`` are
    proposals the person accepts, chunk by chunk, or rejects
    (:mod:`nbchat.context.cell_tools`), as ``mode()`` says (``ask``, ``plan``,
    ``accept-edits``); ``run_code(code)`` runs after the person's yes, unless
    the ``approval`` policy (``"always"`` ask, ``"risky"``: only code the
    allowlist proves harmless, ``"never-ask"``; capped by
    ``NBCHAT_MAX_APPROVAL``) lets it run. ``on_run(result)`` is called after
    each run (the magics show its output); ``on_change(change)`` after each
    change that landed (the magics keep it with its turn, for undo).
    In the ``plan`` mode only the reads and ``propose_plan`` are offered; the
    person approves the plan, then ``on_plan(thread, plan)`` moves the thread
    out of the plan mode (the magics save ``ask`` as its mode; without
    ``on_plan``, these tools leave the plan mode). ``notebook`` names the
    notebook file the tools read and change; by default the one this kernel's
    page holds, else its session's saved file.
    """
    from ...context.cell_tools import cell_tools
    from ...context.plan import ProposePlan
    from ._cells import LiveNotebook

    if on_plan is None:  # no thread to keep the approval with: these tools keep it
        mode, on_plan = _planned(mode)
    shell = _current_shell() if shell is None else shell
    reader = Notebook(shell)
    live = LiveNotebook(reader.run, on_run=on_run, file=notebook)
    live.attach()
    return [
        _read_cells_tool(live),
        _list_variables_tool(reader),
        _describe_tool(reader),
        _read_cell_tool(reader),
        _last_error_tool(reader),
        *cell_tools(live, mode=mode, on_change=on_change),
        _run_code_tool(reader, approval=approval, on_run=on_run, mode=mode),
        ProposePlan(mode, on_plan),
    ]


def _planned(mode: Callable[[], str]) -> tuple[Callable[[], str], Callable[[int, str], None]]:
    """``mode`` that reads ``ask`` instead of ``plan`` once a plan was approved, and the hook."""
    approved: list[str] = []

    def after_plan() -> str:
        wanted = mode()
        return "ask" if approved and wanted == "plan" else wanted

    def on_plan(thread: int, plan: str) -> None:
        approved.append(plan)

    return after_plan, on_plan


def _read_cells_tool(live: Any) -> Any:
    from ...context.cell_tools import CannotEdit
    from ...context.notebook import cells_text
    from ...tools import tool

    @tool
    def read_cells(start: int = 0, count: int = 20) -> str:
        """The notebook's cells in order: ids, sources, execution counts, outputs (bounded).

        Parameters
        ----------
        start
            The first cell's index.
        count
            How many cells (at most 50).
        """
        try:
            notebook = live.notebook()
        except CannotEdit as error:
            return f"No notebook to read: {error}. read_cell(n) reads the cells run so far."
        return cells_text(notebook, live.where(), start, min(int(count), 50),
                          more="read_cells(start={next})")  # fmt: skip

    return read_cells


def _current_shell() -> Any:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise InputError("notebook_tools() needs an IPython shell; call it in a notebook")
    return shell


def _list_variables_tool(notebook: Notebook) -> Any:
    from ...tools import tool

    @tool
    def list_variables() -> str:
        """List the variables defined in the user's notebook, with their types and sizes."""
        return _for_model(notebook.list_variables())

    return list_variables


def _describe_tool(notebook: Notebook) -> Any:
    from ...tools import tool

    @tool
    def describe_variable(name: str) -> str:
        """Describe a variable of the user's notebook: shape, types, a sample, a summary.

        Parameters
        ----------
        name
            The variable, or an attribute or item of one: df, df.price, Out[3].
        """
        return _for_model(notebook.describe(name).text)

    return describe_variable


def _read_cell_tool(notebook: Notebook) -> Any:
    from ...tools import tool

    @tool
    def read_cell(number: int) -> str:
        """Read the source of an input cell of the notebook, In[number]; -1 is the latest.

        Parameters
        ----------
        number
            The cell's execution number.
        """
        return _for_model(notebook.read_cell(number))

    return read_cell


def _last_error_tool(notebook: Notebook) -> Any:
    from ...tools import tool

    @tool
    def last_error() -> str:
        """The notebook's last exception: its traceback and the cell that raised it."""
        item = notebook.last_error()
        if item is None:
            return "No exception has happened in this session."
        return _for_model(item.text)

    return last_error


def _run_code_tool(
    notebook: Notebook, *, approval: str, on_run: Callable[[RunResult], None] | None,
    mode: Callable[[], str] = lambda: "ask",
) -> Any:
    """``run_code``, a client tool: the code runs after the person's yes (or the policy's);
    not offered in the ``plan`` mode, where the model only reads."""
    from ...context.cell_tools import effective_mode
    from ...context.run_code import RunCode

    def runner(code: str) -> RunResult:
        ran = notebook.run(code)
        if on_run is not None:
            on_run(ran)
        return ran

    shell = notebook.shell
    tool = RunCode(
        runner, approval=approval, namespace=shell.user_ns, transform=shell.transform_cell
    )
    tool.is_offered = lambda: effective_mode(mode()) != "plan"  # type: ignore[method-assign]
    return tool
