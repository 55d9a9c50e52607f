"""Reading what a question carried on the wire, as content parts, however it was sent."""

from __future__ import annotations

import re
from typing import Any

from nbchat.context import CONTEXT_NOTE


def content_parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as parts: a text-only question comes as one string, split back here.

    The string is the question, the context note, then each ``<context>`` block,
    joined by blank lines; parts (with images) pass unchanged.
    """
    if isinstance(content, list):
        return content
    question, note, rest = content.partition(f"\n\n{CONTEXT_NOTE}\n\n")
    texts = [question]
    if note:
        texts.append(CONTEXT_NOTE)
        texts += re.split(r"\n\n(?=<context name=)", rest)
    return [{"type": "text", "text": text} for text in texts]
