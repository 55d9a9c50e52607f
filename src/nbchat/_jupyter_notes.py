"""Notes in the cell: the Jupyter layer's notifier for :mod:`nbchat._notices`.

A note is one dimmed line (small Markdown, its ``%env …`` commands as code)
with a plain-text twin for terminals and saved notebooks, sent as
``display_data``: never on stderr, which Jupyter paints as an error.
"""

from __future__ import annotations

import re

from IPython import get_ipython
from IPython.display import display

from ._notices import print_note

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
_COMMAND = re.compile(r"(%env \S+)")


def show_note(text: str) -> None:
    """Display ``text`` as a calm note in the current output (stderr with no shell left)."""
    if get_ipython() is None:
        print_note(text)
        return
    display({"text/markdown": to_markdown(text), "text/plain": text}, raw=True)


def to_markdown(text: str) -> str:
    """The note as one line of small Markdown, commands as inline code."""
    parts = _COMMAND.split(text)
    rendered = [
        f"`{part}`" if index % 2 else _MARKDOWN_SPECIAL.sub(r"\\\1", part)
        for index, part in enumerate(parts)
    ]
    return f"<small>{''.join(rendered)}</small>"
