"""Kernel tools (@tool), client tools (ClientTool), the built-ins and Toolbox."""

import doctest
import enum
import functools
import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest

import nbchat.tools
from nbchat.base.errors import (
    InputError,
    InvalidToolAnswer,
    InvalidToolArguments,
    ToolDefinitionError,
    ToolError,
    ToolRequirementsNotMet,
)
from nbchat.tools import (
    BUILTIN_CLIENT_TOOLS,
    AskUser,
    Choose,
    ClientTool,
    Confirm,
    KernelTool,
    Requirement,
    Tool,
    Toolbox,
    ToolContext,
    tool,
)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


def params(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def only_param(hint: Any) -> dict[str, Any]:
    """The schema @tool makes for one required parameter of type ``hint``."""

    def f(x):
        return x

    f.__annotations__ = {"x": hint}
    return tool(f).parameters["properties"]["x"]


# ---------------------------------------------------------------- schema from hints


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list, {"type": "array"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (
            list[list[str]],
            {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
        ),
        (tuple, {"type": "array"}),
        (tuple[float, ...], {"type": "array", "items": {"type": "number"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (dict, {"type": "object"}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Color, {"type": "string", "enum": ["red", "green"]}),
        (Level, {"type": "integer", "enum": [1, 2]}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # noqa: UP007
        (
            list[Color] | None,
            {
                "anyOf": [
                    {"type": "array", "items": {"type": "string", "enum": ["red", "green"]}},
                    {"type": "null"},
                ]
            },
        ),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
    ],
)
def test_schema_of_each_supported_hint(hint: Any, schema: dict[str, Any]) -> None:
    assert only_param(hint) == schema


_SENTINEL = object()


def test_tool_schema_with_defaults_and_numpydoc() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        color: Color = Color.RED,
        tags: tuple[str, ...] = ("a",),
        since: float | None = None,
        marker: Any = _SENTINEL,
    ) -> list[str]:
        """Search the notes
        for a phrase.

        Matches are case-insensitive.

        Parameters
        ----------
        query : str
            What to look for,
            in words.
        limit, color
            Shared text.

        Returns
        -------
        list of str
            Not a parameter.
        """
        return []

    assert search.schema() == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the notes for a phrase.",
            "parameters": params(
                {
                    "query": {"type": "string", "description": "What to look for, in words."},
                    "limit": {"type": "integer", "default": 10, "description": "Shared text."},
                    "color": {
                        "type": "string",
                        "enum": ["red", "green"],
                        "default": "red",
                        "description": "Shared text.",
                    },
                    "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]},
                    "since": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
                    "marker": {},
                },
                ["query"],
            ),
        },
    }


def test_unhinted_parameters_take_the_type_of_their_default_else_string() -> None:
    def f(a, b=2, c=2.5, d=True, e="x", f=None, g=[1]):  # noqa: B006
        """Mixed."""

    assert tool(f).parameters == params(
        {
            "a": {"type": "string"},
            "b": {"type": "integer", "default": 2},
            "c": {"type": "number", "default": 2.5},
            "d": {"type": "boolean", "default": True},
            "e": {"type": "string", "default": "x"},
            "f": {"type": "string", "default": None},
            "g": {"type": "string", "default": [1]},
        },
        ["a"],
    )


def test_google_docstring() -> None:
    @tool
    def convert(amount: float, currency: str = "EUR") -> str:
        """Convert an amount of money.

        Args:
            amount (float): How much,
                in US dollars.
            currency: The target currency:
                an ISO code.

        Returns:
            str: the converted amount.
        """
        return ""

    assert convert.description == "Convert an amount of money."
    assert convert.parameters == params(
        {
            "amount": {"type": "number", "description": "How much, in US dollars."},
            "currency": {
                "type": "string",
                "default": "EUR",
                "description": "The target currency: an ISO code.",
            },
        },
        ["amount"],
    )


def test_annotated_description_wins_over_docstring() -> None:
    @tool
    def f(x: Annotated[int, "from the hint"]) -> None:
        """F.

        Args:
            x: from the docstring
        """

    assert f.parameters["properties"]["x"] == {"type": "integer", "description": "from the hint"}


def test_string_annotations_are_resolved() -> None:
    def f(color: "Color", n: "int | None" = None) -> None:
        """F."""

    assert tool(f).parameters == params(
        {
            "color": {"type": "string", "enum": ["red", "green"]},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        ["color"],
    )


def test_name_and_description_override_and_no_docstring() -> None:
    def f() -> None:
        pass

    assert tool(f).schema() == {
        "type": "function",
        "function": {"name": "f", "description": "", "parameters": params({}, [])},
    }
    made = tool(name="g", description="Does g.")(f)
    assert (made.name, made.description) == ("g", "Does g.")


def test_schema_returns_a_copy() -> None:
    @tool
    def f(x: int) -> None:
        """F."""

    f.schema()["function"]["parameters"]["properties"]["x"]["type"] = "string"
    assert f.parameters["properties"]["x"] == {"type": "integer"}


def test_partial_and_positional_only_with_hint() -> None:
    def add(a: int, /, b: int = 2, *, c: int = 3) -> list[int]:
        """Add."""
        return [a, b, c]

    made = tool(functools.partial(add, b=7), name="add7")
    assert made.parameters == params(
        {
            "a": {"type": "integer"},
            "b": {"type": "integer", "default": 7},
            "c": {"type": "integer", "default": 3},
        },
        ["a"],
    )
    assert made.description == "Add."
    assert made.run('{"a": 1, "c": 5}') == "[1, 7, 5]"


# ---------------------------------------------------------------- definition errors


def _star_args(*values: int) -> None: ...
def _star_kwargs(**options: str) -> None: ...
def _positional_unhinted(a, /) -> None: ...
def _set_hint(a: set[int]) -> None: ...
def _int_keys(a: dict[int, str]) -> None: ...
def _class_hint(a: Requirement) -> None: ...
def _list_literal_hint(a: [str]) -> None: ...
def _unknown_name(a: "Nope") -> None: ...  # noqa: F821
async def _coroutine(a: int) -> None: ...


class _Opaque(enum.Enum):
    A = object()


def _opaque_enum(a: _Opaque) -> None: ...


SUPPORTED = (
    "use str, int, float, bool, None, list[...], tuple[...], dict[str, ...], "
    "Literal[...], an Enum, X | None or Any (and convert inside the function)"
)


@pytest.mark.parametrize(
    ("func", "message"),
    [
        (
            _star_args,
            "cannot make a tool of _star_args(): *values is not supported, as the LLM passes "
            "arguments by name; take a list instead, e.g. values: list[str]",
        ),
        (
            _star_kwargs,
            "cannot make a tool of _star_kwargs(): **options is not supported, as the LLM must "
            "be told every argument; name the parameters, or take a dict, e.g. "
            "options: dict[str, str]",
        ),
        (
            _positional_unhinted,
            "cannot make a tool of _positional_unhinted(): positional-only parameter 'a' has "
            "no type hint; add one, e.g. a: str",
        ),
        (
            _set_hint,
            "cannot make a tool of _set_hint(): parameter 'a' has type set[int], which JSON "
            f"cannot carry; {SUPPORTED}",
        ),
        (
            _int_keys,
            "cannot make a tool of _int_keys(): parameter 'a' has type dict[int, ...], but "
            "JSON object keys are strings; use dict[str, ...]",
        ),
        (
            _class_hint,
            "cannot make a tool of _class_hint(): parameter 'a' has type Requirement, which "
            f"JSON cannot carry; {SUPPORTED}",
        ),
        (
            _list_literal_hint,
            "cannot make a tool of _list_literal_hint(): parameter 'a' has type [<class 'str'>], "
            f"which JSON cannot carry; {SUPPORTED}",
        ),
        (
            _unknown_name,
            "cannot make a tool of _unknown_name(): its signature cannot be read (name 'Nope' "
            "is not defined); define the types its hints name at module level, or wrap it in "
            "a plain def with hints",
        ),
        (
            _coroutine,
            "cannot make a tool of _coroutine(): async functions are not supported; write a "
            "plain def (run the coroutine inside it if you must)",
        ),
        (
            lambda x: x,
            "cannot make a tool of <lambda>(): '<lambda>' is not a valid tool name (1 to 64 "
            "letters, digits, '_' or '-'); pass one, e.g. @tool(name='lookup_city')",
        ),
        (3, "3 is not a function; @tool decorates functions"),
    ],
)
def test_definition_errors(func: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        tool(func)
    assert str(info.value) == message


def test_enum_with_values_json_cannot_carry() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        tool(_opaque_enum)
    assert str(info.value) == (
        "cannot make a tool of _opaque_enum(): parameter 'a' offers the choices "
        f"{[_Opaque.A.value]!r}; choices must be strings, numbers, booleans or None "
        "(give the Enum plain values)"
    )


def test_invalid_explicit_name() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        tool(name="two words")(_set_hint)
    assert str(info.value) == (
        "cannot make a tool of _set_hint(): 'two words' is not a valid tool name (1 to 64 "
        "letters, digits, '_' or '-'); pass one, e.g. @tool(name='lookup_city')"
    )


# ---------------------------------------------------------------- parse_arguments


class Shape(enum.Enum):
    SQUARE = "square"
    CIRCLE = "circle"


@tool
def draw(
    shape: Shape,
    size: float,
    points: list[tuple[int, int]] | None = None,
    style: dict[str, str] | None = None,
    mode: Literal["fill", "line"] = "fill",
    count: int = 1,
) -> dict[str, Any]:
    """Draw a shape."""
    return {"shape": shape, "size": size, "points": points, "style": style, "mode": mode}


DRAW_PARAMS = (
    'Call draw again with a JSON object of: shape (one of "square", "circle", required), '
    "size (number, required), points (array of array [integer, integer] or null), "
    'style (object or null), mode (one of "fill", "line"), count (integer).'
)


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        (
            "{shape: square}",
            "they are not valid JSON (Expecting property name enclosed in "
            "double quotes at character 1)",
        ),
        ('["square", 2]', "they must be a JSON object, not an array"),
        ('"square"', 'they must be a JSON object, not a string ("square")'),
        ("{}", "missing required argument 'shape'; missing required argument 'size'"),
        (
            '{"shape": "square", "size": 2, "colour": "red"}',
            "unexpected argument 'colour'",
        ),
        ('{"shape": "square", "size": "2"}', "'size' must be a number, not a string (\"2\")"),
        ('{"shape": "square", "size": true}', "'size' must be a number, not a boolean (true)"),
        (
            '{"shape": "triangle", "size": 2}',
            '\'shape\' must be one of "square", "circle", not "triangle"',
        ),
        (
            '{"shape": 1, "size": 2, "mode": "dots"}',
            '\'shape\' must be one of "square", "circle", not an integer (1); '
            '\'mode\' must be one of "fill", "line", not "dots"',
        ),
        (
            '{"shape": "square", "size": 2, "points": [[1, 2], [3], [4, "5"]]}',
            "'points[1]' must have at least 2 items, not 1; "
            "'points[2][1]' must be an integer, not a string (\"5\")",
        ),
        (
            '{"shape": "square", "size": 2, "style": {"fill": 3}}',
            "'style.fill' must be a string, not an integer (3)",
        ),
        (
            '{"shape": "square", "size": 2, "points": "none"}',
            "'points' must be an array or null, not a string (\"none\")",
        ),
        (
            '{"shape": "square", "size": 2, "count": 1.5}',
            "'count' must be an integer, not a number (1.5)",
        ),
    ],
)
def test_parse_arguments_errors_are_written_for_the_llm(arguments: str, problems: str) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        draw.parse_arguments(arguments)
    assert str(info.value) == f"invalid arguments for tool 'draw': {problems}. {DRAW_PARAMS}"


def test_parse_arguments_converts_to_what_the_hints_ask_for() -> None:
    got = draw.parse_arguments(
        '{"shape": "circle", "size": 2, "points": [[1, 2.0]], "count": 3.0, "mode": null}'
    )
    assert got == {"shape": Shape.CIRCLE, "size": 2.0, "points": [(1, 2)], "count": 3}
    assert isinstance(got["size"], float) and isinstance(got["count"], int)


def test_parse_arguments_accepts_a_dict_and_an_empty_string() -> None:
    @tool
    def ping(times: int = 1) -> str:
        """Ping."""
        return "pong" * times

    assert ping.parse_arguments({"times": 2}) == {"times": 2}
    assert ping.parse_arguments("") == {}
    assert ping.parse_arguments("  ") == {}
    with pytest.raises(InvalidToolArguments) as info:
        ping.parse_arguments("null")
    assert str(info.value) == (
        "invalid arguments for tool 'ping': they must be a JSON object, not null. "
        "Call ping again with a JSON object of: times (integer)."
    )


def test_parse_arguments_of_a_tool_without_parameters() -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    with pytest.raises(InvalidToolArguments) as info:
        now.parse_arguments('{"tz": "UTC"}')
    assert str(info.value) == (
        "invalid arguments for tool 'now': unexpected argument 'tz'. "
        "Call now again with an empty JSON object {}."
    )


def test_union_arguments_convert_with_the_arm_that_fits() -> None:
    @tool
    def pick(value: int | Shape | str) -> str:
        """Pick."""
        return repr(value)

    assert pick.run('{"value": 3}') == "3"
    assert pick.run('{"value": "circle"}') == "<Shape.CIRCLE: 'circle'>"
    assert pick.run('{"value": "oval"}') == "'oval'"


class Booking(ClientTool):
    name = "book"
    description = "Book a room."
    parameters = {
        "type": "object",
        "properties": {
            "room": {
                "type": "object",
                "properties": {
                    "floor": {"type": "integer", "minimum": 0, "maximum": 9},
                    "name": {"type": "string", "maxLength": 5},
                },
                "required": ["floor"],
                "additionalProperties": False,
            },
            "guests": {"type": ["integer", "null"]},
        },
        "required": ["room"],
    }


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        (
            '{"room": {"name": "Orchid", "view": "sea"}}',
            "'room': missing required key 'floor'; 'room.name' must have at most 5 characters, "
            "not 6; 'room': unexpected key 'view'",
        ),
        (
            '{"room": {"floor": 10}, "guests": "2"}',
            "'room.floor' must be at most 9, not 10; "
            "'guests' must be an integer or null, not a string (\"2\")",
        ),
        ('{"room": {"floor": -1}}', "'room.floor' must be at least 0, not -1"),
    ],
)
def test_nested_objects_in_a_client_tool_schema(arguments: str, problems: str) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        Booking().parse_arguments(arguments)
    assert str(info.value) == (
        f"invalid arguments for tool 'book': {problems}. "
        "Call book again with a JSON object of: room (object, required), guests (integer or null)."
    )


def test_client_tool_schema_without_additional_properties_keeps_extra_arguments() -> None:
    got = Booking().parse_arguments('{"room": {"floor": 2.0}, "guests": null, "note": "hi"}')
    assert got == {"room": {"floor": 2}, "guests": None, "note": "hi"}


# ---------------------------------------------------------------- KernelTool.run


def test_run_returns_str_as_is_and_everything_else_as_json() -> None:
    assert draw.run({"shape": "square", "size": 1}) == (
        '{"shape": "Shape.SQUARE", "size": 1.0, "points": null, "style": null, "mode": "fill"}'
    )

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    @tool
    def nothing() -> None:
        """Nothing."""

    @tool
    def greek() -> list[str]:
        """Greek."""
        return ["αβγ"]

    assert echo.run('{"text": "{not json}"}') == "{not json}"
    assert nothing.run("{}") == "null"
    assert greek.run("{}") == '["αβγ"]'


def test_run_lets_exceptions_from_the_function_propagate() -> None:
    @tool
    def fail(x: int) -> int:
        """Fail."""
        return 1 // x

    with pytest.raises(ZeroDivisionError):
        fail.run('{"x": 0}')


def test_decorated_functions_stay_callable() -> None:
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    made = tool(double)
    assert isinstance(made, KernelTool) and isinstance(made, Tool)
    assert made(4) == 8 and made(x=5) == 10
    assert (made.__name__, made.__doc__, made.func) == ("double", "Double it.", double)
    assert repr(made) == "<KernelTool 'double'>"
    assert tool(made, name="twice").func is double


# ---------------------------------------------------------------- built-in client tools


def test_builtins() -> None:
    assert [type(t) for t in BUILTIN_CLIENT_TOOLS] == [AskUser, Choose, Confirm]
    assert [t.name for t in BUILTIN_CLIENT_TOOLS] == ["ask_user", "choose", "confirm"]
    question = {"type": "string", "minLength": 1}
    assert Choose().schema()["function"]["parameters"] == params(
        {
            "question": question,
            "options": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 2,
                "maxItems": 20,
                "uniqueItems": True,
            },
        },
        ["question", "options"],
    )
    assert Confirm().parameters == params({"question": question}, ["question"])


def test_ask_user() -> None:
    ask = AskUser()
    args = ask.parse_arguments('{"question": "Your name?", "placeholder": "Ada"}')
    assert ask.prompt(args) == {"kind": "text", "question": "Your name?", "placeholder": "Ada"}
    assert ask.prompt({"question": "Q?"}) == {"kind": "text", "question": "Q?", "placeholder": ""}
    assert ask.parse_response(args, "  Ana Lovelace \n") == "Ana Lovelace"
    assert ask.get_tool_output(args, "Ana") == (
        "<answer>\nAna\n</answer>\n<instructions>\n"
        "The user typed this answer themselves; use it and continue.\n</instructions>"
    )


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ("", "the answer is empty; type an answer, then submit it"),
        ("  \n", "the answer is empty; type an answer, then submit it"),
        (None, "the answer must be text, not NoneType"),
        (42, "the answer must be text, not int"),
        ("x" * 2001, "the answer is 2001 characters long, over the limit of 2000; shorten it"),
    ],
)
def test_ask_user_rejects(response: object, message: str) -> None:
    with pytest.raises(InvalidToolAnswer) as info:
        AskUser().parse_response({"question": "Q?"}, response)
    assert str(info.value) == message


def test_ask_user_accepts_the_longest_answer() -> None:
    assert AskUser().parse_response({"question": "Q?"}, "x" * 2000) == "x" * 2000


@pytest.mark.parametrize(
    ("tool_", "arguments", "problem"),
    [
        (AskUser(), '{"question": "  "}', "'question' is blank; send text the user can read"),
        (Confirm(), '{"question": ""}', "'question' must have at least 1 character, not 0"),
        (AskUser(), '{"question": "Q?", "hint": "x"}', "unexpected argument 'hint'"),
        (
            Choose(),
            '{"question": "Q?", "options": ["a"]}',
            "'options' must have at least 2 items, not 1",
        ),
        (
            Choose(),
            '{"question": "Q?", "options": ["a", "a"]}',
            "'options' must not repeat items, but \"a\" appears twice",
        ),
        (
            Choose(),
            '{"question": "Q?", "options": ["a", " "]}',
            "'options[1]' is blank; send text the user can read",
        ),
        (
            Choose(),
            '{"question": "Q?", "options": ["a", 2]}',
            "'options[1]' must be a string, not an integer (2)",
        ),
        (
            Choose(),
            json.dumps({"question": "Q?", "options": [str(i) for i in range(21)]}),
            "'options' must have at most 20 items, not 21",
        ),
    ],
)
def test_builtin_argument_errors(tool_: ClientTool, arguments: str, problem: str) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        tool_.parse_arguments(arguments)
    expected = {
        "ask_user": "question (string, required), placeholder (string)",
        "choose": "question (string, required), options (array of string, required)",
        "confirm": "question (string, required)",
    }[tool_.name]
    assert str(info.value) == (
        f"invalid arguments for tool {tool_.name!r}: {problem}. "
        f"Call {tool_.name} again with a JSON object of: {expected}."
    )


COLORS = {"question": "Which colour?", "options": ["red", "green", "blue"]}


def test_choose() -> None:
    choose = Choose()
    args = choose.parse_arguments(json.dumps(COLORS))
    assert args == COLORS
    assert choose.prompt(args) == {
        "kind": "choice",
        "question": "Which colour?",
        "options": ["red", "green", "blue"],
    }
    assert choose.get_tool_output(args, "green") == (
        "<answer>\ngreen\n</answer>\n<instructions>\n"
        "The user chose this option themselves; continue accordingly.\n</instructions>"
    )


@pytest.mark.parametrize(
    ("response", "answer"),
    [("green", "green"), (" blue\n", "blue"), (1, "red"), (3, "blue"), ("2", "green")],
)
def test_choose_accepts_an_offered_option_or_its_number(response: object, answer: str) -> None:
    assert Choose().parse_response(COLORS, response) == answer


def test_choose_prefers_an_option_that_looks_like_a_number() -> None:
    offered = {"question": "Q?", "options": ["2", "1"]}
    assert Choose().parse_response(offered, "1") == "1"
    assert Choose().parse_response(offered, 1) == "2"


@pytest.mark.parametrize("response", ["purple", "Green", 0, 4, "4", True, None, ["red"]])
def test_choose_rejects_anything_else(response: object) -> None:
    with pytest.raises(InvalidToolAnswer) as info:
        Choose().parse_response(COLORS, response)
    assert str(info.value) == (
        f"{response!r} is not one of the options: red, green, blue; "
        "answer with one of them or its number, 1 to 3"
    )


def test_choose_message_for_the_person() -> None:
    with pytest.raises(
        InvalidToolAnswer, match=r"^'purple' is not one of the options: red, green, blue;"
    ):
        Choose().parse_response(COLORS, "purple")


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        (True, True),
        (False, False),
        ("yes", True),
        (" Y ", True),
        ("TRUE", True),
        ("no", False),
        ("N", False),
        ("False", False),
    ],
)
def test_confirm_accepts(response: object, answer: bool) -> None:
    assert Confirm().parse_response({"question": "Delete it?"}, response) is answer


@pytest.mark.parametrize("response", ["maybe", "", 1, 0, None])
def test_confirm_rejects(response: object) -> None:
    with pytest.raises(InvalidToolAnswer) as info:
        Confirm().parse_response({"question": "Delete it?"}, response)
    assert str(info.value) == f"{response!r} is not a yes-or-no answer; answer yes or no"


def test_confirm_prompt_and_outputs() -> None:
    confirm = Confirm()
    args = confirm.parse_arguments({"question": "Delete data.csv?"})
    assert confirm.prompt(args) == {"kind": "confirm", "question": "Delete data.csv?"}
    assert confirm.get_tool_output(args, True) == (
        "<answer>\nyes\n</answer>\n<instructions>\n"
        "The user confirmed this themselves; go ahead.\n</instructions>"
    )
    assert confirm.get_tool_output(args, False) == (
        "<answer>\nno\n</answer>\n<instructions>\n"
        "The user declined; do not go ahead with it. Ask what they would like instead, "
        "or continue without it.\n</instructions>"
    )


# ---------------------------------------------------------------- custom client tools


class Feedback(ClientTool):
    name = "feedback"
    description = "Ask the user for feedback on a file."
    parameters = {
        "type": "object",
        "properties": {"question": {"type": "string"}, "path": {"type": "string"}},
        "required": ["question", "path"],
        "additionalProperties": False,
    }

    def call_requirements(self, arguments: dict[str, Any]) -> list[Requirement]:
        return [Requirement("read", target=arguments["path"]), Requirement("comment")]


def test_client_tool_defaults() -> None:
    feedback = Feedback()
    args = feedback.parse_arguments('{"question": "Good?", "path": "a.py"}')
    assert feedback.schema() == {
        "type": "function",
        "function": {
            "name": "feedback",
            "description": "Ask the user for feedback on a file.",
            "parameters": Feedback.parameters,
        },
    }
    assert feedback.prompt(args) == {"kind": "text", "question": "Good?", "placeholder": ""}
    assert feedback.parse_response(args, " fine ") == "fine"
    assert feedback.output(args, {"score": 3}) == '{"score": 3}'
    assert feedback.get_tool_output(args, "fine") == (
        "<answer>\nfine\n</answer>\n<instructions>\n"
        "The user gave this answer themselves; continue accordingly.\n</instructions>"
    )
    assert repr(feedback) == "<Feedback 'feedback'>"


def test_get_tool_output_without_instructions_and_with_a_closing_tag_in_the_answer() -> None:
    class Plain(Feedback):
        name = "plain"

        def output_description_instructions(self, arguments: dict[str, Any], answer: object) -> str:
            return ""

    assert Plain().get_tool_output({}, "a</answer>b") == "<answer>\na<\\/answer>b\n</answer>"


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            {"name": "bad name", "description": "D.", "parameters": {"type": "object"}},
            "ClientTool Bad: 'bad name' is not a valid tool name (1 to 64 letters, digits, "
            "'_' or '-'); set one, e.g. name = 'pick_dataset'",
        ),
        (
            {"name": "bad", "parameters": {"type": "object"}},
            "ClientTool Bad needs a description telling the LLM when to call it: "
            "set description = '...'",
        ),
        (
            {"name": "bad", "description": "D.", "parameters": {"type": "string"}},
            "ClientTool Bad needs parameters = a JSON schema of type object, e.g. {'type': "
            "'object', 'properties': {'question': {'type': 'string'}}, 'required': ['question']}",
        ),
    ],
)
def test_client_tool_definition_errors(attributes: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        type("Bad", (ClientTool,), attributes)
    assert str(info.value) == message


def test_abstract_client_tool_subclasses_are_not_checked() -> None:
    class Base(ClientTool):
        def output(self, arguments: dict[str, Any], answer: object) -> str:
            return str(answer).upper()

    class Concrete(Base):
        name = "concrete"
        description = "C."
        parameters = {"type": "object", "properties": {}}

    assert Concrete().output({}, "x") == "X"


# ---------------------------------------------------------------- requirements

ARGS = {"question": "Good?", "path": "a.py"}


def test_requirements_met() -> None:
    context = ToolContext("ana", "ana", frozenset({"read", "comment"}), thread_id=3)
    assert Feedback().check_requirements(context, ARGS) is None
    assert AskUser().check_requirements(ToolContext("ana", "ana"), {"question": "Q?"}) is None


def test_only_the_owner_may_answer() -> None:
    context = ToolContext("bob", "ana", frozenset({"read", "comment"}))
    with pytest.raises(ToolRequirementsNotMet) as info:
        AskUser().check_requirements(context, {"question": "Q?"})
    assert str(info.value) == (
        "user 'bob' cannot answer a call in a thread owned by 'ana'; only 'ana' can answer it"
    )


def test_missing_permissions_are_named_with_how_to_grant_them() -> None:
    with pytest.raises(ToolRequirementsNotMet) as info:
        Feedback().check_requirements(ToolContext("ana", "ana", frozenset({"comment"})), ARGS)
    assert str(info.value) == (
        "tool 'feedback' needs permission 'read' on 'a.py', which user 'ana' does not have; "
        "grant it with Chat(permissions={'read'})"
    )
    with pytest.raises(ToolRequirementsNotMet) as info:
        Feedback().check_requirements(ToolContext("ana", "ana"), ARGS)
    assert str(info.value) == (
        "tool 'feedback' needs permissions 'read' on 'a.py', 'comment', which user 'ana' does "
        "not have; grant them with Chat(permissions={'comment', 'read'})"
    )


def test_tool_context() -> None:
    context = ToolContext("ana", "ana", {"read"})
    assert context.permissions == frozenset({"read"})
    assert hash(context) == hash(ToolContext("ana", "ana", frozenset({"read"})))
    with pytest.raises(InputError) as info:
        ToolContext("ana", "ana", "read")
    assert (
        str(info.value)
        == "permissions must be a set of names, e.g. {'read'}, not the string 'read'"
    )


# ---------------------------------------------------------------- Toolbox


def lookup(city: str) -> str:
    """Look a city up."""
    return city


def test_toolbox() -> None:
    box = Toolbox([lookup, draw, Feedback, *BUILTIN_CLIENT_TOOLS])
    assert box.names == ("lookup", "draw", "feedback", "ask_user", "choose", "confirm")
    assert len(box) == 6 and "draw" in box and "nope" not in box and ["draw"] not in box
    assert [t.name for t in box] == list(box.names)
    assert isinstance(box.get("lookup"), KernelTool) and box.get("draw") is draw
    assert isinstance(box.get("feedback"), Feedback)
    assert box.schemas() == [t.schema() for t in box]
    assert box.schemas()[0] == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a city up.",
            "parameters": params({"city": {"type": "string"}}, ["city"]),
        },
    }
    assert repr(box) == "Toolbox(['lookup', 'draw', 'feedback', 'ask_user', 'choose', 'confirm'])"
    assert Toolbox(box).names == box.names


def test_toolbox_unknown_tool_is_reported_to_the_llm() -> None:
    with pytest.raises(ToolError) as info:
        Toolbox([lookup, Confirm()]).get("search")
    assert str(info.value) == "the model called an unknown tool 'search'; offered: lookup, confirm"
    with pytest.raises(ToolError) as info:
        Toolbox().get("search")
    assert str(info.value) == "the model called an unknown tool 'search'; offered: none"


def test_toolbox_client_tool_is_for_answering_pending_calls() -> None:
    box = Toolbox([lookup, Confirm(), Feedback()])
    assert box.client_tool("confirm") is box.get("confirm")
    for name in ("lookup", "ask_user"):
        with pytest.raises(ToolError) as info:
            box.client_tool(name)
        assert str(info.value) == (
            f"no client tool named {name!r} is offered here (client tools: confirm, feedback); "
            "include it in Chat(tools=[...]) to answer the call"
        )


def test_toolbox_rejects_duplicates_and_non_tools() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        Toolbox([lookup, tool(name="lookup")(draw)])
    assert str(info.value) == (
        "two tools are named 'lookup'; rename one: @tool(name='lookup_2') for a function, "
        "the name attribute for a ClientTool"
    )
    with pytest.raises(ToolDefinitionError) as info:
        Toolbox(["lookup"])
    assert str(info.value) == (
        "'lookup' is not a tool; pass functions, @tool functions or ClientTool instances"
    )


def test_toolbox_checks_client_tool_instances() -> None:
    confirm = Confirm()
    confirm.name = "confirm it"
    with pytest.raises(ToolDefinitionError, match=r"^client tool <Confirm 'confirm it'>: "):
        Toolbox([confirm])


# ---------------------------------------------------------------- the module's example


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(nbchat.tools, optionflags=doctest.ELLIPSIS)
    assert (result.attempted, result.failed) == (10, 0)


class Transfer(ClientTool):
    """A client tool whose schema uses keywords type hints never generate."""

    name = "transfer"
    description = "Move money between two accounts."
    parameters = {
        "type": "object",
        "$defs": {"account": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{4}$"}},
        "properties": {
            "source": {"$ref": "#/$defs/account"},
            "target": {"$ref": "#/$defs/account"},
            "currency": {"const": "EUR"},
            "amount": {
                "oneOf": [
                    {"type": "integer", "exclusiveMinimum": 0, "multipleOf": 5},
                    {"type": "string", "pattern": "^all$"},
                ]
            },
            "when": {"type": "string", "format": "date"},
        },
        "required": ["source", "target", "currency", "amount"],
        "additionalProperties": False,
    }


TRANSFER_OK = {"source": "DE1234", "target": "FR9876", "currency": "EUR", "amount": 10}


@pytest.mark.parametrize(
    ("changes", "problems"),
    [
        ({"source": "de12"}, "'source' must match the pattern ^[A-Z]{2}[0-9]{4}$, not \"de12\""),
        ({"currency": "USD"}, "'currency' must be \"EUR\", not \"USD\""),
        ({"amount": 7}, "'amount' must be a multiple of 5, not 7"),
        ({"amount": 0}, "'amount' must be more than 0, not 0"),
        ({"amount": "some"}, "'amount' must match the pattern ^all$, not \"some\""),
        ({"amount": [5]}, "'amount' must be an integer or a string, not an array"),
        ({"when": "tomorrow"}, "'when' must be a valid date, not \"tomorrow\""),
        (
            {"target": "x", "amount": 3},
            "'target' must match the pattern ^[A-Z]{2}[0-9]{4}$, not \"x\"; "
            "'amount' must be a multiple of 5, not 3",
        ),
    ],
)
def test_every_constraint_a_client_tool_declares_is_checked(
    changes: dict[str, Any], problems: str
) -> None:
    with pytest.raises(InvalidToolArguments) as info:
        Transfer().parse_arguments({**TRANSFER_OK, **changes})
    assert str(info.value) == (
        f"invalid arguments for tool 'transfer': {problems}. Call transfer again with a JSON "
        "object of: source (any, required), target (any, required), currency (\"EUR\", "
        "required), amount (integer or string, required), when (string)."
    )


def test_a_client_tool_call_that_meets_its_constraints_passes() -> None:
    arguments = {**TRANSFER_OK, "amount": "all", "when": "2026-12-01"}
    assert Transfer().parse_arguments(json.dumps(arguments)) == arguments


def test_a_client_tool_schema_that_is_not_a_json_schema_is_refused() -> None:
    with pytest.raises(ToolDefinitionError) as info:

        class Broken(ClientTool):
            name = "broken"
            description = "Broken."
            parameters = {"type": "object", "properties": {"n": {"type": "integr"}}}

    assert str(info.value).startswith(
        "ClientTool test_a_client_tool_schema_that_is_not_a_json_schema_is_refused.<locals>"
        ".Broken has parameters that are not a valid JSON schema: "
    )
    assert "'integr'" in str(info.value) and str(info.value).endswith("; fix the schema")


def test_nbchats_own_client_tools_have_valid_schemas() -> None:
    from nbchat.context.run_code import RunCode
    from nbchat.tools._arguments import schema_problem

    for cls in (AskUser, Choose, Confirm, RunCode):
        assert schema_problem(cls.parameters) is None, cls.name


def test_importing_nbchat_leaves_jsonschema_for_the_first_check() -> None:
    import subprocess
    import sys

    code = "import sys, nbchat; print('jsonschema' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "False\n"
