"""``@name`` mentions: found outside code and e-mail addresses, resolved in a namespace."""

from __future__ import annotations

import pytest

from nbchat.context._mentions import Mention, find_mentions, resolve_mentions


@pytest.mark.parametrize(
    ("text", "references"),
    [
        ("What is in @df?", ["df"]),
        ("Why is @df.price skewed?", ["df.price"]),
        ("Compare @model.coef_ with @df", ["model.coef_", "df"]),
        ("Explain @In[3] and @Out[4].", ["In[3]", "Out[4]"]),
        ("@config['model'] please", ["config['model']"]),
        ("see @df.", ["df"]),
        ("(@df), @df's columns, @df again", ["df"]),
        ("mail ana@example.com or @ana", ["ana"]),
        ("A @ B is a matrix product, so is A@B", []),
        ("use `@property` here", []),
        ("``a @b`` and ` @c `", []),
        ("```python\n@decorator\ndef f(): ...\n```\nthen @x", ["x"]),
        ("~~~\n@inside\n~~~\n@outside", ["outside"]),
        ("```\n@unclosed fence", []),
        ("x@@y and @@z", []),
        ("@1abc is not a name", []),
    ],
)
def test_mentions_outside_code_and_addresses(text, references):
    assert [m.reference for m in find_mentions(text)] == references


def test_a_mention_knows_where_it_is():
    assert find_mentions("look at @df.price now") == (Mention("df.price", 8, 17),)


def test_mentions_resolve_in_the_namespace_and_unknown_ones_are_reported():
    class Model:
        coef_ = [0.5, 2.0]

    namespace = {"df": "frame", "model": Model(), "Out": {4: 42}, "In": ["", "x = 1"]}
    resolved = resolve_mentions("@df @model.coef_ @Out[4] @In[1] @nope @model.missing", namespace)
    assert resolved.found == (
        ("df", "frame"),
        ("model.coef_", [0.5, 2.0]),
        ("Out[4]", 42),
        ("In[1]", "x = 1"),
    )
    assert resolved.unresolved == ("@nope", "@model.missing")
