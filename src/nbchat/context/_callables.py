"""A callable's name, signature and docstring, read without running code the notebook defined.

``inspect.signature`` and ``inspect.getdoc`` look things up: ``__signature__``
and ``__wrapped__`` in a function's dict, a class's ``__init__`` through its
metaclass, the ``repr`` of every default, the ``__module__`` of every
annotation. Here they run only when what they would look up is plain (see
:mod:`._trust`), and defaults or annotations of the notebook's own types are
written by type (``<Config object>``) instead of by their ``repr``.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, cast

from ._trust import defined_in, foreign, library_type, module_of, static_lookup, type_name

_QUALNAME = type.__dict__["__qualname__"]
_MRO = type.__dict__["__mro__"]
_DICT = type.__dict__["__dict__"]
_FLAGS = type.__dict__["__flags__"]
_HEAPTYPE = 1 << 9
_LOOKED_UP = ("__signature__", "__text_signature__", "_partialmethod", "__partialmethod__")
_MAX_WRAPS = 20
_TYPING = frozenset({"typing"})


class _Shown:
    """Stands in for a default or annotation in a signature: its repr is the given text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def names_of(obj: object) -> tuple[str, str | None, str]:
    """``("class" or "function", module, qualname)`` of a callable."""
    if issubclass(type(obj), type):  # never isinstance: it would ask obj for __class__
        cls = cast(type, obj)
        qualname = _QUALNAME.__get__(cls)
        return "class", module_of(cls), qualname if type(qualname) is str else type_name(cls)
    if type(obj) is types.FunctionType:
        held = obj.__module__
        return "function", held if type(held) is str else None, obj.__qualname__
    if foreign(obj) is not None:
        return "function", None, type_name(type(obj))
    name, module = getattr(obj, "__qualname__", None), getattr(obj, "__module__", None)
    return ("function", module if type(module) is str else None,
            name if type(name) is str and name else type_name(type(obj)))  # fmt: skip


def doc_of(obj: object) -> str:
    """The docstring inspect.getdoc would give, from the dicts alone (no descriptor runs)."""
    doc: object = None
    if issubclass(type(obj), type):
        for klass in _MRO.__get__(obj):
            doc = _DICT.__get__(klass).get("__doc__") if klass is not object else None
            if doc is not None:
                break
    elif type(obj) is types.FunctionType:
        doc = obj.__doc__
    elif type(obj) is types.MethodType:  # getdoc would ask its __self__ for __class__
        return doc_of(obj.__func__)
    elif type(obj) is types.ModuleType:
        doc = obj.__dict__.get("__doc__")
    elif foreign(obj) is None:
        doc = inspect.getdoc(obj)
    return inspect.cleandoc(doc) if type(doc) is str else ""


def signature_text(obj: object) -> str:
    """``(a, b=1)`` for ``obj``, or ``(…)`` when reading it would run the notebook's code."""
    if not _plain(obj):
        return "(…)"
    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(…)"
    parameters = [
        parameter.replace(default=_value(parameter.default),
                          annotation=_annotation(parameter.annotation, 0))
        for parameter in signature.parameters.values()
    ]  # fmt: skip
    shown = signature.replace(parameters=parameters,
                              return_annotation=_annotation(signature.return_annotation, 0))
    return str(shown)


def _plain(obj: object) -> bool:
    """Whether inspect.signature looks up only plain things on ``obj`` (and what it wraps)."""
    cls = type(obj)
    if cls is types.FunctionType:
        return _plain_function(obj)
    if cls is types.MethodType:
        return type(obj.__func__) is types.FunctionType and _plain_function(obj.__func__)  # type: ignore[attr-defined]
    if issubclass(cls, type):
        return library_type(cls) and _plain_class(obj)  # type: ignore[arg-type]
    if cls in (types.BuiltinFunctionType, types.MethodWrapperType):
        owner = obj.__self__  # type: ignore[attr-defined]
        return owner is None or type(owner) is types.ModuleType or foreign(owner) is None
    return library_type(cls) and foreign(obj) is None


def _plain_function(function: Any) -> bool:
    for _ in range(_MAX_WRAPS):
        held = function.__dict__
        if any(held.get(name) is not None for name in _LOOKED_UP):
            return False
        if type(function.__defaults__) not in (tuple, type(None)):
            return False
        if type(function.__kwdefaults__) not in (dict, type(None)):
            return False
        if type(function.__annotations__) is not dict:
            return False
        if "__wrapped__" not in held:
            return True
        function = held["__wrapped__"]
        if type(function) is not types.FunctionType:
            return False
    return False


def _plain_class(cls: type) -> bool:
    """Its own ``__init__``/``__new__`` plain functions; nothing that answers for a signature."""
    for klass in _MRO.__get__(cls):
        held = _DICT.__get__(klass)
        if _FLAGS.__get__(klass) & _HEAPTYPE and any(name in held for name in _LOOKED_UP):
            return False
    for name in ("__init__", "__new__"):
        found = static_lookup(cls, name)
        if type(found) in (staticmethod, classmethod):
            found = found.__func__
        if type(found) is types.FunctionType:
            if not _plain_function(found):
                return False
        elif found is not None and not library_type(type(found)):
            return False
    return True


def _value(value: object) -> object:
    if value is inspect.Parameter.empty or foreign(value) is None:
        return value
    return _Shown(f"<{type_name(type(value))} object>")


def _annotation(annotation: object, depth: int) -> object:
    """The annotation if writing it reads only plain names; else its type's name."""
    if _plain_annotation(annotation, depth):
        return annotation
    if issubclass(type(annotation), type):
        return _Shown(type_name(annotation))  # type: ignore[arg-type]
    return _Shown(type_name(type(annotation)))


def _plain_annotation(annotation: object, depth: int) -> bool:
    cls = type(annotation)
    if annotation is inspect.Parameter.empty or annotation is None or annotation is ...:
        return True
    if cls is str:
        return True
    if issubclass(cls, type):  # written from its __module__ and __qualname__, and
        return (library_type(cls) and module_of(annotation) != "?"  # type: ignore[arg-type]
                and all(static_lookup(annotation, name) is None  # type: ignore[arg-type]
                        for name in ("__origin__", "__args__")))  # fmt: skip
    if depth > 4:
        return False
    if cls not in (types.GenericAlias, types.UnionType) and not defined_in(cls, _TYPING):
        return library_type(cls) and foreign(annotation) is None
    import typing

    parts = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if type(parts) is not tuple:
        return False
    return all(_plain_annotation(part, depth + 1) for part in (*parts, origin))
