"""Type hints and docstrings → JSON schema.

:func:`function_schema` gives a function's description, ``parameters`` schema
and per-parameter converters (JSON value → what the hint asks for), reading
numpydoc and Google docstrings (:func:`parse_docstring`). The generated
keywords: ``type``, ``enum``, ``anyOf``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, ``minItems``,
``maxItems``, ``description`` and ``default``. Checking arguments against a
schema (any JSON schema, not only these keywords) is :mod:`nbchat.tools._arguments`.
"""

from __future__ import annotations

import enum
import functools
import inspect
import json
import re
import types
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ..base.errors import ToolDefinitionError
from ._arguments import _json_type, is_valid

Convert = Callable[[Any], Any]

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
            if is_valid(value, schema):
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
