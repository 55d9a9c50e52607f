"""Whether code the model wants to run needs the person's yes: the approval policy.

Three policies, strictest first: ``always`` ask (the default), ``risky`` (run
without asking only code this module proves harmless), ``never-ask``. An
administrator caps the policy with ``NBCHAT_MAX_APPROVAL``. The cap is read
when nbchat is first imported and kept; the stricter of that, the variable's
value now and the user's choice wins, so neither a setting nor code that
changes ``os.environ`` can lift it.

The check reads the code's syntax tree and the notebook's namespace and runs
nothing. It is an allowlist (:mod:`nbchat.context._allowlist`): code runs at once only
if every part of it is on the list, and anything else asks. Each reason is a
short phrase for the prompt.

>>> classify("[x * 2 for x in range(10)]").is_risky
False
>>> classify("import os; os.remove('data.csv')").reasons
('imports os',)
>>> classify("f = open; f('data.csv', 'w')", {"open": open}).reasons
('uses open, which is not on the list',)
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..base._visible import hidden_in, name

# The approval policy itself lives in nbchat.base.policy, the administrator's module;
# the names other than effective_approval stay importable from here.
from ..base.policy import APPROVALS as APPROVALS
from ..base.policy import Approval as Approval
from ..base.policy import check_approval as check_approval
from ..base.policy import effective_approval
from ..base.policy import max_approval as max_approval
from ._check import reasons_in

_SHELL_LINE = re.compile(r"^\s*(?:[\w.,\s]+=\s*)?[!%]", re.MULTILINE)


@dataclass(frozen=True)
class Risk:
    """What the check found: risky or not, and why (each reason a short phrase)."""

    reasons: tuple[str, ...] = ()

    @property
    def is_risky(self) -> bool:
        return bool(self.reasons)


def classify(
    code: str,
    namespace: Mapping[str, object] | None = None,
    transform: Callable[[str], str] | None = None,
) -> Risk:
    """Why ``code`` needs a yes, run in ``namespace`` (no reasons: proven harmless).

    Names are looked up in ``namespace``, the notebook's variables; without
    one, every name that is not a listed builtin is risky. ``transform`` is
    what the runner does to code before running it (IPython's
    ``transform_cell``): code it would rewrite is not the code checked, so it
    is risky.
    """
    risk = _classify(code, namespace)
    if risk.is_risky or transform is None or transform(code).strip() == code.strip():
        return risk
    return Risk(("IPython rewrites this code before it runs",))


def _classify(code: str, namespace: Mapping[str, object] | None) -> Risk:
    if next(hidden_in(code), None) is not None:
        return Risk(("holds characters that draw nothing or reorder the text around them",))
    shell = [line.strip() for line in code.splitlines() if _SHELL_LINE.match(line)]
    if shell:
        return Risk(tuple(f"runs an IPython shell or magic line: {line[:60]}" for line in shell))
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as exc:
        return Risk((f"does not parse as Python ({type(exc).__name__}), so it cannot be checked",))
    try:
        return Risk(tuple(dict.fromkeys(reasons_in(tree, namespace))))
    except RecursionError:
        return Risk(("is nested too deeply to check",))


def needs_approval(
    code: str,
    approval: str,
    cap: str | None = None,
    namespace: Mapping[str, object] | None = None,
    transform: Callable[[str], str] | None = None,
) -> bool:
    """Whether running ``code`` in ``namespace`` must wait for a yes under the capped policy."""
    policy = effective_approval(approval, cap)
    if policy == "always":
        return True
    if policy == "risky":
        return classify(code, namespace, transform).is_risky
    return False


_LITERALS = frozenset(
    {tokenize.STRING, tokenize.COMMENT} | {getattr(tokenize, kind) for kind in
                                           ("FSTRING_MIDDLE", "TSTRING_MIDDLE")
                                           if hasattr(tokenize, kind)}
)


def hidden_outside_literals(code: str) -> list[str]:
    """Each hidden character of ``code`` outside a string or a comment, as ``U+… on line N``.

    Inside a literal such a character changes a value (the prompt marks it);
    anywhere else it changes what the code does while drawing nothing, so the
    code must not run as it is. Code that does not tokenize counts as outside.
    """
    found = list(hidden_in(code))
    if not found:
        return []
    inside = _literal_spans(code)
    return [
        f"{name(char)} on line {line}" for offset, line, char in found
        if inside is None or not any(start <= offset < end for start, end in inside)
    ]


def _literal_spans(code: str) -> list[tuple[int, int]] | None:
    starts = [0]
    for line in io.StringIO(code).readlines():
        starts.append(starts[-1] + len(line))
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in _LITERALS:
                (row, col), (end_row, end_col) = token.start, token.end
                spans.append((starts[row - 1] + col, starts[end_row - 1] + end_col))
    except (tokenize.TokenError, SyntaxError, IndexError):
        return None
    return spans
