"""What the ``risky`` approval policy lets run without asking: the lists, and nothing else.

Each list names things that compute new values from data and touch no file,
network, process or interpreter state. docs/security/what-runs.md shows them as they are
here; a name that is not here asks.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterator
from functools import lru_cache
from typing import Any


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


BUILTINS = _names(
    """abs all any ascii bin bool bytes callable chr complex dict dir divmod enumerate filter
    float format frozenset hash hex id int isinstance issubclass iter len list map max min next
    oct ord pow print range repr reversed round set slice sorted str sum tuple zip Ellipsis
    display"""
)
"""Builtins that may be called or passed on; ``display`` only called, and without options."""

MODULES: dict[str, frozenset[str]] = {
    "math": _names(
        """sqrt floor ceil log log10 log2 log1p exp expm1 pow fabs isclose isnan isinf isfinite
        factorial comb perm gcd lcm hypot dist sin cos tan asin acos atan atan2 sinh cosh tanh
        degrees radians prod fsum trunc copysign fmod modf remainder pi e tau inf nan"""
    ),
    "statistics": _names(
        """mean median mode stdev pstdev variance pvariance quantiles fmean geometric_mean
        harmonic_mean median_low median_high median_grouped multimode correlation covariance
        linear_regression"""
    ),
    "numpy": _names(
        """array asarray arange linspace logspace zeros ones full eye identity zeros_like
        ones_like full_like mean median average std var sum prod cumsum cumprod min max amin amax
        argmin argmax ptp percentile quantile nanmean nanmedian nansum nanstd nanvar nanmin nanmax
        abs absolute sqrt square exp log log10 log2 log1p expm1 sin cos tan arcsin arccos arctan
        arctan2 sinh cosh tanh degrees radians floor ceil round around rint trunc clip sign where
        unique sort argsort concatenate stack vstack hstack column_stack reshape transpose ravel
        squeeze expand_dims dot matmul inner outer cross diff gradient corrcoef cov histogram
        bincount digitize isnan isinf isfinite isclose allclose array_equal any all count_nonzero
        nonzero maximum minimum add subtract multiply divide power mod tile repeat flip roll
        interp convolve searchsorted meshgrid diag trace float64 float32 int64 int32 int16 int8
        uint8 bool_ complex128 nan inf pi e newaxis"""
    ),
    "pandas": _names(
        """DataFrame Series Index concat merge merge_asof to_datetime to_numeric to_timedelta
        date_range period_range timedelta_range cut qcut pivot_table get_dummies isna isnull
        notna notnull unique factorize melt Timestamp Timedelta Categorical NA NaT"""
    ),
    "polars": _names(
        """DataFrame Series col lit concat when len Int64 Int32 Float64 Float32 Utf8 String
        Boolean Date Datetime"""
    ),
}
"""Modules whose listed names may be used once the notebook has imported them."""

POLARS_EXPRESSIONS = _names("col lit when len")
"""polars functions that always make an expression (never a string a method could be named by)."""

METHODS = _names(
    """head tail describe info mean median mode sum prod min max std var sem skew kurt count
    nunique unique value_counts quantile cumsum cumprod cummax cummin cumcount abs round clip
    corr cov corrwith idxmax idxmin argmax argmin nlargest nsmallest sort_values sort_index
    groupby agg aggregate apply applymap map transform pipe size first last nth ngroup rank diff
    pct_change shift isna isnull notna notnull fillna ffill bfill dropna drop drop_duplicates
    duplicated rename rename_axis reset_index set_index set_axis reindex filter astype copy
    where mask isin between any all memory_usage transpose melt pivot pivot_table stack unstack
    explode merge join assign resample rolling expanding ewm sample select_dtypes equals
    combine_first sub mul div truediv floordiv mod pow dot le lt ge gt eq ne keys values
    items get iterrows itertuples to_numpy to_list tolist to_dict to_frame to_pandas to_series
    to_dicts to_period to_timestamp interpolate squeeze get_group ohlc add_prefix add_suffix
    infer_objects convert_dtypes replace droplevel swaplevel xs asfreq align compare factorize
    searchsorted
    contains startswith endswith lower upper strip lstrip rstrip len split rsplit extract
    extractall findall slice pad zfill title capitalize center ljust rjust isdigit isalpha
    isalnum isnumeric isdecimal isspace islower isupper strftime year month day hour minute
    second weekday quarter day_name month_name normalize floor ceil tz_localize tz_convert
    reshape flatten ravel argsort swapaxes item take repeat diagonal trace ptp conj conjugate
    select with_columns group_by alias over cast is_null is_not_null fill_null fill_nan
    drop_nulls n_unique null_count limit vstack hstack unpivot with_row_index estimated_size
    rows row glimpse top_k bottom_k then otherwise is_in is_between cum_sum
    splitlines find rfind index rindex casefold rpartition swapcase removeprefix
    removesuffix union intersection difference symmetric_difference issubset issuperset
    isdisjoint bit_length is_integer as_integer_ratio"""
)
"""Methods of data (pandas, polars, numpy objects and Python's own) that return new values."""

ATTRIBUTES = _names(
    """shape columns index dtypes dtype T values size ndim iloc loc at iat str dt cat name names
    empty nbytes real imag array hasnans is_unique is_monotonic_increasing
    is_monotonic_decreasing nlevels levels codes categories ordered axes groups ngroups schema
    height width start stop step date time days seconds"""
)
"""Attributes of data that may be read without calling them."""

BY_NAME = _names("agg aggregate apply applymap map transform pipe pivot_table")
"""Calls given a function, or a method's name (``df.agg("sum")``): it must be listed."""

GIVEN_A_FUNCTION = _names("map filter")
"""Builtins given a function first: it must be listed."""

BY_NAME_KEYWORDS = _names("func aggfunc key")
"""Keywords that give a function to call, or a method's name, in any call."""

IN_PLACE_KEYWORDS = _names("inplace out")

OUT_POSITION = {
    **dict.fromkeys(_names("round min max any all argmax argmin ptp dot"), 1),
    **dict.fromkeys(_names("clip cumsum cumprod take mean sum prod std var"), 2),
    "trace": 4,
}
"""Where numpy's methods take ``out`` by position (0-based); its functions take it one later."""

_PLAIN_TYPES = (str, bytes, list, tuple, dict, set, frozenset, int, float, complex, range)
_LIBRARY_CLASSES = {
    "pandas": "DataFrame Series Index Timestamp Timedelta Categorical",
    "pandas.core.groupby": "DataFrameGroupBy SeriesGroupBy",
    "pandas.core.window.rolling": "Rolling Expanding",
    "pandas.core.resample": "Resampler",
    "pandas.core.strings.accessor": "StringMethods",
    "pandas.core.indexes.accessors": "DatetimeProperties",
    "numpy": "ndarray generic dtype",
    "polars": "DataFrame Series Expr LazyFrame",
    "polars.dataframe.group_by": "GroupBy",
}


def member_names() -> frozenset[str]:
    """The public attribute names of Python's and the loaded data libraries' own classes.

    An attribute of data that is none of these is a column (``df.price``); one
    of these that is not listed (``df.to_csv``, ``df.style``) asks.
    """
    return _member_names(tuple(module in sys.modules for module in _LIBRARY_CLASSES))


@lru_cache(maxsize=8)
def _member_names(loaded: tuple[bool, ...]) -> frozenset[str]:
    return frozenset(
        name for cls in _classes() for name in dir(cls) if not name.startswith("_")
    )


def _classes() -> Iterator[type]:
    yield from _PLAIN_TYPES
    for module_name, class_names in _LIBRARY_CLASSES.items():
        module = sys.modules.get(module_name)
        for class_name in class_names.split():
            cls = getattr(module, class_name, None)
            if isinstance(cls, type):
                yield cls


def importable(module: str) -> bool:
    """A listed module the notebook has loaded already, so importing it runs nothing."""
    return module in MODULES and module in sys.modules


def listed_functions() -> list[object]:
    """The listed builtins and loaded modules' listed names, as objects."""
    found = [getattr(builtins, name) for name in BUILTINS if hasattr(builtins, name)]
    for module_name, names in MODULES.items():
        module = sys.modules.get(module_name)
        if module is not None:
            found += [getattr(module, name) for name in names if hasattr(module, name)]
    return [item for item in found if callable(item)]


MAX_ITEMS = 100_000
"""The most items of the notebook's containers the check looks through."""
TOO_MANY = object()
_PLAIN = frozenset({int, float, complex, bool, str, bytes, type(None), range, type(Ellipsis)})
_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def first_foreign(value: object) -> object | None:
    """The first object in ``value`` that is not data (None: all of it is; TOO_MANY: too big).

    Python's own containers, numpy arrays of objects and the object cells,
    labels, names and ``attrs`` of pandas objects are looked through, at most
    MAX_ITEMS items; a polars object with an Object column is not data.
    """
    stack, seen, budget = [value], set(), MAX_ITEMS
    while stack:
        item = stack.pop()
        if type(item) in _PLAIN:
            continue
        inside = _inside(item)
        if inside is None:
            if _is_library_data(item):
                continue
            return item
        if id(item) in seen:
            continue
        seen.add(id(item))
        budget -= len(inside)
        if budget < 0:
            return TOO_MANY
        stack += inside
    return None


def _inside(item: Any) -> list[object] | None:
    """What ``item`` holds that can be anything, to look through; None if it is no container.

    Python's containers; a numpy array of objects (every element); a pandas
    frame, series or index with object or category cells or labels, names or
    ``attrs`` (those, which a method could reach and call).
    """
    if type(item) is dict:
        return [*item.keys(), *item.values()]
    if type(item) in _CONTAINERS:
        return list(item)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(item, numpy.ndarray):
        return list(item.flat) if item.dtype.hasobject else None
    pandas = sys.modules.get("pandas")
    if pandas is None or not isinstance(item, (pandas.DataFrame, pandas.Series, pandas.Index)):
        return None
    parts: list[object] = []
    axes = [item] if isinstance(item, pandas.Index) else [item, *item.axes]
    for axis in axes:
        if isinstance(axis, pandas.DataFrame):
            held = [i for i, dtype in enumerate(axis.dtypes) if _holds_anything(dtype)]
            if held:
                parts += list(axis.iloc[:, held].to_numpy(dtype=object).flat)
        elif _holds_anything(axis.dtype):
            parts += list(axis.to_numpy(dtype=object).flat)
        if isinstance(axis, pandas.Index):
            parts += [name for name in axis.names if name is not None]
    if isinstance(item, pandas.Series) and item.name is not None:
        parts.append(item.name)
    if item.attrs:
        parts.append(dict(item.attrs))
    return parts or None


def _holds_anything(dtype: Any) -> bool:
    """A pandas dtype whose cells may be any Python object."""
    return str(dtype) in ("object", "category")


def _is_library_data(value: object) -> bool:
    """A pandas, polars or numpy object that holds data (not a file, store or lazy query)."""
    if callable(value):
        return False
    module = type(value).__module__
    library = module.partition(".")[0]
    if library == "pandas":
        return module == "pandas" or module.startswith(("pandas.core.", "pandas._libs."))
    loaded = sys.modules.get(library)
    if library == "numpy" and loaded is not None:
        return isinstance(value, (loaded.ndarray, loaded.generic, loaded.dtype)) and not (
            isinstance(value, loaded.memmap)
        )
    if library == "polars" and loaded is not None:
        if isinstance(value, (loaded.DataFrame, loaded.Series)):  # an Object column holds anything
            dtypes = value.dtypes if isinstance(value, loaded.DataFrame) else [value.dtype]
            return not any(dtype == loaded.Object for dtype in dtypes)
        return isinstance(value, loaded.Expr)
    return False
