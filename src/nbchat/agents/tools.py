"""The client tools that answer an outside agent's gated calls, in the notebook's kernel.

They are never offered to a model: a Chat holds them as ``answering`` tools,
so the person's Run, Edit or Reject on an agent's call is checked and claimed
exactly like an answer to nbchat's own ``run_code`` (the same decision words,
the same code view, hidden characters refused outside strings); an edit is
also a proposal, its diff's chunks accepted as for nbchat's own model
(``accept``, ``accept 1 3``). What acting
on the answer does is up to callables the Jupyter layer supplies:

- ``agent_run_code`` runs the code as ``run_code`` does, through the runner;
- ``agent_insert_cell``, ``agent_edit_cell``, ``agent_delete_cell``,
  ``agent_move_cell`` and ``agent_execute_cell`` ask the notebook's front end
  to make the change (``apply``), which answers
  later: the call's output is then :data:`ACTING_OUTPUT` until ``apply``'s
  callback gives the result (:meth:`AgentGate.complete`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..base._secrets import scrub
from ..base.errors import InvalidToolAnswer
from ..context.run_code import CodeDecision, RunCode, Runner
from ..engine._pending import ACTING_OUTPUT
from .gate import TOOL_PREFIX

Apply = Callable[[str, dict[str, Any], CodeDecision], None]
"""``apply(op, arguments, decision)``: make the change in the notebook; the result comes later."""

_COMMON = {
    "code": {"type": "string", "description": "What runs or goes into the cell."},
    "why": {"type": "string"},
    "notebook": {"type": "string"},
    "handle": {"type": "string"},
}
_CELL = {
    "cell_id": {"type": "string"},
    "saved": {"type": "string", "description": "The cell's source as saved, as shown."},
    "index": {"type": ["integer", "null"]},
    "cell_type": {"enum": ["code", "markdown"]},
}


def _schema(*extra: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = dict(_COMMON)
    for more in extra:
        properties.update(more)
    return {"type": "object", "properties": properties, "required": ["code", "notebook"],
            "additionalProperties": False}  # fmt: skip


class AgentRunCode(RunCode):
    """An outside agent's ``run_code``: runs in this kernel after the person's yes."""

    name = TOOL_PREFIX + "run_code"
    description = "Run an outside agent's code in this notebook's kernel, after a yes."
    parameters = _schema()

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner, approval="always")

    def auto_response(self, arguments: dict[str, Any]) -> str | None:
        return None  # an agent's side effects always ask

    def get_tool_output(self, arguments: dict[str, Any], answer: object) -> str:
        """The result as the agent reads it through ``call_status`` (no model reads it here)."""
        return self.output(arguments, answer)


class AgentCellChange(AgentRunCode):
    """An outside agent's change to a cell (insert, edit, execute), made after a yes."""

    description = "Change a cell of this notebook for an outside agent, after a yes."
    parameters = _schema(_CELL)

    def __init__(self, op: str, apply: Apply) -> None:
        super().__init__(lambda code: "")
        self.op = op
        self.name = TOOL_PREFIX + f"{op}_cell"
        self.apply = apply

    def parse_response(self, arguments: dict[str, Any], response: object) -> CodeDecision:
        """Run, Edit, Reject as for code; and a proposal's answers: accept, accept 1 3."""
        word = response.get("action") if isinstance(response, dict) else response
        if isinstance(word, str) and word.strip().lower().startswith("accept"):
            return self._accepted(arguments, response)
        decision = super().parse_response(arguments, response)
        if decision.action == "edit" and self.op in ("delete", "move"):
            raise InvalidToolAnswer(f"a {self.op} cannot be edited; answer run or reject")
        return decision

    def _accepted(self, arguments: dict[str, Any], response: object) -> CodeDecision:
        """The chunks accepted of an edit (all, for any other change), landed on the saved text."""
        from ..context.cell_tools import chunk_numbers
        from ..context.proposals import apply, chunks

        code, saved = str(arguments["code"]), arguments.get("saved")
        if self.op != "edit" or not isinstance(saved, str):
            return CodeDecision("run", code)
        count = len(chunks(saved, code))
        wanted = chunk_numbers(response, count)
        if wanted is None or wanted == set(range(1, count + 1)):
            return CodeDecision("run", code)
        return CodeDecision("edit", apply(saved, code, wanted), chunks=tuple(sorted(wanted)),
                            of=count)  # fmt: skip

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        decision = answer if isinstance(answer, CodeDecision) else CodeDecision("reject")
        if decision.action == "reject":
            why = f" Their reason: {decision.reason}" if decision.reason else ""
            return scrub(f"The person rejected this; nothing was changed.{why}")
        self.apply(self.op, arguments, decision)
        return ACTING_OUTPUT


class AgentRead(AgentRunCode):
    """An outside agent's read that asks first; Run reads, Reject does not (nothing to edit)."""

    name = TOOL_PREFIX + "read"
    description = "Read this notebook for an outside agent, after a yes."
    parameters = _schema({
        "read": {"enum": ["read_cells", "list_variables", "describe_variable"]},
        "name": {"type": "string"}, "start": {"type": "integer"}, "count": {"type": "integer"},
    })  # fmt: skip

    def __init__(self, reader: Callable[[dict[str, Any]], str]) -> None:
        super().__init__(lambda code: "")
        self.reader = reader

    def parse_response(self, arguments: dict[str, Any], response: object) -> CodeDecision:
        decision = super().parse_response(arguments, response)
        if decision.action == "edit":
            raise InvalidToolAnswer("a read cannot be edited; answer run or reject")
        return decision

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        decision = answer if isinstance(answer, CodeDecision) else CodeDecision("reject")
        if decision.action == "reject":
            why = f" Their reason: {decision.reason}" if decision.reason else ""
            return scrub(f"The person rejected this read; nothing was read.{why}")
        return scrub(self.reader(arguments))


def answering_tools(
    runner: Runner, apply: Apply, reader: Callable[[dict[str, Any]], str] | None = None
) -> list[RunCode]:
    """The tools that answer every kind of gated agent call in one kernel."""
    ops = ("insert", "edit", "execute", "delete", "move")
    tools: list[RunCode] = [AgentRunCode(runner), *(AgentCellChange(op, apply) for op in ops)]
    if reader is not None:
        tools.append(AgentRead(reader))
    return tools
