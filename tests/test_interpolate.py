"""``{name}`` interpolation of questions: only references that resolve, nothing else."""

from __future__ import annotations

import pytest

from nbchat.context._interpolate import Interpolated, interpolate, resolve


class Frame:
    shape = (3, 4)
    name = "sales"

    @property
    def broken(self) -> object:
        raise RuntimeError("a property that fails")


NS = {
    "name": "pandas",
    "df": Frame(),
    "In": ["", "x = 1", "df.describe()"],
    "Out": {2: "count 3", 3: 42},
    "config": {"model": "llama3.2", "k": "by bare word", 1: "by int"},
    "items": ["a", "b", "c"],
    "_": "last",
    "empty": "",
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Explain {name}", "Explain pandas"),
        ("{df.shape}", "(3, 4)"),
        ("{df.name}", "sales"),
        ("{In[2]}", "df.describe()"),
        ("{Out[3]}", "42"),
        ("{config['model']}", "llama3.2"),
        ('{config["model"]}', "llama3.2"),
        ("{config[k]}", "by bare word"),
        ("{config[1]}", "by int"),
        ("{items[-1]}", "c"),
        ("{_}", "last"),
        ("[{empty}]", "[]"),
        ("{name} and {name}", "pandas and pandas"),
        ("multi\nline {name}\n", "multi\nline pandas\n"),
    ],
)
def test_references_that_resolve_are_replaced(text: str, expected: str) -> None:
    assert interpolate(text, NS) == Interpolated(expected, ())


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "b": {"c": [1, 2]}}',  # JSON, nested braces and all
        "def f():\n    return {x: 1 for x in y}\n",  # a comprehension
        "{x + 1}",
        "{ name }",  # spaces: not a reference
        "{}",
        "{0}",
        "{name!r}",
        "{name:>10}",
        "{df.shape[0}",  # unbalanced
        "only an opening { brace",
        "only a closing } brace",
        "}{",
        "${HOME} and %(name)s",
        "const s = `Hello ${name}`;",
        "{{ jinja }}",
    ],
)
def test_other_braces_stay_exactly_as_typed(text: str) -> None:
    assert interpolate(text, NS) == Interpolated(text, ())


@pytest.mark.parametrize(
    ("text", "unresolved"),
    [
        ("{missing}", ("{missing}",)),
        ('print(f"{value}")', ("{value}",)),
        ("{df.nope}", ("{df.nope}",)),
        ("{df.broken}", ("{df.broken}",)),
        ("{config[nokey]}", ("{config[nokey]}",)),
        ("{items[9]}", ("{items[9]}",)),
        ("{len}", ("{len}",)),  # builtins are not the notebook's variables
        ("{a} {b} {a}", ("{a}", "{b}")),  # each once, in order
    ],
)
def test_references_that_do_not_resolve_stay_and_are_reported(
    text: str, unresolved: tuple[str, ...]
) -> None:
    assert interpolate(text, NS) == Interpolated(text, unresolved)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{name}}", "{name}"),
        ("{{df.shape}}", "{df.shape}"),
        ("{{missing}}", "{missing}"),  # escaped: not reported either
        ("{{{name}}}", "{pandas}"),
        ("keep {{name}}, use {name}", "keep {name}, use pandas"),
    ],
)
def test_doubled_braces_escape_a_reference(text: str, expected: str) -> None:
    assert interpolate(text, NS) == Interpolated(expected, ())


def test_values_are_inserted_once_never_interpolated_again() -> None:
    namespace = {"code": "{name}", "name": "pandas"}
    assert interpolate("{code}", namespace).text == "{name}"


def test_the_text_is_never_formatted_with_format_map() -> None:
    text = "{0} {name!s} {:d} {name}"
    assert interpolate(text, NS).text == "{0} {name!s} {:d} pandas"


def test_resolve_reports_whether_a_reference_resolves() -> None:
    assert resolve("df.shape", NS) == (True, (3, 4))
    assert resolve("missing", NS) == (False, None)
    assert resolve("config[nokey]", NS) == (False, None)
