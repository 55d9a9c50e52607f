"""The plan mode's one tool: the model proposes a numbered plan, the person approves it first.

In the ``plan`` mode no tool that changes the notebook is offered; ``propose_plan``
is, and only there. Its call is a pending call like any proposal: the person
approves the plan (as written, or as they edited it) or rejects it. An approval
takes the thread out of the plan mode, into ``ask`` (every change still asks),
and the model is told to carry out the approved plan; the change tools are
offered from its next request on. A rejection leaves the thread in the plan
mode, with the person's reason for the model.

Answers: ``approve`` (``yes``, ``accept``), ``approve: EDITED PLAN`` (or
``{"action": "approve", "plan": "..."}``), ``reject``, ``reject: why``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..base._secrets import scrub
from ..base._visible import escape_hidden
from ..base.errors import InvalidToolAnswer
from ..base.records import PendingCall
from ..tools import ClientTool
from .cell_tools import effective_mode

__all__ = ["PLAN_TOOL", "ProposePlan", "numbered"]

PLAN_TOOL = "propose_plan"
MAX_STEPS = 40
MAX_PLAN = 20_000  # characters of a plan, as the model writes it or the person edits it
_APPROVE = frozenset({"approve", "approved", "yes", "y", "ok", "accept", "true"})
_REJECT = frozenset({"reject", "no", "n", "false"})
_WORD = re.compile(r"^\s*(approve|accept|reject)\b\s*:?\s*", re.IGNORECASE)
_HOW = ("answer approve (the plan as it is), approve: followed by the plan as you want it, "
        "or reject (optionally 'reject: why')")  # fmt: skip


def numbered(steps: list[str]) -> str:
    """The steps as the person reads them: ``1. …`` a line each, blank steps left out."""
    kept = [" ".join(str(step).split()) for step in steps if str(step).strip()]
    return "\n".join(f"{n}. {step}" for n, step in enumerate(kept, 1))


class ProposePlan(ClientTool):
    """``propose_plan(steps, why)``: offered only in the plan mode; approved before any edit."""

    name = PLAN_TOOL
    description = (
        "Propose a numbered plan of the changes you would make to the notebook. In the plan "
        "mode this is the only way forward: the person approves (or edits) the plan, and only "
        "then are the tools that change the notebook offered."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "steps": {"type": "array", "minItems": 1, "maxItems": MAX_STEPS,
                      "items": {"type": "string", "maxLength": 2000},
                      "description": "The steps, in order, one sentence each."},
            "why": {"type": "string", "description": "One sentence: what the plan is for."},
        },
        "required": ["steps"],
        "additionalProperties": False,
    }  # fmt: skip
    acts_on_answer = True

    def __init__(self, mode: Callable[[], str],
                 on_approve: Callable[[int, str], None] | None = None) -> None:  # fmt: skip
        self.mode, self.on_approve = mode, on_approve

    def is_offered(self) -> bool:
        """Only in the plan mode."""
        return effective_mode(self.mode()) == "plan"

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The numbered plan, to approve, edit or reject."""
        plan = scrub(numbered(list(arguments.get("steps") or [])))
        why = scrub(str(arguments.get("why") or "").strip())[:500] or "The model proposes a plan."
        return {"kind": "choice", "question": why, "options": ["Approve", "Reject"],
                "markdown": "**The plan** (nothing changes until you approve it):\n\n"
                            + escape_hidden(plan),
                "view": "plan", "plan": plan}  # fmt: skip

    def parse_answer(self, call: PendingCall, response: object) -> dict[str, Any]:
        """The decision, with the plan approved (the shown one unless the person edited it)."""
        action, edited, reason = _decision(response)
        decision: dict[str, Any] = {"action": action, "thread": call.thread_id,
                                    "reason": reason}  # fmt: skip
        if action == "approve":
            shown = str(call.prompt.extra.get("plan") or numbered(call.arguments.get("steps", [])))
            decision.update(plan=edited if edited is not None else shown,
                            edited=edited is not None and edited != shown)  # fmt: skip
        return decision

    def parse_response(self, arguments: dict[str, Any], response: object) -> dict[str, Any]:
        action, edited, reason = _decision(response)
        plan = edited if edited is not None else numbered(list(arguments.get("steps") or []))
        return {"action": action, "reason": reason, **({"plan": plan} if action == "approve"
                                                       else {})}  # fmt: skip

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        decision: dict[str, Any] = answer if isinstance(answer, dict) else {"action": "reject"}
        if decision.get("action") != "approve":
            why = f" Their reason: {decision['reason']}" if decision.get("reason") else ""
            return scrub(f"The person rejected the plan; the thread stays in the plan mode and "
                         f"nothing was changed.{why}")  # fmt: skip
        thread = decision.get("thread")
        if self.on_approve is not None and isinstance(thread, int):
            self.on_approve(thread, str(decision["plan"]))
        edited = " as they edited it" if decision.get("edited") else ""
        return scrub(f"The person approved the plan{edited}:\n{decision['plan']}\n\nThe thread "
                     "is now in the ask mode: the tools that change the notebook are offered, "
                     "and each change is still a proposal the person answers.")  # fmt: skip

    def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
        if isinstance(answer, dict) and answer.get("action") == "approve":
            return "Carry out the approved plan, step by step, and nothing beyond it."
        return "Do not propose the same plan again; ask the person what they want instead."


def _decision(response: object) -> tuple[str, str | None, str]:
    """(approve or reject, the edited plan or None, the reason) from an answer."""
    if isinstance(response, bool):
        return ("approve" if response else "reject"), None, ""
    if isinstance(response, dict):
        action = str(response.get("action", "")).lower()
        if action in ("approve", "accept"):
            plan = response.get("plan")
            return "approve", None if plan is None else _plan(plan), ""
        if action == "reject":
            return "reject", None, str(response.get("reason") or "").strip()[:500]
        raise InvalidToolAnswer(f"unknown action {action[:20]!r}; {_HOW}")
    if not isinstance(response, str):
        raise InvalidToolAnswer(_HOW)
    word = " ".join(response.lower().split())
    if word in _APPROVE:
        return "approve", None, ""
    if word in _REJECT:
        return "reject", None, ""
    match = _WORD.match(response)
    if match is None:
        raise InvalidToolAnswer(f"{response[:40]!r} is not an answer to a plan; {_HOW}")
    rest = response[match.end():]
    if match.group(1).lower() == "reject":
        return "reject", None, rest.strip()[:500]
    return "approve", _plan(rest), ""


def _plan(text: object) -> str:
    plan = str(text).strip()
    if not plan:
        raise InvalidToolAnswer(f"the edited plan is empty; {_HOW}")
    if len(plan) > MAX_PLAN:
        raise InvalidToolAnswer(f"the edited plan has {len(plan):,} characters; keep it under "
                                f"{MAX_PLAN:,}")  # fmt: skip
    return plan
