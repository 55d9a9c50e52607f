"""Built-in descriptions of common objects, for a model to read.

Each describer takes the object and a character budget and returns
``(kind, text)``: ``kind`` is the short label shown to the person
("DataFrame 1,000,000×12"), ``text`` what the model reads. Libraries are
recognised by the object's type's module, never imported here: a DataFrame
can only exist if pandas already is. Big data is summarised from an evenly
spaced sample, and the text says so, so a description costs milliseconds
whatever the size.

Where a library cuts what it shows (pandas' column width, polars' string
length, reprlib's), the values are scrubbed of secrets before the cut: a
secret cut short is no longer recognised afterwards.
"""

from __future__ import annotations

import itertools
import reprlib
import sys
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

from ..base._secrets import REDACTED, known_secrets, scrub
from ._callables import doc_of, names_of, signature_text
from ._trust import (
    HEAD_ROWS,
    MAX_COLUMNS,
    SAMPLE_ROWS,
    SHOWN_ITEMS,
    figure_of,
    module_of,
    type_name,
)


class _ScrubbingRepr(reprlib.Repr):
    """reprlib's bounded repr, each string and repr scrubbed of secrets before it is cut."""

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(scrub(x), level)

    def repr_instance(self, x: object, level: int) -> str:
        try:
            text = scrub(repr(x))
        except Exception:  # a broken __repr__: reprlib's own stand-in for it
            return super().repr_instance(x, level)
        if len(text) <= self.maxother:
            return text
        head = max(0, (self.maxother - 3) // 2)
        tail = max(0, self.maxother - 3 - head)
        return text[:head] + "..." + text[len(text) - tail :]


_SHORT = _ScrubbingRepr()
_SHORT.maxstring = _SHORT.maxother = 120
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxdict = 10
_SHORT.maxlevel = 3

Described = tuple[str, str]


def describe_builtin(obj: object) -> Described | None:
    """``(kind, text)`` from the first built-in describer that knows ``obj``, else None."""
    for library, describers in _BY_LIBRARY.items():
        if library not in sys.modules:
            continue
        for check, describer in describers:
            if check(obj):
                return describer(obj)
    for check, describer in _GENERAL:
        if check(obj):
            return describer(obj)
    return None


def short_repr(obj: object) -> str:
    """A ``repr`` cut to a few lines, whatever the object."""
    try:
        return _SHORT.repr(obj)
    except Exception as exc:  # a broken __repr__ must not break the question
        return f"<{type_name(type(obj))} object; repr() failed: {type_name(type(exc))}>"


def _count(n: int) -> str:
    return f"{n:,}"


def _sampled(rows: int) -> tuple[int, str]:
    """The stride that keeps about SAMPLE_ROWS rows, and a note saying so."""
    if rows <= SAMPLE_ROWS:
        return 1, ""
    step = -(-rows // SAMPLE_ROWS)
    return step, f" (over every {step:,}th row: {_count(-(-rows // step))} of {_count(rows)})"


def _instance_of(module: str, name: str) -> Callable[[object], bool]:
    """A check for ``module.name`` instances that never imports ``module``."""

    def check(obj: object) -> bool:
        loaded = sys.modules.get(module)
        return loaded is not None and isinstance(obj, getattr(loaded, name))

    return check


# -- pandas -----------------------------------------------------------------------
def _pandas_frame(df: Any) -> Described:
    rows, columns = df.shape
    kind = f"DataFrame {_count(rows)}×{_count(columns)}"
    shown = df.iloc[:, :MAX_COLUMNS]
    step, note = _sampled(rows)
    sample = shown.iloc[::step] if step > 1 else shown
    lines = [f"pandas DataFrame: {_count(rows)} rows × {_count(columns)} columns"]
    if columns > MAX_COLUMNS:
        lines.append(f"(only the first {MAX_COLUMNS} columns are described)")
    lines.append(f"index: {type_name(type(df.index))}, from {short_repr(_first(df.index))}")
    lines.append("columns (dtype, nulls):")
    for position, (name, dtype) in enumerate(shown.dtypes.items()):
        lines.append(f"  {name}: {dtype}, {_nulls(shown.iloc[:, position], sample, position)}")
    lines += ["first rows:", _scrubbed_head(shown).to_string(max_colwidth=40)]
    numeric = sample.select_dtypes("number")
    if numeric.shape[1]:
        lines += [f"numeric summary{note}:", _numeric_summary(numeric)]
    return kind, "\n".join(lines)


def _scrubbed_head(frame: Any) -> Any:
    """The first rows, text cells and labels scrubbed (pandas then cuts them to the width)."""
    head = frame.head(HEAD_ROWS).copy()
    for position, (_, column) in enumerate(head.items()):
        if column.dtype.kind == "O":  # object, string and categorical columns
            head.isetitem(position, column.map(_scrubbed_cell).to_numpy(dtype=object))
    if head.index.dtype.kind == "O":
        head.index = head.index.map(_scrubbed_cell)
    return head


def _scrubbed_cell(value: object) -> object:
    """A cell whose text holds a secret, as that text scrubbed; any other as it was."""
    if isinstance(value, str):
        return scrub(value)
    try:
        text = str(value)
    except Exception:  # a broken __str__: pandas shows what it can of it
        return value
    clean = scrub(text)
    return value if clean == text else clean


def _nulls(column: Any, sample: Any, position: int) -> str:
    """Exact null count for numbers and dates (cheap); estimated from the sample otherwise."""
    if column.dtype.kind in "biufcmM" or len(sample) == len(column):
        return f"{_count(int(column.isna().sum()))} null"
    share = float(sample.iloc[:, position].isna().mean())
    if not share:
        return "no null in the sample"
    return f"about {_count(round(share * len(column)))} null (estimated from the sample)"


def _numeric_summary(numeric: Any) -> str:
    """mean, std, min, max per numeric column, computed with numpy (pandas' agg is slower)."""
    numpy = sys.modules["numpy"]
    values = numeric.to_numpy(dtype="float64", na_value=numpy.nan)
    rows = [["", "mean", "std", "min", "max"]]
    if len(values):
        with warnings.catch_warnings():  # all-NaN columns and single rows give NaN, quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            columns = [
                numpy.nanmean(values, axis=0),
                numpy.nanstd(values, axis=0, ddof=1),  # pandas' std: the sample's
                numpy.nanmin(values, axis=0),
                numpy.nanmax(values, axis=0),
            ]
        for position, name in enumerate(numeric.columns):
            rows.append([str(name), *(_float(column[position]) for column in columns)])
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join(
        "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )


def _pandas_series(series: Any) -> Described:
    rows = len(series)
    kind = f"Series {_count(rows)} ({series.dtype})"
    step, note = _sampled(rows)
    sample = series.iloc[::step] if step > 1 else series
    lines = [
        f"pandas Series {series.name!r}: {_count(rows)} values, dtype {series.dtype}, "
        f"{_count(int(series.isna().sum()))} null",
        "first values:",
        series.head(HEAD_ROWS).to_string(max_rows=HEAD_ROWS),
    ]
    if series.dtype.kind in "iufc":
        stats = sample.agg(["mean", "std", "min", "max"])
        lines.append(f"summary{note}: " + ", ".join(f"{k} {_float(v)}" for k, v in stats.items()))
    else:
        top = sample.value_counts().head(5)
        lines.append(f"most frequent{note}: " + ", ".join(f"{k!r} ({v:,})" for k, v in top.items()))
    return kind, "\n".join(lines)


def _first(index: Any) -> Any:
    return index[0] if len(index) else None


def _float(value: Any) -> str:
    """A number in at most 6 significant digits; whole numbers in full."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return f"{number:.6g}"


# -- polars -----------------------------------------------------------------------
def _polars_frame(df: Any) -> Described:
    rows, columns = df.shape
    kind = f"polars DataFrame {_count(rows)}×{_count(columns)}"
    shown = df.select(df.columns[:MAX_COLUMNS])
    nulls = shown.null_count().row(0)
    lines = [f"polars DataFrame: {_count(rows)} rows × {_count(columns)} columns"]
    if columns > MAX_COLUMNS:
        lines.append(f"(only the first {MAX_COLUMNS} columns are described)")
    lines.append("columns (dtype, nulls):")
    lines += [
        f"  {name}: {dtype}, {_count(int(n))} null"
        for (name, dtype), n in zip(shown.schema.items(), nulls, strict=True)
    ]
    polars = sys.modules["polars"]
    with polars.Config(
        tbl_cols=MAX_COLUMNS,
        tbl_hide_dataframe_shape=True,
        tbl_width_chars=400,
        tbl_formatting="ASCII_MARKDOWN",
    ):
        lines += ["first rows:", str(_polars_scrubbed(shown.head(HEAD_ROWS)))]
    stats = [_polars_stats(shown.get_column(name)) for name in shown.columns]
    numeric = [f"  {name}: {s}" for name, s in zip(shown.columns, stats, strict=True) if s]
    if numeric:
        lines += ["numeric summary (mean, std, min, max):", *numeric]
    return kind, "\n".join(lines)


def _polars_scrubbed(frame: Any) -> Any:
    """The frame with secrets replaced in its text columns (polars then cuts long strings)."""
    polars = sys.modules["polars"]
    text = polars.col(polars.String)
    secrets = sorted(known_secrets(), key=len, reverse=True)  # a key inside a longer one
    for secret in secrets:
        text = text.str.replace_all(secret, REDACTED, literal=True)
    return frame.with_columns(text) if secrets else frame


def _polars_series(series: Any) -> Described:
    kind = f"polars Series {_count(len(series))} ({series.dtype})"
    lines = [
        f"polars Series {series.name!r}: {_count(len(series))} values, dtype {series.dtype}, "
        f"{_count(series.null_count())} null",
        f"first values: {short_repr(series.head(HEAD_ROWS).to_list())}",
    ]
    stats = _polars_stats(series)
    if stats:
        lines.append(f"summary (mean, std, min, max): {stats}")
    return kind, "\n".join(lines)


def _polars_stats(series: Any) -> str:
    if not series.dtype.is_numeric():
        return ""
    if series.dtype.is_float():
        series = series.fill_nan(None)
    return ", ".join(_float(f()) for f in (series.mean, series.std, series.min, series.max))


# -- numpy ------------------------------------------------------------------------
def _ndarray(array: Any) -> Described:
    numpy = sys.modules["numpy"]
    shape = "×".join(_count(n) for n in array.shape) or "scalar"
    kind = f"ndarray {shape} {array.dtype}"
    lines = [f"numpy array: shape {array.shape}, dtype {array.dtype}, {_count(array.size)} values"]
    if array.size and array.dtype.kind in "biuf":
        sample, note = array, ""
        if array.size > SAMPLE_ROWS:
            positions = numpy.linspace(0, array.size - 1, SAMPLE_ROWS).astype(numpy.intp)
            sample = array.flat[positions]
            note = f" (over {_count(SAMPLE_ROWS)} evenly spaced values)"
        values = sample.astype(numpy.float64, copy=False)
        nans = int(numpy.isnan(values).sum()) if array.dtype.kind == "f" else 0
        summary = "all NaN"
        with warnings.catch_warnings():  # an all-NaN array gives NaN, quietly
            warnings.simplefilter("ignore", RuntimeWarning)
            if nans < values.size:
                mean, std = numpy.nanmean(values), numpy.nanstd(values)
                summary = f"mean {_float(mean)}, std {_float(std)}"
            extremes = f"min {_float(numpy.nanmin(array))}, max {_float(numpy.nanmax(array))}"
        lines.append(f"{extremes}; {summary}{note}; NaN in sample: {nans:,}")
    corner = numpy.array2string(array, threshold=60, edgeitems=3, max_line_width=100)
    lines += ["values (corners):", corner]
    return kind, "\n".join(lines)


# -- matplotlib ---------------------------------------------------------------------
def _is_figure(obj: object) -> bool:
    return figure_of(obj) is not None


def _figure(obj: Any) -> Described:
    figure = figure_of(obj)
    width, height = figure.get_size_inches() * figure.dpi
    axes = figure.get_axes()
    kind = f"Figure {len(axes)} axes"
    lines = [f"matplotlib figure, {width:.0f}×{height:.0f} px, {len(axes)} axes"]
    title = getattr(figure, "get_suptitle", lambda: "")()
    if title:
        lines.append(f"title: {title!r}")
    for number, ax in enumerate(axes, 1):
        lines.append(f"axes {number}: " + _axes_text(ax))
    return kind, "\n".join(lines)


def _axes_text(ax: Any) -> str:
    parts = []
    for label, value in (("title", ax.get_title()), ("x", ax.get_xlabel()),
                         ("y", ax.get_ylabel())):  # fmt: skip
        if value:
            parts.append(f"{label} {value!r}")
    parts.append(f"x range {_range(ax.get_xlim())}, y range {_range(ax.get_ylim())}")
    counts = [(len(ax.lines), "line"), (len(ax.collections), "collection (scatter, fill)"),
              (len(ax.patches), "patch (bar, shape)"), (len(ax.images), "image")]  # fmt: skip
    parts += [f"{n} {what}{'s' * (n > 1)}" for n, what in counts if n]
    labels = [h.get_label() for h in ax.lines + ax.collections]
    shown = [lbl for lbl in labels if lbl and not lbl.startswith("_")]
    if shown:
        parts.append("series " + ", ".join(repr(lbl) for lbl in shown[:20]))
    return "; ".join(parts)


def _range(limits: Any) -> str:
    low, high = limits
    return f"{_float(low)}–{_float(high)}"


# -- the standard library -------------------------------------------------------------
def _exception(exc: BaseException) -> Described:
    kind = type_name(type(exc))
    lines = [f"{module_of(type(exc))}.{kind}: {exc}"]
    if exc.__traceback__ is not None:
        tail = traceback.format_exception(type(exc), exc, exc.__traceback__)
        lines += ["traceback (most recent call last, tail):", "".join(tail[-8:]).rstrip()]
    return f"{kind}", "\n".join(lines)


def _container(obj: Any) -> Described:
    kind = f"{type_name(type(obj))} of {_count(len(obj))}"
    sample = short_repr(obj)
    if isinstance(obj, dict):
        keys = short_repr(list(itertools.islice(obj, 30)))
        return kind, f"{type_name(type(obj))} with {_count(len(obj))} items; keys {keys}\n{sample}"
    types_seen = sorted({type_name(type(x)) for x in itertools.islice(obj, SHOWN_ITEMS)})
    head = f"{type_name(type(obj))} of {_count(len(obj))} items ({', '.join(types_seen)})"
    return kind, f"{head}\n{sample}"


def _module(module: types.ModuleType) -> Described:
    """From the module's dict: its own __dir__ or __getattr__ is code, and is not run."""
    held = module.__dict__
    name, file = (held.get(key) for key in ("__name__", "__file__"))
    name = name if type(name) is str else "?"
    public = sorted(n for n in held if type(n) is str and not n.startswith("_"))
    lines = [f"module {name}", f"file: {file if type(file) is str else None}"]
    lines += [_doc_head(module), f"{len(public)} public names: {', '.join(public[:40])}"]
    return f"module {name}", "\n".join(line for line in lines if line)


def _callable(obj: Any) -> Described:
    what, module, name = names_of(obj)
    lines = [f"{what} {module + '.' if module else ''}{name}{signature_text(obj)}",
             _doc_head(obj)]  # fmt: skip
    return f"{what} {name}", "\n".join(line for line in lines if line)


def _doc_head(obj: object) -> str:
    return doc_of(obj).split("\n\n")[0].strip()


def _is_container(obj: object) -> bool:
    return isinstance(obj, (dict, list, tuple, set, frozenset))


_BY_LIBRARY: dict[str, list[tuple[Callable[[object], bool], Callable[[Any], Described]]]] = {
    "pandas": [
        (_instance_of("pandas", "DataFrame"), _pandas_frame),
        (_instance_of("pandas", "Series"), _pandas_series),
    ],
    "polars": [
        (_instance_of("polars", "DataFrame"), _polars_frame),
        (_instance_of("polars", "Series"), _polars_series),
    ],
    "numpy": [(_instance_of("numpy", "ndarray"), _ndarray)],
    "matplotlib": [(_is_figure, _figure)],
}
_GENERAL: list[tuple[Callable[[object], bool], Callable[[Any], Described]]] = [
    (lambda obj: isinstance(obj, BaseException), _exception),
    (_is_container, _container),
    (lambda obj: isinstance(obj, types.ModuleType), _module),
    (callable, _callable),
]
