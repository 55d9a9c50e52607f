"""Live objects described for a model: real pandas, polars, numpy, matplotlib and PIL objects."""

from __future__ import annotations

import base64
import collections
import datetime as dt
import io
import re
import subprocess
import sys

import matplotlib
import numpy as np
import pandas as pd
import polars as pl
import pytest
from PIL import Image

from nbchat.base.errors import InputError
from nbchat.context import (
    CONTEXT_NOTE,
    ContextImage,
    ContextItem,
    content_parts,
    describe,
    estimate_tokens,
    items_from_message,
)
from nbchat.context._images import image_size

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture
def sales() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "city": ["Oslo", "Lima", "Oslo", None, "Pune"],
            "price": [10.0, 12.5, None, 8.0, 11.0],
            "units": [1, 2, 3, 4, 5],
        }
    )


@pytest.fixture
def figure():
    fig, ax = plt.subplots(figsize=(8, 6), dpi=200)
    ax.plot([1, 2, 3], [2, 4, 1], label="revenue")
    ax.scatter([1, 2], [3, 3], label="targets")
    ax.set_title("Sales by month")
    ax.set_xlabel("month")
    ax.set_ylabel("EUR")
    fig.suptitle("Q1")
    yield fig
    plt.close(fig)


def test_a_dataframe_says_shape_dtypes_nulls_rows_and_numbers(sales):
    item = describe(sales, "df")
    assert item.summary == "df (DataFrame 5×3)"
    assert item.text.splitlines()[:6] == [
        "pandas DataFrame: 5 rows × 3 columns",
        "index: RangeIndex, from 0",
        "columns (dtype, nulls):",
        f"  city: {sales['city'].dtype}, 1 null",
        "  price: float64, 1 null",
        "  units: int64, 0 null",
    ]
    assert "Oslo" in item.text and "Pune" in item.text  # the first rows
    summary = item.text.split("numeric summary:\n")[1].splitlines()
    assert summary[0].split() == ["mean", "std", "min", "max"]
    assert summary[1].split() == ["price", "10.375", "1.88746", "8", "12.5"]
    assert summary[2].split() == ["units", "3", "1.58114", "1", "5"]
    assert item.image is None


def test_a_big_dataframe_is_summarised_from_a_sample_within_budget():
    rows = 1_000_000
    df = pd.DataFrame({f"c{i}": np.arange(rows, dtype=float) for i in range(12)})
    df.loc[::4, "c3"] = np.nan
    item = describe(df, "big")
    assert item.summary == "big (DataFrame 1,000,000×12)"
    assert "  c3: float64, 250,000 null" in item.text  # exact, numbers are cheap to count
    assert "numeric summary (over every 10th row: 100,000 of 1,000,000):" in item.text
    assert estimate_tokens(item.text) <= 2000


def test_a_series_of_text_gives_its_most_frequent_values(sales):
    item = describe(sales["city"], "cities")
    assert item.kind == f"Series 5 ({sales['city'].dtype})"
    assert item.text.splitlines()[-1] == "most frequent: 'Oslo' (2), 'Lima' (1), 'Pune' (1)"


def test_a_polars_frame_and_series():
    frame = pl.DataFrame({"a": [1, 2, None], "b": ["x", "y", "z"], "f": [1.0, float("nan"), 3.0]})
    item = describe(frame, "pf")
    assert item.summary == "pf (polars DataFrame 3×3)"
    assert "  a: Int64, 1 null" in item.text and "  b: String, 0 null" in item.text
    assert "  a: 1.5, 0.707107, 1, 2" in item.text
    assert "  f: 2, 1.41421, 1, 3" in item.text  # NaN left out of the numbers
    series = describe(frame["a"], "a")
    assert series.kind == "polars Series 3 (Int64)"
    assert "first values: [1, 2, None]" in series.text


def test_an_array_gives_shape_dtype_stats_and_corners():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    item = describe(array, "m")
    assert item.summary == "m (ndarray 3×4 float32)"
    lines = item.text.splitlines()
    assert lines[0] == "numpy array: shape (3, 4), dtype float32, 12 values"
    assert lines[1] == "min 0, max 11; mean 5.5, std 3.45205; NaN in sample: 0"
    assert lines[3:] == ["[[ 0.  1.  2.  3.]", " [ 4.  5.  6.  7.]", " [ 8.  9. 10. 11.]]"]


def test_a_huge_array_is_sampled_and_its_corners_elided():
    item = describe(np.arange(10_000_000), "big")
    assert "min 0, max 9999999; mean 5e+06" in item.text
    assert "(over 100,000 evenly spaced values)" in item.text
    assert "[      0       1       2 ... 9999997 9999998 9999999]" in item.text


def test_a_figure_is_described_and_attached_as_a_bounded_png(figure):
    item = describe(figure, "fig")
    assert item.summary == "fig (Figure 1 axes)"
    assert item.text.splitlines()[:3] == [
        "matplotlib figure, 1600×1200 px, 1 axes",
        "title: 'Q1'",
        "axes 1: title 'Sales by month'; x 'month'; y 'EUR'; "
        + item.text.splitlines()[2].split("; y 'EUR'; ")[1],
    ]
    assert "1 line; 1 collection (scatter, fill); series 'revenue', 'targets'" in item.text
    image = item.image
    assert image is not None and image.mime == "image/png"
    png = base64.b64decode(image.data)
    assert (image.width, image.height) == image_size(png) == (1024, 768)
    assert item.text.endswith("(the image is attached: 1024×768 px)")
    assert describe(figure.axes[0], "ax").image is not None  # an Axes means its figure


def test_pil_images_and_png_bytes_are_shrunk_to_the_bound():
    photo = Image.new("RGB", (3000, 1500), "red")
    item = describe(photo, "photo", max_side=512)
    assert item.image is not None and (item.image.width, item.image.height) == (512, 256)
    buffer = io.BytesIO()
    Image.new("RGB", (40, 20), "blue").save(buffer, format="PNG")
    small = describe(buffer.getvalue(), "raw")
    assert small.image is not None and small.image.data_url.startswith("data:image/png;base64,")
    assert base64.b64decode(small.image.data) == buffer.getvalue()  # small enough: as given


def test_ipython_image_objects_are_images():
    from IPython.display import Image as IPImage

    buffer = io.BytesIO()
    Image.new("RGB", (2000, 100), "green").save(buffer, format="JPEG")
    item = describe(IPImage(data=buffer.getvalue()), "img", max_side=400)
    assert item.image is not None and (item.image.width, item.image.height) == (400, 20)


def test_repr_llm_wins_then_the_formatter_then_the_builtins(sales):
    class Model:
        def _repr_llm_(self) -> str:
            return "a linear model with 3 coefficients"

    assert describe(Model(), "model").text == "a linear model with 3 coefficients"
    formatter_calls = []

    def formatter(obj):
        formatter_calls.append(obj)
        return "formatted by IPython" if isinstance(obj, pd.DataFrame) else None

    assert describe(Model(), "m", formatter=formatter).text.startswith("a linear")
    assert describe(sales, "df", formatter=formatter).text == "formatted by IPython"
    assert describe([1, 2], "xs", formatter=formatter).text.startswith("list of 2 items (int)")
    assert len(formatter_calls) == 2


def test_containers_callables_modules_exceptions_and_the_rest():
    assert describe({"lr": 0.1}, "p").text == "dict with 1 items; keys ['lr']\n{'lr': 0.1}"
    assert describe({1, 2}, "s").kind == "set of 2"
    text = describe(describe, "f").text
    assert text.startswith("function nbchat.context.describe(obj: 'object', name: 'str', *,")
    assert "within ``budget`` tokens" in text
    assert describe(np, "np").text.startswith("module numpy\nfile: ")
    try:
        {}["missing"]
    except KeyError as exc:
        error = describe(exc, "err")
    assert error.kind == "KeyError"
    assert error.text.startswith("builtins.KeyError: 'missing'\ntraceback (most recent call")
    assert "KeyError: 'missing'" in error.text.splitlines()[-1]

    class Odd:
        def __repr__(self) -> str:
            raise RuntimeError("broken repr")

    odd = describe(Odd(), "o").text
    assert re.fullmatch(r"test_context\.Odd: <Odd instance at 0x[0-9a-f]+>", odd)
    assert describe("x" * 10, "s").text == "builtins.str: 'xxxxxxxxxx'"


def test_the_budget_cuts_at_a_line_and_says_so():
    long = {f"key{i}": "v" * 50 for i in range(500)}

    class Chatty:
        def _repr_llm_(self) -> str:
            return "\n".join(f"line {i} " + "x" * 60 for i in range(1000))

    item = describe(Chatty(), "c", budget=100)
    assert len(item.text) <= 400
    assert item.text.endswith("more characters left out to fit 100 tokens)")
    assert item.text.splitlines()[-2].startswith("line ")
    assert estimate_tokens(describe(long, "d", budget=50).text) <= 50
    with pytest.raises(InputError, match="context budget"):
        describe(1, "x", budget=0)


def test_items_round_trip_and_bad_saved_items_are_refused(figure):
    item = describe(figure, "fig")
    assert ContextItem.from_dict(item.to_dict()) == item
    assert items_from_message({"role": "user", "content": "q", "context": [item.to_dict()]}) == [
        item
    ]
    with pytest.raises(InputError, match="needs str 'name'"):
        ContextItem.from_dict({"name": "x"})
    with pytest.raises(InputError, match="PNG or JPEG"):
        ContextImage.from_dict({"mime": "image/gif", "data": ""})


def test_content_parts_put_the_question_first_then_the_note_then_each_item_and_its_image():
    image = ContextImage("image/png", "AAAA", 1, 1)
    items = [ContextItem("df", "DataFrame 5×3", "rows"), ContextItem("fig", "Figure", "f", image)]
    assert content_parts("Why?", items) == [
        {"type": "text", "text": "Why?"},
        {"type": "text", "text": CONTEXT_NOTE},
        {"type": "text", "text": '<context name="df" kind="DataFrame 5×3">\nrows\n</context>'},
        {"type": "text", "text": '<context name="fig" kind="Figure">\nf\n</context>'},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]


def test_describing_never_imports_an_optional_library():
    code = (
        "import sys\nfrom nbchat.context import describe\n"
        "describe({'a': 1}, 'd'); describe(b'not an image', 'b'); describe(print, 'p')\n"
        "print(sorted(m for m in ('pandas', 'numpy', 'polars', 'matplotlib', 'PIL', 'IPython')"
        " if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "[]\n"


def test_a_history_keeps_context_with_the_question_and_round_trips(sales):
    from nbchat.engine.history import ChatHistory, Message

    history = ChatHistory()
    history.chat_as_user("Why nulls?", context=[describe(sales, "df")])
    history.chat_as_llm("Because.")
    message = history.messages[0]
    assert message["content"] == "Why nulls?"
    assert message["context"] == [describe(sales, "df").to_dict()]
    again = ChatHistory.from_json(history.to_json())
    assert again == history and again[0].context == (describe(sales, "df"),)
    assert "*context: df (DataFrame 5×3)*" in history.to_markdown()
    with pytest.raises(InputError, match="context belongs to user messages"):
        Message("assistant", "x", context=(describe(1, "n"),))


def test_single_rows_and_all_nan_data_describe_quietly():
    one = describe(pd.DataFrame({"a": [1.0], "b": [np.nan]}), "one").text
    assert one.splitlines()[-3:] == [
        "   mean  std  min  max",
        "a     1  nan    1    1",
        "b   nan  nan  nan  nan",
    ]
    assert "min nan, max nan; all NaN" in describe(np.full(3, np.nan), "n").text


def test_an_object_whose_description_fails_is_still_attached():
    class Broken:
        def _repr_llm_(self) -> str:
            raise RuntimeError("no database connection")

        def __repr__(self) -> str:
            return "<Broken>"

    item = describe(Broken(), "b")
    assert item.text == (
        "test_context.Broken (not described: RuntimeError: no database connection): <Broken>"
    )


def test_a_huge_list_is_described_without_copying_it():
    item = describe(list(range(10_000_000)), "xs")
    assert item.text.startswith(
        "list of 10,000,000 items (int)\n[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]"
    )


# -- safe=True: what outside agents' reads get ------------------------------------------------
MARKS: list[str] = []


class Marker:
    """Every hook a description could call records itself."""

    def __repr__(self) -> str:
        MARKS.append("repr")
        return "marker"

    def __str__(self) -> str:
        MARKS.append("str")
        return "marker"

    def __getattribute__(self, name: str) -> object:
        MARKS.append(name)
        return object.__getattribute__(self, name)

    def __eq__(self, other: object) -> bool:
        MARKS.append("eq")
        return False

    def __hash__(self) -> int:
        MARKS.append("hash")
        return 1

    def __lt__(self, other: object) -> bool:
        MARKS.append("lt")
        return False


class MarkingZone(dt.tzinfo):
    def utcoffset(self, when: object) -> dt.timedelta:
        MARKS.append("utcoffset")
        return dt.timedelta(0)


class Pretender:
    __module__ = "pandas"
    __qualname__ = "DataFrame"

    def __repr__(self) -> str:
        MARKS.append("pretender")
        return "pretender"


def _holders() -> dict[str, object]:
    mark = Marker()
    error = AttributeError("missing")
    error.obj = mark
    figure, ax = plt.subplots()
    ax.add_line(type("OwnLine", (matplotlib.lines.Line2D,), {})([0, 1], [0, 1]))
    return {
        "object column": pd.DataFrame({"a": [1, mark]}),
        "column label": pd.DataFrame({mark: [1]}),
        "index label": pd.DataFrame({"a": [1]}, index=[mark]),
        "category": pd.Series(pd.Categorical(["a"], categories=["a", mark])),
        "object array": np.array([1, mark], dtype=object),
        "object series": pd.Series(["x", mark]),
        "polars object": pl.DataFrame({"a": [mark]}, schema={"a": pl.Object}),
        "a set": {1, mark},
        "a key": {mark: 1},
        "deep": [[{"k": [mark]}]],
        "chain map": collections.ChainMap({"k": mark}),
        "time zone": dt.datetime(2020, 1, 1, tzinfo=MarkingZone()),
        "error argument": KeyError(mark),
        "error attribute": error,
        "cause": _raised_from(mark),
        "bound method": mark.__sizeof__,
        "own artist": figure,
        "pretender": Pretender(),
    }


def _raised_from(mark: object) -> BaseException:
    try:
        try:
            raise ValueError(mark)
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize("holder", list(_holders()))
def test_safe_describes_by_type_whatever_holds_the_notebooks_objects(holder: str) -> None:
    value = _holders()[holder]
    MARKS.clear()
    item = describe(value, "v", safe=True)
    assert MARKS == []
    assert "Not described: showing it would run code the notebook defined" in item.text
    plt.close("all")


def test_safe_describes_library_values_as_before(sales: pd.DataFrame) -> None:
    values = [sales, np.arange(5), [1, "a", None], {"k": (1.5, dt.date(2020, 1, 1))},
              pd.Series(["a", "b"]), ValueError("bad"), np, describe]  # fmt: skip
    for value in values:
        assert describe(value, "v", safe=True) == describe(value, "v")


def test_a_function_is_described_without_its_own_attributes_or_defaults_running() -> None:
    MARKS.clear()

    def fit(data: object, settings: object = Marker()) -> None:
        """Fit the model."""

    fit._repr_llm_ = lambda: MARKS.append("_repr_llm_") or "told"  # type: ignore[attr-defined]
    MARKS.clear()
    for safe in (False, True):
        text = describe(fit, "fit", safe=safe).text
        head = text.splitlines()[0]
        assert head.endswith("fit(data: 'object', settings: 'object' = <Marker object>) -> 'None'")
        assert "Fit the model." in text
    assert MARKS == []
