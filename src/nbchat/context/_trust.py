"""Which objects can be read without running code the notebook defined.

A read an outside agent makes (and a code suggestion's list of variables) must
run nothing of the notebook's own: no ``__repr__``, ``__len__``, ``__eq__``,
``__getattr__`` of its classes, no property of its metaclasses. So types are
named through ``type``'s own descriptors (``type.__dict__['__name__']``),
never ``cls.__name__``, which a metaclass can override; an object's type is
``type(obj)``, never ``isinstance`` (which asks the object's ``__class__``).

A type is a library's (:func:`library_type`) when its metaclass is one, its
module (read the same way) is a library's and, for a class written in
Python, the module really holds it there: a class that sets ``__module__ =
"pandas"`` is not pandas'. :func:`foreign` walks a value as far as nbchat's
describers would touch it (a frame's object columns, an array's objects, a
container's items, an exception's arguments) and names the first type of the
notebook's own it meets.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

LIBRARIES = frozenset({
    "builtins", "numpy", "pandas", "polars", "datetime", "decimal", "fractions",
    "collections", "pathlib", "uuid", "matplotlib", "PIL", "zoneinfo", "pytz", "dateutil",
    "abc", "enum", "dataclasses",
})  # fmt: skip
NOT_DESCRIBED = "Not described: showing it would run code the notebook defined"
BUDGET = 5_000_000  # objects looked at for one read, at most (about 0.1 s)
MAX_DEPTH = 12
SAMPLE_ROWS = 100_000  # the describers summarise a frame from about this many rows
HEAD_ROWS = 5
SHOWN_ITEMS = 100  # of a list, tuple or deque described (a set's are sorted: all of them)
MAX_COLUMNS = 40

_NAME = type.__dict__["__name__"]
_QUALNAME = type.__dict__["__qualname__"]
_MODULE = type.__dict__["__module__"]
_FLAGS = type.__dict__["__flags__"]
_MRO = type.__dict__["__mro__"]
_DICT = type.__dict__["__dict__"]
_HEAPTYPE = 1 << 9
_BUILTIN_LEAVES = frozenset(map(id, (
    object, str, bytes, bytearray, int, float, complex, bool, type(None), type(...),
    type(NotImplemented), range, memoryview, property, types.CodeType, types.FunctionType,
    type, types.ModuleType, types.MethodDescriptorType, types.WrapperDescriptorType,
    types.ClassMethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
)))  # fmt: skip
_IMPORTS = frozenset({"_frozen_importlib", "_frozen_importlib_external", "importlib"})
_LIBRARY_TYPES: dict[int, type] = {}  # id -> type, held so the id is never reused


class _TooMuch(Exception):
    """More to look at than a read may: named by type only."""

    def __init__(self, why: str) -> None:
        self.why = why


# -- names -------------------------------------------------------------------------------
def type_name(cls: type) -> str:
    """``cls.__name__`` as ``type`` keeps it: no metaclass property runs."""
    return str(_NAME.__get__(cls))


def module_of(cls: type) -> str:
    """The module ``cls`` says it is from, read past any metaclass; "?" if it says none."""
    try:
        module = _MODULE.__get__(cls)
    except AttributeError:
        return "?"
    return module if type(module) is str else "?"


def figure_of(obj: object) -> Any:
    """The Figure of a Figure, or of an Axes (``ax.figure``); else None."""
    figure_module = sys.modules.get("matplotlib.figure")
    if figure_module is None:
        return None
    figure_class = figure_module.Figure
    if issubclass(type(obj), figure_class):
        return obj
    if issubclass(type(obj), (type, types.ModuleType)):  # no figure; asking runs their code
        return None
    parent = getattr(obj, "figure", None)
    return parent if issubclass(type(parent), figure_class) else None


def qualified(cls: type) -> str:
    """``module.qualname`` of ``cls``, read past any metaclass."""
    qualname = _QUALNAME.__get__(cls)
    return f"{module_of(cls)}.{qualname if type(qualname) is str else type_name(cls)}"


def declared(value: object, name: str) -> Any:
    """``value.name`` if its class declares ``name``; else None, and no ``__getattr__`` runs.

    A library's ``__getattr__`` may look among the notebook's objects: a
    frame's looks for a column of that name, hashing every label.
    """
    return getattr(value, name, None) if static_lookup(type(value), name) is not None else None


def static_lookup(cls: type, name: str) -> Any:
    """``name`` as the first class of ``cls``'s MRO holds it, unbound; None if none does."""
    for klass in _MRO.__get__(cls):
        found = _DICT.__get__(klass).get(name)
        if found is not None:
            return found
    return None


# -- whose type ----------------------------------------------------------------------------
def library_type(cls: type) -> bool:
    """Whether ``cls`` is a type of Python's or of a trusted library, not the notebook's."""
    if _LIBRARY_TYPES.get(id(cls)) is cls:
        return True
    if not defined_in(cls, LIBRARIES):
        return False
    _LIBRARY_TYPES[id(cls)] = cls
    return True


def defined_in(cls: type, packages: frozenset[str]) -> bool:
    """Whether ``cls`` (and its metaclass) come from one of ``packages``, checked."""
    meta = type(cls)
    if meta is not type and not library_type(meta):
        return False
    module = module_of(cls)
    if module.partition(".")[0] not in packages:
        return False
    # A class written in Python may claim any module: it must be found there.
    return not _FLAGS.__get__(cls) & _HEAPTYPE or _found_at(module, _QUALNAME.__get__(cls)) is cls


def _found_at(module: str, qualname: object) -> object:
    """What ``module.qualname`` names, through the namespaces' dicts only."""
    place = sys.modules.get(module)
    if type(place) is not types.ModuleType or type(qualname) is not str:
        return None
    found: object = place.__dict__
    for part in qualname.split("."):
        namespace = found if type(found) is dict else (
            _DICT.__get__(found) if isinstance(found, type) else None)
        if namespace is None:
            return None
        found = namespace.get(part)
    return found


def _is_sub(cls: type, base: type | None) -> bool:
    return base is not None and any(klass is base for klass in _MRO.__get__(cls))


def kind_of(value: object) -> str:
    """A value's type and size (shape, or length), never its value, nor its own code run."""
    cls = type(value)
    name = type_name(cls)
    if not library_type(cls):
        return name
    if module_of(cls).partition(".")[0] in ("numpy", "pandas", "polars"):
        shape = declared(value, "shape")
        if type(shape) is tuple and all(type(n) is int for n in shape):
            return f"{name} {'×'.join(f'{n:,}' for n in shape)}"
    if any(_is_sub(cls, base) for base in (list, tuple, dict, set, frozenset, str, bytes)):
        return f"{name} of {len(value):,}"  # type: ignore[arg-type]
    return name


def outline(value: object) -> str:
    """Type, shape and dtype only: what can be said of a value without showing it."""
    cls = type(value)
    text = f"{kind_of(value)} (from {module_of(cls)})"
    if library_type(cls) and module_of(cls).partition(".")[0] in ("numpy", "pandas"):
        dtype = declared(value, "dtype")
        if dtype is not None and library_type(type(dtype)):
            text += f", dtype {dtype}"
    return text


# -- what a description would touch ----------------------------------------------------------
def foreign(value: object) -> str | None:
    """Why showing ``value`` would run the notebook's code ("it holds a __main__.Point"), or None.

    Parts are what nbchat's describers read: items of containers, the objects
    of arrays and of a frame's shown columns, labels, an exception's arguments.
    Past :data:`BUDGET` objects, or :data:`MAX_DEPTH` levels, the answer is
    that it holds too much to check.
    """
    walk = _Walk()
    try:
        found = walk.value(value, 0)
    except _TooMuch as too_much:
        return too_much.why
    if found is None:
        return None
    return f"it is a {found}" if found == qualified(type(value)) else f"it holds a {found}"


class _Walk:
    def __init__(self) -> None:
        self.left = BUDGET

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise _TooMuch(f"it holds more than {BUDGET:,} objects to check")

    def value(self, value: object, depth: int) -> str | None:
        cls = type(value)
        if id(cls) in _BUILTIN_LEAVES:
            return None
        if depth > MAX_DEPTH:
            raise _TooMuch(f"it nests more than {MAX_DEPTH} levels deep")
        if not library_type(cls):
            return qualified(cls)
        check = _check_for(cls)
        return None if check is None else check(self, value, depth)

    def values(self, values: Callable[[], Iterable[object]], count: int,
               depth: int) -> str | None:  # fmt: skip
        """Every one of ``values()``: their types' ids first (at C speed), then any odd one."""
        self.spend(count)
        unknown = set(map(id, map(type, values()))) - _BUILTIN_LEAVES
        if not unknown:
            return None
        kinds: dict[int, type] = {}
        for item in values():
            cls = type(item)
            if id(cls) in unknown and id(cls) not in kinds:
                kinds[id(cls)] = cls
                if len(kinds) == len(unknown):
                    break
        for cls in kinds.values():
            if not library_type(cls):
                return qualified(cls)
        inner = {key for key, cls in kinds.items() if _check_for(cls) is not None}
        for item in values() if inner else ():
            if id(type(item)) in inner and (found := self.value(item, depth + 1)):
                return found
        return None

    def each(self, items: Iterable[object], depth: int) -> str | None:
        for item in items:
            found = self.value(item, depth + 1)
            if found is not None:
                return found
        return None


Check = Callable[[_Walk, Any, int], "str | None"]
_CHECKS: dict[int, Check | None] = {}


def _check_for(cls: type) -> Check | None:
    """How to look inside a library type's objects; None when they hold nothing more."""
    if id(cls) in _CHECKS:
        return _CHECKS[id(cls)]
    check: Check | None = None
    for base, found in _checks():
        if _is_sub(cls, base):
            check = found
            break
    else:
        if module_of(cls) == "builtins":
            check = _unknown_builtin
    _CHECKS[id(cls)] = check  # library types only, held by library_type
    return check


def _unknown_builtin(walk: _Walk, value: object, depth: int) -> str:
    """A view, an iterator, a proxy: what they hold is out of reach, or they forward to it."""
    return qualified(type(value))


def _mapping(walk: _Walk, mapping: Any, depth: int) -> str | None:
    factory = declared(mapping, "default_factory")  # a defaultdict shows it
    return (walk.value(factory, depth + 1)
            or walk.values(lambda: dict.keys(mapping), len(mapping), depth)
            or walk.values(lambda: dict.values(mapping), len(mapping), depth))  # fmt: skip


def _items(walk: _Walk, items: Any, depth: int) -> str | None:
    if not depth and not _is_sub(type(items), set) and not _is_sub(type(items), frozenset):
        count = min(len(items), SHOWN_ITEMS)  # described: a sequence's first items only
        return walk.values(lambda: islice(items, SHOWN_ITEMS), count, depth)
    return walk.values(lambda: iter(items), len(items), depth)


def _wrapped(*names: str) -> Check:
    """A check of the objects held in these attributes (of types with no ``__getattr__``)."""

    def check(walk: _Walk, value: Any, depth: int) -> str | None:
        return walk.each((getattr(value, name, None) for name in names), depth)

    return check


def _exception(walk: _Walk, exc: BaseException, depth: int) -> str | None:
    """Its arguments, attributes, slots, cause and context: what its message and traceback show."""
    held: list[object] = [BaseException.__dict__["args"].__get__(exc),
                          exc.__cause__, exc.__context__]  # fmt: skip
    held += list(BaseException.__dict__["__dict__"].__get__(exc).values())
    for klass in _MRO.__get__(type(exc)):
        for slot in _DICT.__get__(klass).values():
            if type(slot) is types.MemberDescriptorType:
                try:
                    held.append(slot.__get__(exc))
                except AttributeError:
                    continue
    return walk.each(held, depth) or _frames(walk, exc.__traceback__, depth)


def _frames(walk: _Walk, tb: types.TracebackType | None, depth: int) -> str | None:
    """A traceback's frames: where their source would be fetched from, if not cached."""
    import linecache

    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_filename not in linecache.cache:
            held = [frame.f_globals.get(key) for key in ("__name__", "__loader__", "__spec__")]
            if held[2] is not None and defined_in(type(held[2]), _IMPORTS):
                held.append(getattr(held[2], "loader", None))
            for part in held:
                if part is not None and type(part) is not str and not defined_in(
                        type(part), _IMPORTS):
                    return qualified(type(part))
        walk.spend(1)
        tb = tb.tb_next
    return None


def _method(walk: _Walk, method: Any, depth: int) -> str | None:
    return walk.value(method.__func__, depth + 1)


def _bound_builtin(walk: _Walk, method: Any, depth: int) -> str | None:
    owner = method.__self__  # its qualname and signature read its type
    return None if type(owner) is types.ModuleType else walk.value(owner, depth + 1)


def _with_tz(walk: _Walk, value: Any, depth: int) -> str | None:
    return walk.value(value.tzinfo, depth + 1)


def _slice(walk: _Walk, value: slice, depth: int) -> str | None:
    return walk.each((value.start, value.stop, value.step), depth)


def _ndarray(walk: _Walk, array: Any, depth: int) -> str | None:
    if not array.dtype.hasobject:
        return None
    if type(array) is not sys.modules["numpy"].ndarray or array.dtype.kind != "O":
        return "numpy.object_"  # a record or masked array holding objects: not looked into
    flat = array.reshape(-1).tolist()  # the objects themselves, in a list: faster to walk
    return walk.values(lambda: iter(flat), len(flat), depth)


def _numpy_scalar(walk: _Walk, value: Any, depth: int) -> str | None:
    return "numpy.object_" if value.dtype.hasobject else None


def _pandas_values(walk: _Walk, values: Any, depth: int) -> str | None:
    """A column, an index or an array: its dtype, and its objects when it holds them."""
    dtype = values.dtype
    if not library_type(type(dtype)):
        return qualified(type(dtype))
    found = walk.value(dtype, depth + 1)
    if found is None and dtype.kind == "O" and not _holds_only_its_own(dtype):
        numpy = sys.modules["numpy"]
        objects = numpy.asarray(values, dtype=object).reshape(-1).tolist()
        found = walk.values(lambda: iter(objects), len(objects), depth)
    return found


def _holds_only_its_own(dtype: object) -> bool:
    """A categorical's values are its categories; a string column's, strings or NA."""
    pandas = sys.modules["pandas"]
    return _is_sub(type(dtype), pandas.CategoricalDtype) or _is_sub(type(dtype), pandas.StringDtype)


def _pandas_dtype(walk: _Walk, dtype: Any, depth: int) -> str | None:
    categories = declared(dtype, "categories")
    if categories is not None:
        found = _pandas_index(walk, categories, depth + 1)
        if found is not None:
            return found
    return walk.value(declared(dtype, "tz"), depth + 1)


def _pandas_index(walk: _Walk, index: Any, depth: int) -> str | None:
    """An index: its names, and its labels (only the first few, for a frame's own rows)."""
    found = walk.each(list(index.names), depth)
    if found is not None:
        return found
    levels = declared(index, "levels")
    if levels is not None:  # a MultiIndex: its levels hold every label
        return walk.each(levels, depth)
    return _pandas_values(walk, index, depth)


def _pandas_series(walk: _Walk, series: Any, depth: int) -> str | None:
    index = series.index if depth else series.index[:HEAD_ROWS]
    return (walk.value(series.name, depth + 1) or _pandas_index(walk, index, depth + 1)
            or _pandas_values(walk, series.array, depth))  # fmt: skip


def _pandas_frame(walk: _Walk, frame: Any, depth: int) -> str | None:
    """A frame as the describer reads it: labels, then the shown columns' sampled values."""
    columns, rows = frame.columns, frame
    index = frame.index
    if not depth:  # described: the first columns, the first rows' labels, a sample of rows
        columns, index = columns[:MAX_COLUMNS], index[:HEAD_ROWS]
        step = -(-len(frame) // SAMPLE_ROWS)
        rows = frame.iloc[::step] if step > 1 else frame
        head = frame.iloc[:HEAD_ROWS, :MAX_COLUMNS]
    found = _pandas_index(walk, columns, depth + 1) or _pandas_index(walk, index, depth + 1)
    for position in range(len(columns)):
        if found is not None:
            return found
        found = _pandas_values(walk, rows.iloc[:, position].array, depth)
        if found is None and not depth:
            found = _pandas_values(walk, head.iloc[:, position].array, depth)
    return found


def _polars(walk: _Walk, value: Any, depth: int) -> str | None:
    schema = declared(value, "schema") or {value.name: value.dtype}
    held = any("Object" in str(dtype) for dtype in schema.values())
    return "polars.Object" if held else None


def _figure(walk: _Walk, value: Any, depth: int) -> str | None:
    """A figure's axes and artists: the describer asks them for titles and labels."""
    figure = figure_of(value)
    if figure is None:
        return None
    parts: list[object] = [figure]
    for ax in figure.get_axes():
        parts += [ax, *ax.lines, *ax.collections, *ax.patches, *ax.images]
    for part in parts:
        if not library_type(type(part)):
            return qualified(type(part))
    walk.spend(len(parts))
    return None


def _checks() -> list[tuple[type | None, Check | None]]:
    """Base types and how to look inside their objects, most particular first."""
    import collections
    import datetime

    def loaded(module: str, *names: str) -> type | None:
        found: Any = sys.modules.get(module)
        for name in names:
            found = getattr(found, name, None)
        return found if isinstance(found, type) else None

    pandas = "pandas"
    return [
        (type, None), (types.ModuleType, None), (types.FunctionType, None),
        (BaseException, _exception),
        (dict, _mapping), (list, _items), (tuple, _items), (set, _items), (frozenset, _items),
        (collections.deque, _items), (collections.ChainMap, _wrapped("maps")),
        (collections.UserDict, _wrapped("data")), (collections.UserList, _wrapped("data")),
        (types.MethodType, _method), (types.BuiltinMethodType, _bound_builtin),
        (types.MethodWrapperType, _bound_builtin),
        (staticmethod, _wrapped("__func__")), (classmethod, _wrapped("__func__")),
        (slice, _slice), (datetime.datetime, _with_tz), (datetime.time, _with_tz),
        (loaded("numpy", "ndarray"), _ndarray), (loaded("numpy", "generic"), _numpy_scalar),
        (loaded(pandas, "DataFrame"), _pandas_frame), (loaded(pandas, "Series"), _pandas_series),
        (loaded(pandas, "Index"), _pandas_index),
        (loaded(pandas, "api", "extensions", "ExtensionArray"), _pandas_values),
        (loaded(pandas, "api", "extensions", "ExtensionDtype"), _pandas_dtype),
        (loaded(pandas, "Interval"), _wrapped("left", "right")),
        (loaded("polars", "DataFrame"), _polars), (loaded("polars", "Series"), _polars),
        (loaded("matplotlib.artist", "Artist"), _figure),
        (loaded("matplotlib.figure", "FigureBase"), _figure),
    ]
