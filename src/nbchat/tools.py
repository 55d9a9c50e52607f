"""Tools the LLM may call: kernel tools (``@tool``) and client tools (``ClientTool``).

A **kernel tool** is a Python function that runs in the kernel when the LLM
calls it; :func:`tool` builds its schema from the type hints and docstring. A
**client tool** is answered by the person at the notebook: the turn suspends,
a prompt appears, and the checked answer becomes the call's output. Three are
built in (:data:`BUILTIN_CLIENT_TOOLS`): ``ask_user`` (free text), ``choose``
(one of several options) and ``confirm`` (yes or no).

A client tool call goes: ``parse_arguments`` (what the LLM sent; errors go to
the LLM) → ``check_requirements`` → ``prompt`` (what the front end shows) →
the person answers → ``check_requirements`` again → ``parse_response`` (errors
go to the person, the call stays pending) → ``get_tool_output`` (what the LLM
reads). A custom client tool that asks for a rating from 1 to 5, which only
people granted the ``rate`` permission may give:

>>> from nbchat.tools import ClientTool, Requirement, ToolContext
>>> from nbchat.errors import InvalidToolAnswer
>>> class Rate(ClientTool):
...     name = "rate"
...     description = "Ask the user to rate something from 1 (poor) to 5 (excellent)."
...     parameters = {
...         "type": "object",
...         "properties": {"subject": {"type": "string", "description": "what to rate"}},
...         "required": ["subject"],
...         "additionalProperties": False,
...     }
...
...     def call_requirements(self, arguments):
...         return [Requirement("rate", target=arguments["subject"])]
...
...     def prompt(self, arguments):
...         question = f"How good is {arguments['subject']}?"
...         return {"kind": "choice", "question": question, "options": ["1", "2", "3", "4", "5"]}
...
...     def parse_response(self, arguments, response):
...         if str(response).strip() not in ("1", "2", "3", "4", "5"):
...             raise InvalidToolAnswer(f"{response!r} is not a rating; answer 1, 2, 3, 4 or 5")
...         return int(response)
...
...     def output_description_instructions(self, arguments, answer):
...         return "The user gave this rating themselves: 1 is poor, 5 is excellent."
>>> rate = Rate()
>>> rate.parse_arguments('{"topic": "the summary"}')  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
nbchat.errors.InvalidToolArguments: invalid arguments for tool 'rate': missing required ...
>>> arguments = rate.parse_arguments('{"subject": "the summary"}')
>>> rate.check_requirements(ToolContext("ana", "ana", frozenset({"rate"})), arguments)
>>> rate.check_requirements(ToolContext("ana", "ana"), arguments)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
nbchat.errors.ToolRequirementsNotMet: tool 'rate' needs permission 'rate' on 'the summary', ...
>>> rate.parse_response(arguments, "six")
Traceback (most recent call last):
  ...
nbchat.errors.InvalidToolAnswer: 'six' is not a rating; answer 1, 2, 3, 4 or 5
>>> print(rate.get_tool_output(arguments, rate.parse_response(arguments, " 4 ")))
<answer>
4
</answer>
<instructions>
The user gave this rating themselves: 1 is poor, 5 is excellent.
</instructions>
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

from ._arguments import invalid_arguments, load_arguments, schema_problem
from ._delimiters import block
from ._schema import function_schema
from .errors import (
    InputError,
    InvalidToolAnswer,
    ToolDefinitionError,
    ToolError,
    ToolRequirementsNotMet,
)
from .events import RanCode

Arguments = str | Mapping[str, Any]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_ANSWER_LENGTH = 2000
"""The longest free-text answer, in characters, after stripping."""


def _check_name(name: object, what: str, fix: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolDefinitionError(
            f"{what}: {name!r} is not a valid tool name (1 to 64 letters, digits, '_' or '-'); "
            f"{fix}"
        )
    return name


class Tool:
    """What the chat engine needs of any tool: its name, description and parameters schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI ``tools`` format (a copy: changing it changes nothing here)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def parse_arguments(self, arguments: Arguments) -> dict[str, Any]:
        """Check the LLM's arguments (JSON text or a dict) against :attr:`parameters`.

        Raises :class:`~nbchat.errors.InvalidToolArguments`, whose message is
        written for the LLM: every problem found, then the parameters to send.
        """
        return load_arguments(self.name, self.parameters, arguments)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


# ---------------------------------------------------------------- kernel tools


class KernelTool(Tool):
    """A Python function the LLM may call; it runs in the kernel. Made by :func:`tool`.

    Calling the tool calls the function, so a decorated function keeps working
    as before. :meth:`parse_arguments` returns Python values: Enum members,
    tuples and floats where the hints ask for them.
    """

    func: Callable[..., Any]

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if isinstance(func, KernelTool):
            func = func.func
        if not callable(func):
            raise ToolDefinitionError(f"{func!r} is not a function; @tool decorates functions")
        label = f"{func.__name__}()" if hasattr(func, "__name__") else repr(func)
        if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
            raise ToolDefinitionError(
                f"cannot make a tool of {label}: async functions are not supported; "
                "write a plain def (run the coroutine inside it if you must)"
            )
        self.func = func
        self.name = _check_name(
            getattr(func, "__name__", None) if name is None else name,
            f"cannot make a tool of {label}",
            "pass one, e.g. @tool(name='lookup_city')",
        )
        self.description, self.parameters, self._converters = function_schema(
            func, label, description
        )
        self._positional_only = [
            param
            for param in inspect.signature(func).parameters.values()
            if param.kind is param.POSITIONAL_ONLY
        ]
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def parse_arguments(self, arguments: Arguments) -> dict[str, Any]:
        values = super().parse_arguments(arguments)
        return {key: self._converters[key](value) for key, value in values.items()}

    def run(self, arguments: Arguments) -> str:
        """Check the arguments, call the function and return its result as text.

        A str result is returned as it is, anything else as JSON (``str()`` for
        what JSON cannot hold). Exceptions raised by the function propagate.
        """
        values = self.parse_arguments(arguments)
        positional = [values.pop(param.name, param.default) for param in self._positional_only]
        result = self.func(*positional, **values)
        if isinstance(result, str):
            return result
        return json.dumps(result, default=str, ensure_ascii=False)


@overload
def tool(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> KernelTool: ...


@overload
def tool(
    func: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], KernelTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> KernelTool | Callable[[Callable[..., Any]], KernelTool]:
    """Make a Python function a tool the LLM may call; use as ``@tool`` or ``@tool(name=...)``.

    Parameters
    ----------
    func
        The function. Its type hints give the schema: str, int, float, bool,
        None, ``list[X]``, ``tuple[X, Y]``, ``dict[str, X]``, ``Literal[...]``,
        Enum subclasses, ``X | None``, ``Annotated[X, "description"]`` and
        ``Any``. A parameter without a hint takes the type of its default
        when that is a str, int, float or bool, and is a string otherwise.
        Parameters with defaults are optional.
    name
        The name the LLM sees; the function's name by default.
    description
        What the LLM is told the tool does; the docstring's first paragraph by
        default. Parameter descriptions come from the docstring's numpydoc
        ``Parameters`` or Google ``Args:`` section.

    Raises
    ------
    ToolDefinitionError
        For ``*args``, ``**kwargs``, positional-only parameters without a hint,
        hints JSON cannot carry, async functions and names the LLM API refuses.
    """
    if func is None:
        return functools.partial(KernelTool, name=name, description=description)
    return KernelTool(func, name=name, description=description)


# ---------------------------------------------------------------- client tools


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
        text, shown under the tool's line, or the :class:`~nbchat.events.RanCode`
        of code it ran, shown as the code (folded), its output, value and error.
        """
        return ""

    def check_requirements(self, context: ToolContext, arguments: dict[str, Any]) -> None:
        """Raise :class:`~nbchat.errors.ToolRequirementsNotMet` unless ``context`` may call.

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

        The message of :class:`~nbchat.errors.InvalidToolAnswer` is shown to
        the person, who may answer again.
        """
        return _text_answer(response, MAX_ANSWER_LENGTH)

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
"""The default instances of the built-in client tools: ask_user, choose, confirm."""


# ---------------------------------------------------------------- registry


class Toolbox:
    """The tools offered to the LLM in a turn, by name.

    Built from tools (``KernelTool``, ``ClientTool`` instances or subclasses)
    and plain functions, which are wrapped with :func:`tool`.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            made = _as_tool(item)
            if made.name in self._tools:
                raise ToolDefinitionError(
                    f"two tools are named {made.name!r}; rename one: "
                    f"@tool(name='{made.name}_2') for a function, the name attribute "
                    "for a ClientTool"
                )
            self._tools[made.name] = made

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names, in the order given."""
        return tuple(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool in OpenAI ``tools`` format, in order."""
        return [item.schema() for item in self._tools.values()]

    def get(self, name: str) -> Tool:
        """The tool called ``name``; :class:`~nbchat.errors.ToolError` (for the LLM) if none is."""
        try:
            return self._tools[name]
        except KeyError:
            offered = ", ".join(self._tools) or "none"
            raise ToolError(
                f"the model called an unknown tool {name!r}; offered: {offered}"
            ) from None

    def client_tool(self, name: str) -> ClientTool:
        """The client tool called ``name``, to answer a pending call; ToolError for the person."""
        found = self._tools.get(name)
        if not isinstance(found, ClientTool):
            offered = [key for key, item in self._tools.items() if isinstance(item, ClientTool)]
            raise ToolError(
                f"no client tool named {name!r} is offered here (client tools: "
                f"{', '.join(offered) or 'none'}); include it in Chat(tools=[...]) "
                "to answer the call"
            )
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolbox({list(self._tools)!r})"


def _as_tool(item: object) -> Tool:
    if isinstance(item, type) and issubclass(item, ClientTool):
        item = item()
    if isinstance(item, ClientTool):
        _check_client_tool(item, f"client tool {item!r}")
    if isinstance(item, Tool):
        return item
    if callable(item):
        return tool(item)
    raise ToolDefinitionError(
        f"{item!r} is not a tool; pass functions, @tool functions or ClientTool instances"
    )
