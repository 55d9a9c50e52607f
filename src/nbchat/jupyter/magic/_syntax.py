"""The syntax of ``%chat`` lines: questions that end in ``?``, and options before text.

IPython reads a line ending in ``?`` as a help request before any magic sees
it (``%chat What is Python?`` becomes ``pinfo Python``).
:func:`protect_chat_questions` is an input transformer for
``InteractiveShell.input_transformers_cleanup`` (the documented hook that runs
before IPython's own syntax): it rewrites such a ``%chat`` line into the call
IPython would have made for it, ``get_ipython().run_line_magic('chat', …)``,
so the ``?`` stays part of the question (after options too:
``%chat -m MODEL Why?``). ``%chat?`` alone still asks IPython for help.

:func:`split_options` splits ``-m MODEL --no-stream What's up?`` into the option
words for argparse and the text after them, kept exactly as typed (a
question is never shell-split, so its quotes and apostrophes survive).
"""

from __future__ import annotations

import re
import shlex
import tokenize
from collections.abc import Callable
from typing import Any

MAGIC = "chat"
_QUESTION = re.compile(rf"%{MAGIC}[ \t]+(?P<question>\S.*?\?)[ \t]*\r?\n?\Z")
_WORD = re.compile(r"""(?:[^\s"']+|"(?:[^"\\]|\\.)*"|'[^']*'|["'])+""")


def protect_chat_questions(lines: list[str]) -> list[str]:
    """Rewrite ``%chat QUESTION?`` lines (also ``x = %chat …?``) so ``?`` is not help.

    Finds the lines with IPython's tokenizer, like IPython's own transformers,
    so text inside a multi-line string is never touched. Never raises: on any
    surprise the lines go on unchanged.
    """
    if not lines or lines[0].lstrip().startswith("%%") or not _has_candidate(lines):
        return lines
    try:
        rows = _question_rows(lines)
    except Exception:  # an input transformer must never break a cell
        return lines
    lines = list(lines)
    for row, col in rows:
        match = _QUESTION.match(lines[row], col)
        if match is not None:
            call = f"get_ipython().run_line_magic({MAGIC!r}, {match.group('question')!r})"
            lines[row] = lines[row][:col] + call + "\n"
    return lines


def _has_candidate(lines: list[str]) -> bool:
    return any(f"%{MAGIC}" in line and line.rstrip().endswith("?") for line in lines)


def _question_rows(lines: list[str]) -> list[tuple[int, int]]:
    """(row, column) of each ``%`` that starts a ``%chat`` line magic, 0-based."""
    from IPython.core.inputtransformer2 import make_tokens_by_line

    found = []
    for tokens in make_tokens_by_line(lines):
        tokens = [t for t in tokens if t.type not in (tokenize.INDENT, tokenize.DEDENT)]
        for index in _magic_starts(tokens):
            percent, name = tokens[index], tokens[index + 1]
            row = percent.start[0] - 1
            continued = lines[row].rstrip("\r\n").endswith("\\")  # IPython joins those
            if name.string == MAGIC and name.start == percent.end and not continued:
                found.append((row, percent.start[1]))
    return found


def _magic_starts(tokens: list[tokenize.TokenInfo]) -> list[int]:
    """Where a line magic may start: first on the line, or right after the first ``=``."""
    if len(tokens) < 2:
        return []
    starts = [0] if tokens[0].string == "%" else []
    for index, token in enumerate(tokens[:-2]):
        if token.type == tokenize.OP and token.string == "=":
            if tokens[index + 1].string == "%":
                starts.append(index + 1)
            break
    return starts


def split_options(line: str, arity: Callable[[str], int | None]) -> tuple[list[str], str]:
    """The leading option words (unquoted) and the rest of ``line`` exactly as typed.

    ``arity(option)`` says how many values follow an option word: 0 for a
    flag, None for one optional value. Options end at the first word that
    is not an option or an option's value, or at ``--``.
    """
    words: list[str] = []
    position, expecting, optional = 0, 0, False
    while True:
        match = _WORD.match(line, _skip_space(line, position))
        if match is None:
            break
        word = _unquote(match.group(0))
        if expecting and not (optional and word.startswith("-")):
            words.append(word)
            expecting -= 1
        elif word == "--":
            position = match.end()
            break
        elif word.startswith("-") and word != "-":
            words.append(word)
            count = arity(word)
            expecting, optional = (1, True) if count is None else (count, False)
        else:
            break
        position = match.end()
    return words, line[position:].strip()


def _skip_space(line: str, position: int) -> int:
    while position < len(line) and line[position].isspace():
        position += 1
    return position


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word:
        return word
    try:
        parts = shlex.split(word)
    except ValueError:  # an unbalanced quote is just a character
        return word
    return parts[0] if len(parts) == 1 else word


def option_arity(parser: Any, word: str) -> int | None:
    """How many values follow ``word`` in ``parser``'s options: 0, a count, or None for "?"."""
    actions = parser._option_string_actions
    option = word.split("=", 1)[0]
    if "=" in word or (option[:2] != "--" and len(option) > 2):
        return 0  # --opt=value, -mMODEL
    if option not in actions:
        matches = [name for name in actions if name.startswith(option) and name[:2] == "--"]
        option = matches[0] if len(matches) == 1 else option
    action = actions.get(option)
    if action is None or action.nargs == 0:
        return 0
    if action.nargs == "?":
        return None
    return action.nargs if isinstance(action.nargs, int) else 1
