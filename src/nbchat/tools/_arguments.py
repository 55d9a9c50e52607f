"""Checking a tool call's arguments against its JSON schema, with messages for the LLM.

:mod:`jsonschema` decides what is valid (every keyword of the schema's draft,
2020-12 by default: ``pattern``, ``const``, ``oneOf``, ``$ref``, ``format``…);
this module only normalises what models commonly send (``null`` for an
optional argument, ``2.0`` for an integer) and turns jsonschema's errors into
one short sentence each, naming the argument: ``'size' must be a number, not a
string ("2")``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..base.errors import InvalidToolArguments

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

Schema = Mapping[str, Any]
Path = tuple[str | int, ...]



def validator(schema: Schema) -> Validator:
    """A validator for ``schema`` (its ``$schema`` draft, 2020-12 when it names none).

    Raises :class:`jsonschema.exceptions.SchemaError` if the schema itself is
    invalid. Checking a schema costs milliseconds, so validators are kept per
    schema text.
    """
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not JSON data: a broken schema, checked uncached
        return _validator(schema)
    return _cached_validator(text)


@functools.lru_cache(maxsize=512)
def _cached_validator(text: str) -> Validator:
    return _validator(json.loads(text))


def _validator(schema: Schema) -> Validator:
    # Imported on first use: jsonschema loads its format checkers' optional
    # libraries eagerly, up to a second where rfc3987-syntax is installed.
    from jsonschema import FormatChecker
    from jsonschema.validators import Draft202012Validator, validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=FormatChecker())


def schema_problem(schema: Schema) -> str | None:
    """What is wrong with ``schema`` as a JSON schema, or None."""
    from jsonschema.exceptions import SchemaError

    try:
        validator(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "the top level"
        return f"{exc.message} (at {where})"
    return None


def is_valid(value: Any, schema: Schema) -> bool:
    """Whether ``value`` (normalised as for a call) fits ``schema``."""
    check = validator(schema)
    return bool(check.is_valid(_normalise(value, schema, check)))


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
    check = validator(parameters)
    value = _normalise(dict(arguments), parameters, check)
    problems = _problems(value, check)
    if problems:
        raise invalid_arguments(tool_name, parameters, problems)
    return dict(value)


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


# ---------------------------------------------------------------- normalising


def _normalise(value: Any, schema: Any, check: Validator) -> Any:
    """``value`` as the schema's author means it: tuples as lists, optional nulls dropped,
    integral floats as ints where only integers fit. Never makes a value invalid."""
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(schema, Mapping):
        return value
    if "anyOf" in schema:
        for arm in schema["anyOf"]:
            candidate = _normalise(value, arm, check)
            if _fits(candidate, arm, check):
                return candidate
        return value
    kinds = _kinds(schema)
    only_integers = "integer" in kinds and "number" not in kinds
    if isinstance(value, float) and value.is_integer() and only_integers:
        return int(value)
    if isinstance(value, list):
        prefix = schema.get("prefixItems") or []
        rest = schema.get("items")
        return [
            _normalise(item, prefix[index] if index < len(prefix) else rest, check)
            for index, item in enumerate(value)
        ]
    if isinstance(value, Mapping):
        return _normalise_object(dict(value), schema, check)
    return value


def _normalise_object(value: dict[str, Any], schema: Schema, check: Validator) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = schema.get("required") or ()
    extra = schema.get("additionalProperties")
    normalised: dict[str, Any] = {}
    for key, item in value.items():
        sub = properties.get(key, extra)
        optional = key in properties and key not in required
        if item is None and optional and not _fits(None, sub, check):
            continue
        normalised[key] = _normalise(item, sub, check)
    return normalised


def _fits(value: Any, schema: Any, check: Validator) -> bool:
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, Mapping):
        return True
    return bool(check.evolve(schema=schema).is_valid(value))


# ---------------------------------------------------------------- errors → sentences


def _problems(value: Any, check: Validator) -> list[str]:
    """Every problem, ordered as the arguments are written (missing keys first)."""
    found: list[tuple[tuple[int, ...], str]] = []
    for error in _one_per_place(check.iter_errors(value)):
        found.extend(_explain(error, value))
    found.sort(key=lambda item: item[0])
    unique: list[str] = []
    for _, text in found:
        if text not in unique:
            unique.append(text)
    return unique


def _one_per_place(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """A value of the wrong type or choice is reported once, not once per keyword."""
    errors = list(errors)
    wrong = {tuple(e.absolute_path) for e in errors if e.validator in ("type", "enum")}
    for error in errors:
        place = tuple(error.absolute_path)
        if place in wrong and error.validator not in ("type", "enum"):
            continue
        if place in wrong and error.validator == "enum" and _has_type_error(errors, place):
            continue
        yield error


def _has_type_error(errors: list[ValidationError], place: Path) -> bool:
    return any(e.validator == "type" and tuple(e.absolute_path) == place for e in errors)


def _explain(error: ValidationError, root: Any) -> list[tuple[tuple[int, ...], str]]:
    path: Path = tuple(error.absolute_path)
    name, value, schema = _name(path), error.instance, error.schema
    keyword, limit = error.validator, error.validator_value
    here = _position(root, path)
    if keyword in ("anyOf", "oneOf"):
        return _explain_choice(error, root)
    if keyword == "required":
        where, noun = (f"{name}: ", "key") if path else ("", "argument")
        missing = [key for key in limit if isinstance(value, Mapping) and key not in value]
        return [(here + (-1,), f"{where}missing required {noun} {key!r}") for key in missing]
    if keyword == "additionalProperties" and limit is False:
        where, noun = (f"{name}: ", "key") if path else ("", "argument")
        return [
            (_position(root, (*path, key)), f"{where}unexpected {noun} {key!r}")
            for key in _extra_keys(value, schema)
        ]
    if keyword == "type":
        text = f"{name} must be {_expected(schema)}, not {_describe(value)}"
    elif keyword == "enum":
        text = f"{name} must be {_expected(schema)}, not {_dump(value)}"
    else:
        text = _sentence(keyword, name, value, limit, error)
    return [(here, text)]


def _explain_choice(error: ValidationError, root: Any) -> list[tuple[tuple[int, ...], str]]:
    """An ``anyOf``/``oneOf`` miss: what is wrong inside the one arm of the right type, if
    only one has it (one bad item of a ``list | None``), else the choices in words."""
    path: Path = tuple(error.absolute_path)
    arms, value, here = error.validator_value, error.instance, _position(root, path)
    choices = _expected(error.schema)
    if error.validator == "oneOf" and not error.context:
        return [(here, f"{_name(path)} fits more than one of {choices}")]
    fitting = [index for index, arm in enumerate(arms) if _fits_type(value, arm)]
    if len(fitting) == 1:
        inner = [e for e in error.context or () if e.relative_schema_path[0] == fitting[0]]
        explained = [item for e in _one_per_place(inner) for item in _explain(e, root)]
        if explained:
            return explained
    return [(here, f"{_name(path)} must be {choices}, not {_describe(value)}")]


def _sentence(keyword: str, name: str, value: Any, limit: Any, error: ValidationError) -> str:
    """The problem a keyword found, in words."""
    bounds = {
        "minLength": ("least", "character"),
        "maxLength": ("most", "character"),
        "minItems": ("least", "item"),
        "maxItems": ("most", "item"),
        "minProperties": ("least", "key"),
        "maxProperties": ("most", "key"),
    }
    if keyword in bounds:
        word, unit = bounds[keyword]
        plural = "" if limit == 1 else "s"
        return f"{name} must have at {word} {limit} {unit}{plural}, not {len(value)}"
    comparisons = {
        "minimum": "at least",
        "maximum": "at most",
        "exclusiveMinimum": "more than",
        "exclusiveMaximum": "less than",
        "multipleOf": "a multiple of",
    }
    if keyword in comparisons:
        return f"{name} must be {comparisons[keyword]} {limit}, not {value}"
    if keyword == "uniqueItems":
        return f"{name} must not repeat items, but {_repeated(value)} appears twice"
    if keyword == "const":
        return f"{name} must be {_dump(limit)}, not {_dump(value)}"
    if keyword == "pattern":
        return f"{name} must match the pattern {limit}, not {_dump(value)}"
    if keyword == "format":
        return f"{name} must be a valid {limit}, not {_dump(value)}"
    if keyword == "not":
        return f"{name} must not be {_dump(value)}"
    return f"{name}: {error.message}"


def _extra_keys(value: Any, schema: Schema) -> list[str]:
    if not isinstance(value, Mapping):
        return []
    properties = schema.get("properties") or {}
    patterns = schema.get("patternProperties") or {}
    return [
        key
        for key in value
        if key not in properties and not any(re.search(p, key) for p in patterns)
    ]


def _repeated(value: list[Any]) -> str:
    seen: set[str] = set()
    for item in value:
        text = json.dumps(item, sort_keys=True, default=repr)
        if text in seen:
            return text
        seen.add(text)
    return "an item"


def _position(root: Any, path: Path) -> tuple[int, ...]:
    """Where ``path`` is in the arguments as written: the order problems are reported in."""
    position: list[int] = []
    node = root
    for part in path:
        if isinstance(node, Mapping):
            keys = list(node)
            position.append(keys.index(part) if part in keys else -1)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int):
            position.append(part)
            node = node[part] if part < len(node) else None
        else:
            position.append(-1)
    return tuple(position)


# ---------------------------------------------------------------- words for schemas


def _kinds(schema: Schema) -> list[str]:
    kinds = schema.get("type")
    if kinds is None:
        return []
    return [kinds] if isinstance(kinds, str) else list(kinds)


def _fits_type(value: Any, schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return bool(schema)
    if "type" not in schema:
        return not ({"anyOf", "oneOf", "enum", "const", "$ref"} & set(schema))
    return any(_is_type(value, kind) for kind in _kinds(schema))


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


def _expected(schema: Any) -> str:
    """What a schema wants, in words: ``an integer``, ``one of "a", "b"``, ``a string or null``."""
    if not isinstance(schema, Mapping):
        return "any JSON value" if schema else "nothing"
    if "enum" in schema:
        return "one of " + ", ".join(_dump(option) for option in schema["enum"])
    if "const" in schema:
        return _dump(schema["const"])
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            return " or ".join(_expected(arm) for arm in schema[choice])
    kinds = _kinds(schema)
    if not kinds:
        return "any JSON value"
    return " or ".join(_article(kind) for kind in kinds)


def _label(schema: Any) -> str:
    """A short type label for the parameter summary: ``array of string``, ``integer or null``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema or "const" in schema:
        return _expected(schema)
    for choice in ("anyOf", "oneOf"):
        if choice in schema:
            return " or ".join(_label(arm) for arm in schema[choice])
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


def _name(path: Path) -> str:
    if not path:
        return "the arguments"
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return repr(text)
