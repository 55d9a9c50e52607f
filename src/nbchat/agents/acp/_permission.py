"""An agent's ``session/request_permission`` as a call waiting for the person, answered once.

The request becomes a :class:`~nbchat.base.records.PendingCall` of the tool
``acp_permission`` in the agent's thread, so it is kept in the store, shown
where every waiting call is shown (the cell, the panel, ``%chat --answer``)
and claimed once. The person answers with a *kind* — allow once, allow
always, reject, reject always — never an adapter's option id: adapters name
their options differently (``allow``, ``approved``, ``proceed_once``) but all
mark them with these kinds. "Always" is kept per agent and tool kind, and
only where the administrator's ``NBCHAT_MAX_APPROVAL`` lets anything run
unasked; under the cap ``always`` it is taken as "allow once".
"""

from __future__ import annotations

from typing import Any

from ...base import markup
from ...base.errors import InvalidToolAnswer
from ...base.policy import effective_approval
from ...tools import ClientTool

TOOL = "acp_permission"
KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")
LABELS = {"allow_once": "Allow once", "allow_always": "Allow always",
          "reject_once": "Reject", "reject_always": "Reject always"}  # fmt: skip
WORDS = {
    "allow": "allow_once", "allow once": "allow_once", "yes": "allow_once", "run": "allow_once",
    "always": "allow_always", "allow always": "allow_always",
    "reject": "reject_once", "no": "reject_once", "deny": "reject_once",
    "reject always": "reject_always", "never": "reject_always",
}  # fmt: skip
REMEMBERED = ("read", "edit", "delete", "move", "search", "execute", "fetch")  # never "other"


def _schema() -> dict[str, Any]:
    option = {"type": "object", "properties": {
        "id": {"type": "string", "maxLength": 200}, "name": {"type": "string", "maxLength": 200},
        "kind": {"enum": list(KINDS)}}, "required": ["id", "kind"]}  # fmt: skip
    return {
        "type": "object",
        "properties": {
            "agent": {"type": "string", "maxLength": 100},
            "session": {"type": "string", "maxLength": 200},
            "tool_kind": {"type": "string", "maxLength": 40},
            "title": {"type": "string"},
            "shown": {"type": "string"},
            "options": {"type": "array", "items": option, "minItems": 1, "maxItems": 20},
        },
        "required": ["agent", "options"],
    }


class AcpPermission(ClientTool):
    """A hosted agent asks before it acts: the person allows or rejects, by the option's kind."""

    name = TOOL
    description = "A coding agent asks before it acts; the person allows or rejects it."
    parameters = _schema()

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        offered = _kinds(arguments)
        return {
            "kind": "choice",
            "question": f"{arguments['agent']} asks to {arguments.get('tool_kind') or 'act'}: "
                        f"{arguments.get('title') or 'a tool'}",
            "options": [LABELS[kind] for kind in KINDS if kind in offered],
            "markdown": _request_markdown(arguments),
            "detail": str(arguments.get("shown") or ""),  # for text front ends
        }

    def parse_response(self, arguments: dict[str, Any], response: object) -> str:
        """The option chosen, as its label says it ("allow once", "reject"…): a label, a kind,
        a word (allow, reject…) or a number was given."""
        offered = [kind for kind in KINDS if kind in _kinds(arguments)]
        word = response.get("kind") if isinstance(response, dict) else response
        text = " ".join(str(word).strip().lower().replace("_", " ").split())
        kind = next((k for k in offered if text in (LABELS[k].lower(), k.replace("_", " "))),
                    WORDS.get(text))  # fmt: skip
        if text.isdigit() and 0 < int(text) <= len(offered):
            kind = offered[int(text) - 1]
        if kind == "allow_always" and effective_approval("never-ask") == "always":
            kind = "allow_once"  # the administrator's cap: nothing is allowed for good
        if kind not in offered:
            choices = ", ".join(LABELS[k].lower() for k in offered)
            raise InvalidToolAnswer(f"{str(response)[:40]!r} is not one of this agent's "
                                    f"options; answer {choices}")  # fmt: skip
        return LABELS[kind].lower()

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        return str(answer)

    def get_tool_output(self, arguments: dict[str, Any], answer: object) -> str:
        return self.output(arguments, answer)  # the agent reads the option, not instructions


def kind_of(answer: str) -> str:
    """The option's kind an answer names (``allow once`` is ``allow_once``)."""
    return next((kind for kind, label in LABELS.items() if label.lower() == answer), answer)


def option_for(arguments: dict[str, Any], answer: str) -> str:
    """The adapter's option id of the kind ``answer`` names: what ``session/request_permission``
    is answered with."""
    kind = kind_of(answer)
    return next(str(o["id"]) for o in arguments["options"] if o["kind"] == kind)


def is_remembered(tool_kind: str | None) -> bool:
    """Whether "always" may be kept for a tool of ``tool_kind`` (never for an unknown kind)."""
    return tool_kind in REMEMBERED and effective_approval("never-ask") != "always"


def _kinds(arguments: dict[str, Any]) -> set[str]:
    return {str(option["kind"]) for option in arguments["options"]}


def _request_markdown(arguments: dict[str, Any]) -> str:
    """What the request carries, as Markdown in which the agent's text is only text."""
    parts = [f"**{markup.escape_inline(str(arguments['agent']))}** asks to "
             f"*{markup.escape_inline(str(arguments.get('tool_kind') or 'use a tool'))}*: "
             f"{markup.escape_inline(str(arguments.get('title') or ''))}"]  # fmt: skip
    shown = str(arguments.get("shown") or "")
    if shown:
        parts.append(markup.fence(shown, "diff" if shown.startswith("--- ") else "text"))
    return "\n\n".join(parts)
