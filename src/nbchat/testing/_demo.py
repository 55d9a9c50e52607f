"""Default answers when no rule matches: the offline demo model's whole mind.

Deterministic on purpose, so tutorial notebooks render the same every run:
titles from the first question, simple arithmetic (parsed, never ``eval``-ed),
else a friendly echo.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ._script import (
    Body,
    context_names,
    last_tool_name,
    message_text,
    question_text,
    request_images,
)

TITLE_PHRASE = "conversation title"
_STOPWORDS = frozenset(
    {
        "a", "about", "an", "and", "any", "are", "be", "can", "could", "do", "does",
        "explain", "for", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or",
        "please", "should", "some", "tell", "that", "the", "there", "this", "to", "was",
        "what", "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
    }
)  # fmt: skip
_EXPRESSION = re.compile(r"[(\-+]*\s*\d[\d\s.+\-*/×÷^()]*")
_EXPRESSION_TOKEN = re.compile(r"\d+(?:\.\d+)?|\*\*|[-+*/×÷^()]")
_DATE = re.compile(r"\d+(?:-\d+){2,}")
_OPERATORS = {"×": "*", "÷": "/", "**": "^"}
_MAX_MAGNITUDE = Fraction(10) ** 30


def default_answer(body: Body) -> str:
    """What the demo model says to ``body`` when no scripted rule matched."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    if any(_is_title_request(m) for m in messages):
        return title_for(_first_question(messages))
    if messages and messages[-1].get("role") == "tool":
        return _tool_echo(messages)
    last = _last_user(messages)
    question = question_text(last.get("content"))
    seen = _context_seen(last)
    if seen:
        return arithmetic_answer(question) or _echo_context(question, seen)
    return arithmetic_answer(question) or _echo(question)


def _last_user(messages: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    return next((m for m in reversed(messages) if m.get("role") == "user"), {})


def _context_seen(message: Mapping[str, Any]) -> str:
    """What the demo model can say it received: the context names and the pictures."""
    names = [f"`{name}` ({kind})" for name, kind in context_names(message.get("content"))]
    pictures = len(request_images([message]))
    if pictures:
        names.append(f"{pictures} image{'s' * (pictures > 1)}")
    return ", ".join(names)


def _echo_context(question: str, seen: str) -> str:
    question = " ".join(question.split())[:200]
    return (
        f'You asked: "{question}" and attached {seen}. I am **nbchat\'s offline demo '
        "model**: I received that context but cannot reason about it; connect a real "
        "model for real answers."
    )


def _is_title_request(message: Mapping[str, Any]) -> bool:
    text = message_text(message.get("content")).casefold()
    return message.get("role") in ("system", "user") and TITLE_PHRASE in text


def _first_question(messages: list[Mapping[str, Any]]) -> str:
    users = [question_text(m.get("content")) for m in messages if m.get("role") == "user"]
    questions = [u for u in users if TITLE_PHRASE not in u.casefold()]
    return (questions or users or [""])[0]


def title_for(question: str) -> str:
    """A 3–5 word Title Case title built from the question's words.

    >>> title_for("What is the capital of France?")
    'Question About Capital France'
    """
    words = [w.strip(".,;:!?\"'()[]{}`*_") for w in question.split()]
    words = [w for w in words if w and w.casefold() not in _STOPWORDS][:5]
    if not words:
        words = ["A", "Quick", "Friendly", "Chat"]
    elif len(words) < 3:
        words = ["Question", "About", *words]
    return " ".join(w[:1].upper() + w[1:] for w in words)


def arithmetic_answer(text: str) -> str | None:
    """``"2 + 2 = 4."`` for the first simple arithmetic in ``text``, else None.

    >>> arithmetic_answer("What is 12*7?")
    '12 * 7 = 84.'
    """
    for match in _EXPRESSION.finditer(text):
        candidate = match.group().strip().rstrip(" .+-*/^×÷(")
        if _DATE.fullmatch(candidate):
            continue
        tokens = _tokenize(candidate)
        if tokens is None or sum(t[0].isdigit() for t in tokens) < 2:
            continue
        display = _display(tokens)
        try:
            value = _Parser(tokens).parse()
        except ZeroDivisionError:
            return f"{display} has no value: division by zero is undefined."
        except ValueError:
            continue
        return f"{display} = {_format_number(value)}."
    return None


def _tokenize(expression: str) -> list[str] | None:
    compact = re.sub(r"\s+", "", expression)
    tokens = _EXPRESSION_TOKEN.findall(compact)
    if "".join(tokens) != compact:
        return None
    return [_OPERATORS.get(t, t) for t in tokens]


def _display(tokens: list[str]) -> str:
    out = []
    previous = None
    for token in tokens:
        unary = token in "+-" and (previous is None or previous in "+-*/^(")
        if token in "+-*/^" and not unary:
            out.append(f" {token} ")
        else:
            out.append(token)
        previous = token
    return "".join(out)


def _format_number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return format(float(value), ".10g")


class _Parser:
    """Recursive descent over + - * / ^ and parentheses, exact with Fractions."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def parse(self) -> Fraction:
        value = self._sum()
        if self.pos != len(self.tokens):
            raise ValueError("trailing tokens")
        return value

    def _peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self) -> str:
        token = self._peek()
        if token is None:
            raise ValueError("unexpected end")
        self.pos += 1
        return token

    def _sum(self) -> Fraction:
        value = self._product()
        while self._peek() in ("+", "-"):
            operator = self._take()
            right = self._product()
            value = value + right if operator == "+" else value - right
        return value

    def _product(self) -> Fraction:
        value = self._unary()
        while self._peek() in ("*", "/"):
            operator = self._take()
            right = self._unary()
            value = _bounded(value * right if operator == "*" else value / right)
        return value

    def _unary(self) -> Fraction:
        if self._peek() in ("+", "-"):
            sign = -1 if self._take() == "-" else 1
            return sign * self._unary()
        return self._power()

    def _power(self) -> Fraction:
        base = self._atom()
        if self._peek() != "^":
            return base
        self._take()
        exponent = self._unary()
        if exponent.denominator != 1 or abs(exponent) > 64:
            raise ValueError("only small whole exponents")
        return _bounded(base**exponent.numerator)

    def _atom(self) -> Fraction:
        token = self._take()
        if token == "(":
            value = self._sum()
            if self._take() != ")":
                raise ValueError("unbalanced parenthesis")
            return value
        if not token[0].isdigit():
            raise ValueError(f"unexpected {token!r}")
        return Fraction(token)


def _bounded(value: Fraction) -> Fraction:
    if abs(value) > _MAX_MAGNITUDE:
        raise ValueError("too large for a demo")
    return value


def _echo(question: str) -> str:
    question = " ".join(question.split())
    if len(question) > 200:
        question = question[:197] + "..."
    intro = f'You asked: "{question}". ' if question else "Hello! "
    return (
        f"{intro}I am **nbchat's offline demo model**: I can do simple arithmetic "
        "and suggest titles, and otherwise echo your question; connect a real model "
        "for real answers."
    )


def _tool_echo(messages: list[Mapping[str, Any]]) -> str:
    result = " ".join(message_text(messages[-1].get("content")).split())
    name = last_tool_name(list(messages))
    source = f"The `{name}` tool" if isinstance(name, str) else "The tool"
    return f"{source} returned: {result[:200]}"
