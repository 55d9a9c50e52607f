"""Client tools: calls the person at the notebook answers, checked on the way in and out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base._delimiters import block
from ..base.errors import (
    InputError,
    InvalidToolAnswer,
    ToolDefinitionError,
    ToolRequirementsNotMet,
)
from ..base.events import RanCode
from ..base.records import PendingCall
from ._arguments import invalid_arguments, schema_problem
from ._kernel import Arguments, Tool, _check_name

MAX_ANSWER_LENGTH = 2000


@dataclass(frozen=True)
class ToolContext:
    """Who is making or answering a client-tool call, and in whose thread."""

    user: str
    owner: str
    permissions: frozenset[str] = frozenset()
    thread_id: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.permissions, str):
            raise InputError(
                f"permissions must be a set of names, e.g. {{{self.permissions!r}}}, "
                f"not the string {self.permissions!r}"
            )
        object.__setattr__(self, "permissions", frozenset(self.permissions))


@dataclass(frozen=True)
class Requirement:
    """A permission the caller must hold for a call, and what the call targets."""

    permission: str
    target: str = ""


class ClientTool(Tool):
    """A tool whose output the person at the notebook produces.

    Subclasses set ``name``, ``description`` and ``parameters`` (a JSON schema
    of type object; draft 2020-12 unless it names another in ``$schema``) as
    class attributes, and override what they need. Every keyword of the schema
    is checked (``pattern``, ``const``, ``oneOf``, ``$ref``, ``format``…). The
    defaults ask for free text: :meth:`prompt` shows ``arguments["question"]``
    (or the description) with a text box, and :meth:`parse_response` accepts
    any non-blank text. The parsed arguments and the prompt dict must be JSON
    data: both are saved with the pending call.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "name", None) is not None:
            _check_client_tool(cls, f"ClientTool {cls.__qualname__}")

    acts_on_answer: bool = False
    """True when :meth:`get_tool_output` does something (runs code): the engine then
    calls it only after the answer is claimed, so it happens exactly once."""

    def call_requirements(self, arguments: dict[str, Any]) -> list[Requirement]:
        """What the caller must be allowed to do for this call; nothing by default."""
        return []

    def auto_response(self, arguments: dict[str, Any]) -> object | None:
        """An answer to give without asking the person (a policy allows it); None asks."""
        return None

    def shown_output(self, arguments: dict[str, Any], answer: object) -> str | RanCode:
        """What the person should see of what the answer did, once :meth:`output` ran.

        Empty by default. A tool that acts on its answer returns what that did:
        text, shown under the tool's line, or the :class:`~nbchat.base.events.RanCode`
        of code it ran, shown as the code (folded), its output, value and error.
        """
        return ""

    def check_requirements(self, context: ToolContext, arguments: dict[str, Any]) -> None:
        """Raise :class:`~nbchat.base.errors.ToolRequirementsNotMet` unless ``context`` may call.

        Only the thread's owner may answer, and they need every permission
        :meth:`call_requirements` names.
        """
        if context.user != context.owner:
            raise ToolRequirementsNotMet(
                f"user {context.user!r} cannot answer a call in a thread owned by "
                f"{context.owner!r}; only {context.owner!r} can answer it"
            )
        missing = [
            need
            for need in self.call_requirements(arguments)
            if need.permission not in context.permissions
        ]
        if missing:
            raise ToolRequirementsNotMet(_missing_message(self.name, context.user, missing))

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What a front end shows: ``{"kind": ..., "question": ...}``.

        ``"kind"`` is ``"text"``, ``"choice"``, ``"confirm"`` or ``"custom"``;
        ``"choice"`` prompts add ``"options"``; ``"text"`` prompts add
        ``"placeholder"``; any prompt may add ``"markdown"`` to render above it.
        """
        question = arguments.get("question") or self.description
        return {"kind": "text", "question": str(question), "placeholder": ""}

    def parse_response(self, arguments: dict[str, Any], response: object) -> object:
        """The person's answer, checked against the call; raise InvalidToolAnswer if unusable.

        The message of :class:`~nbchat.base.errors.InvalidToolAnswer` is shown to
        the person, who may answer again.
        """
        return _text_answer(response, MAX_ANSWER_LENGTH)

    def parse_answer(self, call: PendingCall, response: object) -> object:
        """The answer to the stored ``call``; by default :meth:`parse_response` of its arguments.

        A tool whose answer depends on what its prompt showed (a proposal's base text)
        reads ``call.prompt``. Raise :class:`~nbchat.base.errors.StaleProposal` with a
        new prompt to show the call again, changed, and leave it waiting.
        """
        return self.parse_response(call.arguments, response)

    def is_offered(self) -> bool:
        """Whether the model is offered this tool now (a mode may hide it); True by default."""
        return True

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        """The answer as the LLM reads it: str as is, anything else as JSON."""
        if isinstance(answer, str):
            return answer
        return json.dumps(answer, default=str, ensure_ascii=False)

    def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
        """Instructions for the LLM, sent with this answer only; empty for none."""
        return "The user gave this answer themselves; continue accordingly."

    def get_tool_output(self, arguments: dict[str, Any], answer: object) -> str:
        """The call's output: the answer, then the instructions, each in its own block.

        Exactly ``<answer>``, newline, :meth:`output`, newline, ``</answer>``,
        newline, ``<instructions>``, newline,
        :meth:`output_description_instructions`, newline, ``</instructions>``.
        The instructions block and the newline before it are left out when the
        instructions are empty. Neither text can close or open a block: the
        ``<`` of an ``answer``, ``instructions`` or ``context`` tag inside is
        written ``<\\`` (``</answer>`` as ``<\\/answer>``), whatever its case.
        """
        output = block("answer", self.output(arguments, answer))
        instructions = self.output_description_instructions(arguments, answer)
        if instructions:
            output += "\n" + block("instructions", instructions)
        return output


def _check_client_tool(tool: ClientTool | type[ClientTool], what: str) -> None:
    _check_name(getattr(tool, "name", None), what, "set one, e.g. name = 'pick_dataset'")
    description = getattr(tool, "description", None)
    if not isinstance(description, str) or not description.strip():
        raise ToolDefinitionError(
            f"{what} needs a description telling the LLM when to call it: set description = '...'"
        )
    parameters = getattr(tool, "parameters", None)
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ToolDefinitionError(
            f"{what} needs parameters = a JSON schema of type object, e.g. {{'type': "
            "'object', 'properties': {'question': {'type': 'string'}}, 'required': ['question']}"
        )
    # nbchat's own tools are checked by its tests: importing nbchat stays free of
    # jsonschema (loaded on the first check) until a tool is defined or called.
    own = getattr(tool, "__module__", "").startswith("nbchat.")
    problem = None if own else schema_problem(parameters)
    if problem is not None:
        raise ToolDefinitionError(
            f"{what} has parameters that are not a valid JSON schema: {problem}; fix the schema"
        )


def _missing_message(tool_name: str, user: str, missing: list[Requirement]) -> str:
    needs = [
        f"{need.permission!r}" + (f" on {need.target!r}" if need.target else "") for need in missing
    ]
    permissions = sorted({need.permission for need in missing})
    plural = len(needs) > 1
    return (
        f"tool {tool_name!r} needs permission{'s' if plural else ''} {', '.join(needs)}, "
        f"which user {user!r} does not have; grant {'them' if plural else 'it'} with "
        f"Chat(permissions={{{', '.join(map(repr, permissions))}}})"
    )


def _text_answer(response: object, max_length: int) -> str:
    if not isinstance(response, str):
        raise InvalidToolAnswer(f"the answer must be text, not {type(response).__name__}")
    text = response.strip()
    if not text:
        raise InvalidToolAnswer("the answer is empty; type an answer, then submit it")
    if len(text) > max_length:
        raise InvalidToolAnswer(
            f"the answer is {len(text)} characters long, over the limit of {max_length}; shorten it"
        )
    return text


# Kept short: every request that offers the built-ins carries these schemas.
_QUESTION = {"type": "string", "minLength": 1}


class _BuiltinTool(ClientTool):
    """The built-ins' argument check: no blank question or option."""

    def parse_arguments(self, arguments: Arguments) -> dict[str, Any]:
        values = super().parse_arguments(arguments)
        texts = [("question", values["question"])]
        texts += [(f"options[{i}]", text) for i, text in enumerate(values.get("options", ()))]
        for where, text in texts:
            if not text.strip():
                problem = f"{where!r} is blank; send text the user can read"
                raise invalid_arguments(self.name, self.parameters, [problem])
        return values


class AskUser(_BuiltinTool):
    """The built-in ``ask_user``: a question answered in free text (non-blank, stripped)."""

    name = "ask_user"
    description = "Ask the user one question only they can answer; wait for their reply."
    parameters = {
        "type": "object",
        "properties": {
            "question": dict(_QUESTION),
            "placeholder": {"type": "string", "description": "Example answer."},
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    max_length = MAX_ANSWER_LENGTH

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        placeholder = arguments.get("placeholder", "")
        return {"kind": "text", "question": arguments["question"], "placeholder": placeholder}

    def parse_response(self, arguments: dict[str, Any], response: object) -> str:
        return _text_answer(response, self.max_length)

    def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
        return "The user typed this answer themselves; use it and continue."


class Choose(_BuiltinTool):
    """The built-in ``choose``: one of 2 to 20 options offered by the LLM.

    The person answers with an offered option (surrounding spaces ignored) or
    its 1-based number, as an int or a string of digits. Text that is itself
    an option always means that option, so with options ``["2", "1"]`` the
    answer ``"1"`` is the option ``"1"``, and ``1`` (the int) is ``"2"``.
    """

    name = "choose"
    description = "Ask the user to pick one of a few options; wait for their choice."
    parameters = {
        "type": "object",
        "properties": {
            "question": dict(_QUESTION),
            "options": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 2,
                "maxItems": 20,
                "uniqueItems": True,
            },
        },
        "required": ["question", "options"],
        "additionalProperties": False,
    }

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        options = list(arguments["options"])
        return {"kind": "choice", "question": arguments["question"], "options": options}

    def parse_response(self, arguments: dict[str, Any], response: object) -> str:
        options: list[str] = list(arguments["options"])
        if isinstance(response, str) and response.strip() in options:
            return response.strip()
        number: object = response
        if isinstance(response, str) and response.strip().isdigit():
            number = int(response.strip())
        if isinstance(number, int) and not isinstance(number, bool) and 0 < number <= len(options):
            return options[number - 1]
        raise InvalidToolAnswer(
            f"{response!r} is not one of the options: {', '.join(options)}; "
            f"answer with one of them or its number, 1 to {len(options)}"
        )

    def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
        return "The user chose this option themselves; continue accordingly."


class Confirm(_BuiltinTool):
    """The built-in ``confirm``: yes or no (a bool, or yes/no/y/n/true/false in any case)."""

    name = "confirm"
    description = "Ask the user yes or no before you go ahead with something."
    parameters = {
        "type": "object",
        "properties": {"question": dict(_QUESTION)},
        "required": ["question"],
        "additionalProperties": False,
    }
    YES = frozenset({"yes", "y", "true"})
    NO = frozenset({"no", "n", "false"})

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "confirm", "question": arguments["question"]}

    def parse_response(self, arguments: dict[str, Any], response: object) -> bool:
        if isinstance(response, bool):
            return response
        word = response.strip().lower() if isinstance(response, str) else None
        if word in self.YES or word in self.NO:
            return word in self.YES
        raise InvalidToolAnswer(f"{response!r} is not a yes-or-no answer; answer yes or no")

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        return "yes" if answer else "no"

    def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
        if answer:
            return "The user confirmed this themselves; go ahead."
        return (
            "The user declined; do not go ahead with it. Ask what they would like "
            "instead, or continue without it."
        )


BUILTIN_CLIENT_TOOLS: tuple[ClientTool, ...] = (AskUser(), Choose(), Confirm())
