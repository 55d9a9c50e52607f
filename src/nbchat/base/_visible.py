"""Characters that draw nothing or move the text around them, found and made visible.

What a person approves is what they see, so code awaiting a yes, and text
printed to a terminal, must not hold characters that draw differently from
what they are:

*hidden* characters (:func:`hidden_in`)
    direction controls (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C),
    zero-width and other format characters (U+200B–U+200D, U+2060, U+FEFF,
    soft hyphens, tags), control characters other than newline and tab (a
    lone carriage return draws one line over another), line and paragraph
    separators, spaces other than the plain one, and the fillers and
    selectors that Python accepts inside names yet no font draws. Each is
    shown as its escape (``\\u202e``), which is also what Python reads it as
    inside a string.
*terminal controls* (:func:`for_terminal`)
    what a terminal obeys: ESC and the other C0 controls but newline and
    tab, DEL, the C1 controls (``\\x9b`` is a CSI too), a carriage return
    not followed by a newline, and the direction controls.

>>> escape_hidden('if mode != "dry-run\\u202e":')
'if mode != "dry-run\\\\u202e":'
>>> for_terminal("REAL\\r\\x1b[2KFAKE")
'REAL\\\\r\\\\x1b[2KFAKE'
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator

__all__ = ["TerminalStream", "escape", "escape_hidden", "for_terminal", "hidden_in", "is_hidden",
           "summary"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Drawn as nothing (or as blank) yet not a format character: fillers Python takes in
# names, the combining grapheme joiner, variation selectors, the blank braille cell.
_BLANK = "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0" \
         "\U000e0100-\U000e01ef"
# Format (Cf), control (Cc) but \t and \n, separators (Zl, Zp), spaces but U+0020 (Zs),
# noncharacters, plus the blank ones above. CR is matched alone; CRLF is a line break.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00a0\u00ad\u0600-\u0605\u061c\u06dd\u070f"
    "\u0890\u0891\u08e2\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f"
    "\u3000\ufdd0-\ufdef\ufeff\ufff9-\ufffb\ufffe\uffff\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    f"\U000e0020-\U000e007f{_BLANK}]|\r(?!\n)"
)
_TERMINAL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]|\r(?!\n)")
_NEWLINES = re.compile(r"\r\n")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def without_colours(text: str) -> str:
    """``text`` without a terminal's escape sequences (colours, cursor moves, titles)."""
    return _ANSI.sub("", text)


def hidden_in(text: str) -> Iterator[tuple[int, int, str]]:
    """Each hidden character of ``text``: its offset, its 1-based line number, itself."""
    line = 1
    position = 0
    for match in _HIDDEN.finditer(text):
        line += text.count("\n", position, match.start())
        position = match.start()
        yield position, line, match.group()


def is_hidden(char: str) -> bool:
    """Whether the one character ``char`` is hidden (what :func:`hidden_in` finds)."""
    return _HIDDEN.fullmatch(char) is not None


def escape(char: str) -> str:
    """``char`` as Python writes it in a string: ``\\r``, ``\\x1b``, ``\\u202e``, ``\\U…``."""
    point = ord(char)
    if char in "\r\t\n":
        return {"\r": "\\r", "\t": "\\t", "\n": "\\n"}[char]
    if point < 0x100:
        return f"\\x{point:02x}"
    return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"


def name(char: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``, or the code point alone for unnamed controls."""
    label = unicodedata.name(char, "")
    if not label:
        label = {"\r": "CARRIAGE RETURN", "\x1b": "ESCAPE", "\x7f": "DELETE"}.get(char, "")
    return f"U+{ord(char):04X} {label}".rstrip()


def escape_hidden(text: str) -> str:
    """``text`` with every hidden character written as its escape."""
    return _HIDDEN.sub(lambda match: escape(match.group()), text)


def split_hidden(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as runs of ordinary text (False) and single hidden characters (True)."""
    at = 0
    for match in _HIDDEN.finditer(text):
        if match.start() > at:
            yield text[at:match.start()], False
        yield match.group(), True
        at = match.end()
    if at < len(text):
        yield text[at:], False


def summary(text: str, *, lead: str = "This code holds", escaped: bool = False) -> str:
    """One line naming the hidden characters of ``text`` and where they are; "" if none.

    ``lead`` begins the sentence, its verb included ("These arguments hold").
    ``escaped``: the text is kept with the escapes in place of the characters
    (a cell ``--code`` fills, an editor), not with the characters themselves.

    >>> summary("a = 1\\nb = '\\u200b'").partition(": ")[2].partition(";")[0]
    'U+200B ZERO WIDTH SPACE on line 2. It is shown as its escape (\\\\u200b)'
    """
    found = list(hidden_in(text))
    if not found:
        return ""
    lines: dict[str, list[int]] = {}
    for _, line, char in found:
        lines.setdefault(char, [])
        if line not in lines[char]:
            lines[char].append(line)
    counts = Counter(char for _, _, char in found)
    named = "; ".join(
        f"{name(char)}{f' ×{counts[char]}' if counts[char] > 1 else ''} on "
        f"{_lines(lines[char])}" for char in lines
    )
    many = len(found) != 1
    noun = f"{len(found)} character{'s' * many} that draw{'s' * (not many)} nothing or " \
           f"reorder{'s' * (not many)} the text around {'them' if many else 'it'}"
    shown = "Each is shown as its escape" if many else "It is shown as its escape"
    example = escape(found[0][2])
    if escaped:
        kept = "the escapes are kept in their place" if many else \
               "the escape is kept in its place"
    else:
        kept = "what runs holds the characters themselves" if many else \
               "what runs holds the character itself"
    return f"{lead} {noun}: {named}. {shown} ({example}); {kept}."


def _lines(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:5]) + (", …" if len(numbers) > 5 else "")
    return f"line{'s' * (len(numbers) > 1)} {shown}"


def for_terminal(text: str) -> str:
    """``text`` safe to print: terminal controls written as escapes, line breaks kept.

    A terminal (or a notebook's stream output, which obeys CR and colours)
    must never receive an escape sequence, a CR that rewrites a line, or a
    direction control from the model or an endpoint.
    """
    text = _NEWLINES.sub("\n", text)
    return _TERMINAL.sub(lambda match: escape(match.group()), text)


class TerminalStream:
    """:func:`for_terminal` over a stream of chunks: a CRLF split between two stays a line break."""

    def __init__(self) -> None:
        self._cr = False

    def feed(self, chunk: str) -> str:
        """The chunk safe to print; a CR at its end waits for the next chunk."""
        if self._cr:
            chunk, self._cr = "\r" + chunk, False
        if chunk.endswith("\r"):
            chunk, self._cr = chunk[:-1], True
        return for_terminal(chunk)

    def close(self) -> str:
        """What is still held back (a lone CR, shown as its escape)."""
        held, self._cr = self._cr, False
        return for_terminal("\r") if held else ""
