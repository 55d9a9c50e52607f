"""Type hints and docstrings → JSON schema, and checking arguments against it.

:func:`function_schema` gives a function's description, ``parameters`` schema
and per-parameter converters (JSON value → what the hint asks for), reading
numpydoc and Google docstrings (:func:`parse_docstring`).
:func:`load_arguments` checks what the LLM sent, or raises
:class:`InvalidToolArguments` listing every problem, for the LLM.

The schema subset, generated and checked: ``type`` (one or a list), ``enum``,
``anyOf``, ``properties``, ``required``, ``additionalProperties`` (bool or a
schema), ``items``, ``prefixItems``, ``minItems``, ``maxItems``,
``uniqueItems``, ``minLength``, ``maxLength``, ``minimum``, ``maximum``.
Other keywords (``description``, ``default``, ``title``) are not checked.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import operator
import re
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from .errors import InvalidToolArguments, ToolDefinitionError

Convert = Callable[[Any], Any]
Schema = Mapping[str, Any]

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_SCALARS[type(None)] = "null"
_SUPPORTED = (
    "use str, int, float, bool, None, list[...], tuple[...], dict[str, ...], "
    "Literal[...], an Enum, X | None or Any (and convert inside the function)"
)


def _same(value: Any) -> Any:
    return value


# ---------------------------------------------------------------- hints → schema


def function_schema(
    func: Callable[..., Any], label: str, description: str | None
) -> tuple[str, dict[str, Any], dict[str, Convert]]:
    """The description, ``parameters`` schema and per-parameter converters of ``func``.

    Unhinted parameters take the type of their default when it is a str, int,
    float or bool, and are strings otherwise. Parameters with a default are not
    required; a JSON-representable default is shown to the LLM as ``default``.
    """
    where = f"cannot make a tool of {label}"
    try:
        signature = inspect.signature(func, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError) as exc:
        raise ToolDefinitionError(
            f"{where}: its signature cannot be read ({exc}); define the types its "
            "hints name at module level, or wrap it in a plain def with hints"
        ) from exc
    summary, param_docs = parse_docstring(_docstring(func))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, Convert] = {}
    for param in signature.parameters.values():
        schema, converters[param.name] = _param_schema(param, where)
        if param_docs.get(param.name) and "description" not in schema:
            schema["description"] = param_docs[param.name]
        properties[param.name] = schema
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    parameters = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return (summary if description is None else description), parameters, converters


def _docstring(func: Callable[..., Any]) -> str:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.getdoc(func) or ""


def _param_schema(param: inspect.Parameter, where: str) -> tuple[dict[str, Any], Convert]:
    if param.kind is param.VAR_POSITIONAL:
        raise ToolDefinitionError(
            f"{where}: *{param.name} is not supported, as the LLM passes arguments by "
            f"name; take a list instead, e.g. {param.name}: list[str]"
        )
    if param.kind is param.VAR_KEYWORD:
        raise ToolDefinitionError(
            f"{where}: **{param.name} is not supported, as the LLM must be told every "
            f"argument; name the parameters, or take a dict, e.g. {param.name}: dict[str, str]"
        )
    hint = param.annotation
    if hint is inspect.Parameter.empty:
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{where}: positional-only parameter {param.name!r} has no type hint; "
                f"add one, e.g. {param.name}: str"
            )
        hint = type(param.default) if type(param.default) in (str, int, float, bool) else str
    schema, convert = compile_hint(hint, f"{where}: parameter {param.name!r}")
    if param.default is not inspect.Parameter.empty:
        default = _json_value(param.default)
        if default is not _NO_JSON:
            schema["default"] = default
    return schema, convert


def compile_hint(hint: Any, where: str) -> tuple[dict[str, Any], Convert]:
    """The JSON schema of a type hint, and a converter from JSON to that type."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        schema, convert = compile_hint(args[0], where)
        notes = [note for note in args[1:] if isinstance(note, str)]
        if notes:
            schema["description"] = notes[0]
        return schema, convert
    if hint is Any:
        return {}, _same
    kind = _scalar_kind(hint)
    if kind:
        return {"type": kind}, (float if hint is float else _same)
    if origin in (Union, types.UnionType):
        return _compile_union(args, where)
    if origin is Literal:
        return _enum_schema(list(args), where), _same
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema([member.value for member in hint], where), hint
    if hint in (list, tuple) or origin in (list, tuple):
        return _compile_array(origin or hint, args, where)
    if hint is dict or origin is dict:
        return _compile_object(args, where)
    raise ToolDefinitionError(
        f"{where} has type {_hint_name(hint)}, which JSON cannot carry; {_SUPPORTED}"
    )


def _scalar_kind(hint: Any) -> str | None:
    try:
        return _SCALARS.get(type(None) if hint is None else hint)
    except TypeError:  # an unhashable annotation such as [str]
        return None


def _compile_union(args: tuple[Any, ...], where: str) -> tuple[dict[str, Any], Convert]:
    arms = [compile_hint(arg, where) for arg in args]
    schemas = [schema for schema, _ in arms]

    def convert(value: Any) -> Any:
        for schema, arm_convert in arms:
            if not _problems(value, schema):
                return arm_convert(value)
        return value

    return {"anyOf": schemas}, convert


def _compile_array(
    container: type, args: tuple[Any, ...], where: str
) -> tuple[dict[str, Any], Convert]:
    if not args:
        return {"type": "array"}, container
    if container is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        arms = [compile_hint(arg, where) for arg in args]
        schema = {
            "type": "array",
            "prefixItems": [item for item, _ in arms],
            "minItems": len(arms),
            "maxItems": len(arms),
        }
        return schema, lambda value: tuple(c(v) for (_, c), v in zip(arms, value, strict=True))
    item, item_convert = compile_hint(args[0], where)
    return {"type": "array", "items": item}, lambda value: container(map(item_convert, value))


def _compile_object(args: tuple[Any, ...], where: str) -> tuple[dict[str, Any], Convert]:
    if not args:
        return {"type": "object"}, _same
    if args[0] is not str:
        raise ToolDefinitionError(
            f"{where} has type dict[{_hint_name(args[0])}, ...], but JSON object keys "
            "are strings; use dict[str, ...]"
        )
    value_schema, convert = compile_hint(args[1], where)
    schema = {"type": "object", "additionalProperties": value_schema}
    return schema, lambda value: {key: convert(item) for key, item in value.items()}


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    kinds = {_json_type(value) for value in values}
    if not values or not kinds <= {"string", "integer", "number", "boolean", "null"}:
        raise ToolDefinitionError(
            f"{where} offers the choices {values!r}; choices must be strings, numbers, "
            "booleans or None (give the Enum plain values)"
        )
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), "enum": values}
    return schema


def _hint_name(hint: Any) -> str:
    plain_class = isinstance(hint, type) and get_origin(hint) is None  # set[int] is a type in 3.10
    return hint.__qualname__ if plain_class else repr(hint)


_NO_JSON = object()


def _json_value(value: Any) -> Any:
    """``value`` as JSON data (Enum → its value, tuple → list), or ``_NO_JSON``."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, tuple):
        value = list(value)
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        return _NO_JSON


# ---------------------------------------------------------------- docstrings

_NUMPY_SECTION = re.compile(r"^-{3,}\s*$")
_GOOGLE_SECTION = re.compile(r"^(Args|Arguments|Parameters|Keyword Args|Keyword Arguments):\s*$")
_ANY_GOOGLE_SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (lines joined) and ``{parameter: description}`` of a docstring."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip() or _is_section(lines, index):
            break
        summary.append(line.strip())
    params = {**_numpy_params(lines), **_google_params(lines)}
    return " ".join(summary), params


def _is_section(lines: list[str], index: int) -> bool:
    following = lines[index + 1] if index + 1 < len(lines) else ""
    return bool(_NUMPY_SECTION.match(following) or _ANY_GOOGLE_SECTION.match(lines[index]))


def _numpy_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, list[str]] = {}
    in_section, names = False, [""]
    for index, line in enumerate(lines):
        if index + 1 < len(lines) and _NUMPY_SECTION.match(lines[index + 1]):
            in_section = line.strip() in ("Parameters", "Other Parameters")
            continue
        if not in_section or _NUMPY_SECTION.match(line) or not line.strip():
            continue
        if not line[0].isspace():
            names = [name.strip().lstrip("*") for name in line.split(":")[0].split(",")]
            for name in names:
                params[name] = []
        else:
            for name in names:
                params.get(name, []).append(line.strip())
    return {name: " ".join(text) for name, text in params.items() if text}


def _google_params(lines: list[str]) -> dict[str, str]:
    params: dict[str, list[str]] = {}
    header_indent: int | None = None
    entry_indent, name = 0, ""
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if header_indent is not None and line.strip() and indent <= header_indent:
            header_indent = None
        if _GOOGLE_SECTION.match(line.strip()):
            header_indent, entry_indent = indent, 0
            continue
        if header_indent is None or not line.strip():
            continue
        entry = _GOOGLE_ENTRY.match(line.strip())
        if entry and (not entry_indent or indent <= entry_indent):
            entry_indent, name = indent, entry.group(1)
            params[name] = [entry.group(2)] if entry.group(2) else []
        elif name:
            params[name].append(line.strip())
    return {name: " ".join(text) for name, text in params.items() if text}


# ---------------------------------------------------------------- checking arguments


def load_arguments(tool_name: str, parameters: Schema, arguments: object) -> dict[str, Any]:
    """Check ``arguments`` (JSON text or a mapping) against ``parameters``; return them.

    An empty string means no arguments. A ``null`` for an optional argument
    whose schema does not accept null counts as leaving it out (models often
    send that). Integral floats for integer fields become ints.
    """
    if isinstance(arguments, str):
        text = arguments.strip() or "{}"
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"they are not valid JSON ({exc.msg} at character {exc.pos})"
            raise invalid_arguments(tool_name, parameters, [problem]) from exc
    if not isinstance(arguments, Mapping):
        problem = f"they must be a JSON object, not {_describe(arguments)}"
        raise invalid_arguments(tool_name, parameters, [problem])
    problems: list[str] = []
    value: dict[str, Any] = _check(dict(arguments), parameters, "", problems)
    if problems:
        raise invalid_arguments(tool_name, parameters, problems)
    return value


def invalid_arguments(
    tool_name: str, parameters: Schema, problems: list[str]
) -> InvalidToolArguments:
    """The error for the LLM: every problem, then what to send instead."""
    return InvalidToolArguments(
        f"invalid arguments for tool {tool_name!r}: {'; '.join(problems)}. "
        f"{describe_parameters(tool_name, parameters)}"
    )


def describe_parameters(tool_name: str, parameters: Schema) -> str:
    """One sentence telling the LLM what to send, e.g. ``Call add again with ...``."""
    properties = parameters.get("properties") or {}
    if not properties:
        return f"Call {tool_name} again with an empty JSON object {{}}."
    required = set(parameters.get("required") or ())
    fields = [
        f"{key} ({_label(schema)}{', required' if key in required else ''})"
        for key, schema in properties.items()
    ]
    return f"Call {tool_name} again with a JSON object of: {', '.join(fields)}."


def _problems(value: Any, schema: Schema) -> list[str]:
    problems: list[str] = []
    _check(value, schema, "", problems)
    return problems


def _check(value: Any, schema: Schema, path: str, problems: list[str]) -> Any:
    """``value`` normalised; what is wrong with it is appended to ``problems``."""
    if "anyOf" in schema:
        return _check_any_of(value, schema, path, problems)
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, kind) for kind in kinds):
            problems.append(f"{_name(path)} must be {_expected(schema)}, not {_describe(value)}")
            return value
        if "integer" in kinds and isinstance(value, float) and "number" not in kinds:
            value = int(value)
    if "enum" in schema and not any(_same_json(value, o) for o in schema["enum"]):
        problems.append(f"{_name(path)} must be {_expected(schema)}, not {_dump(value)}")
        return value
    if isinstance(value, (list, tuple)):
        value = _check_array(list(value), schema, path, problems)
    elif isinstance(value, Mapping):
        value = _check_object(dict(value), schema, path, problems)
    if isinstance(value, (str, list, int, float)) and not isinstance(value, bool):
        _check_bounds(value, schema, path, problems)
    return value


def _check_any_of(value: Any, schema: Schema, path: str, problems: list[str]) -> Any:
    arms = schema["anyOf"]
    for arm in arms:
        if not _problems(value, arm):
            return _check(value, arm, path, [])
    fitting = [arm for arm in arms if _fits_type(value, arm)]
    if len(fitting) == 1:  # report what is wrong inside, e.g. one bad item of a list | None
        return _check(value, fitting[0], path, problems)
    problems.append(f"{_name(path)} must be {_expected(schema)}, not {_describe(value)}")
    return value


def _fits_type(value: Any, schema: Schema) -> bool:
    kinds = schema.get("type")
    if kinds is None:
        return "anyOf" not in schema
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return any(_is_type(value, kind) for kind in kinds)


def _check_bounds(value: Any, schema: Schema, path: str, problems: list[str]) -> None:
    if isinstance(value, str):
        low_key, high_key, unit = "minLength", "maxLength", "character"
    elif isinstance(value, list):
        low_key, high_key, unit = "minItems", "maxItems", "item"
    else:
        low_key, high_key, unit = "minimum", "maximum", ""
    size = len(value) if unit else value
    for limit, word, broken in (
        (schema.get(low_key), "least", operator.lt),
        (schema.get(high_key), "most", operator.gt),
    ):
        if limit is not None and broken(size, limit):
            plural = "" if limit == 1 else "s"
            need = f"have at {word} {limit} {unit}{plural}" if unit else f"be at {word} {limit}"
            problems.append(f"{_name(path)} must {need}, not {size}")


def _check_array(value: list[Any], schema: Schema, path: str, problems: list[str]) -> list[Any]:
    if schema.get("uniqueItems"):
        seen: set[str] = set()
        for item in value:
            text = json.dumps(item, sort_keys=True, default=repr)
            if text in seen:
                problems.append(f"{_name(path)} must not repeat items, but {text} appears twice")
                break
            seen.add(text)
    prefix = schema.get("prefixItems") or []
    rest = schema.get("items")
    checked = []
    for index, item in enumerate(value):
        item_schema = prefix[index] if index < len(prefix) else rest
        if isinstance(item_schema, Mapping):
            item = _check(item, item_schema, f"{path}[{index}]", problems)
        checked.append(item)
    return checked


def _check_object(
    value: dict[str, Any], schema: Schema, path: str, problems: list[str]
) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required") or ()
    extra = schema.get("additionalProperties", True)
    for key in [k for k, v in value.items() if v is None and k in properties and k not in required]:
        if _problems(None, properties[key]):
            del value[key]
    where, noun = (f"{_name(path)}: ", "key") if path else ("", "argument")
    for key in [key for key in required if key not in value]:
        problems.append(f"{where}missing required {noun} {key!r}")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        item_path = f"{path}.{key}" if path else key
        if key in properties:
            checked[key] = _check(item, properties[key], item_path, problems)
        elif extra is False:
            problems.append(f"{where}unexpected {noun} {key!r}")
        else:
            checked[key] = _check(
                item, extra if isinstance(extra, Mapping) else {}, item_path, problems
            )
    return checked


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return _json_type(value) == "integer" or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return _json_type(value) in ("integer", "number")
    return _json_type(value) == kind


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for python, kind in ((int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, python):
            return kind
    if isinstance(value, (list, tuple)):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__


def _same_json(a: Any, b: Any) -> bool:
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def _expected(schema: Schema) -> str:
    """What a schema wants, in words: ``an integer``, ``one of "a", "b"``, ``a string or null``."""
    if "enum" in schema:
        return "one of " + ", ".join(_dump(option) for option in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_expected(arm) for arm in schema["anyOf"])
    kinds = schema.get("type")
    if kinds is None:
        return "any JSON value"
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return " or ".join(_article(kind) for kind in kinds)


def _label(schema: Schema) -> str:
    """A short type label for the parameter summary: ``array of string``, ``integer or null``."""
    if "enum" in schema:
        return _expected(schema)
    if "anyOf" in schema:
        return " or ".join(_label(arm) for arm in schema["anyOf"])
    kinds = schema.get("type", "any")
    label = kinds if isinstance(kinds, str) else " or ".join(kinds)
    if label == "array" and schema.get("prefixItems"):
        label += " [" + ", ".join(_label(item) for item in schema["prefixItems"]) + "]"
    elif label == "array" and isinstance(schema.get("items"), Mapping):
        label += f" of {_label(schema['items'])}"
    return label


def _article(kind: str) -> str:
    return kind if kind == "null" else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _describe(value: Any) -> str:
    kind = _json_type(value)
    if kind in ("null", "array", "object"):
        return _article(kind)
    return f"{_article(kind)} ({_dump(value)})"


def _dump(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _name(path: str) -> str:
    return f"{path!r}" if path else "the arguments"
