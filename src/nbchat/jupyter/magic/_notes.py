"""Notes in the cell: the Jupyter layer's notifier for :mod:`nbchat.base._notices`.

A note is one dimmed line (small text, its ``%env …`` commands as code)
with a plain-text twin for terminals and saved notebooks, sent as
``display_data``: never on stderr, which Jupyter paints as an error.
"""

from __future__ import annotations

import re

from IPython import get_ipython
from IPython.display import display

from ...base import markup
from ...base._notices import print_note

_COMMAND = re.compile(r"(%env \S+)")


def show_note(text: str) -> None:
    """Display ``text`` as a calm note in the current output (stderr with no shell left)."""
    if get_ipython() is None:
        print_note(text)
        return
    display(markup.bundle(to_html(text), text), raw=True)


def to_html(text: str) -> markup.SafeHTML:
    """The note as one line of small text, commands as inline code."""
    parts = _COMMAND.split(text)
    rendered = [
        markup.code_inline(part) if index % 2 else markup.text(part)
        for index, part in enumerate(parts)
    ]
    return markup.element("small", markup.join(rendered, ""))
