"""``{name}`` interpolation for questions typed in a magic: a small, pure function.

Only a brace pair around a *reference* is a candidate: a name, then any number
of ``.attr`` and ``[key]`` steps (``{df}``, ``{df.shape}``, ``{In[3]}``,
``{config['model']}``). A candidate whose name is in the namespace and whose
steps all resolve becomes ``str(value)``; one that does not stays as typed and
is reported. Every other brace (pasted code, JSON, ``{x + 1}``, ``{ name }``,
the ``${name}`` of shell and JavaScript templates) stays exactly as typed, so
nothing in the text can break the question. ``{{ref}}`` gives the literal
``{ref}``.

This is deliberately not ``str.format_map``: that raises on the first ``{`` of
pasted code.

>>> interpolate("Explain {name} in {{name}}", {"name": "pandas"}).text
'Explain pandas in {name}'
>>> interpolate('Fix {"a": 1} and {missing}', {}).unresolved
('{missing}',)
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..base._secrets import scrub_pieces

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_KEY = r"-?\d+|'[^'\\]*'|\"[^\"\\]*\"|" + _NAME
_REFERENCE = rf"{_NAME}(?:\.{_NAME}|\[(?:{_KEY})\])*"
_CANDIDATE = re.compile(
    r"(?<!\$)"  # ${name}: shell and JavaScript templates stay as typed
    rf"(?:\{{\{{\{{(?P<braced>{_REFERENCE})\}}\}}\}}"  # {{{x}}}: the value in braces
    rf"|\{{\{{(?P<escaped>{_REFERENCE})\}}\}}"  # {{x}}: literal {x}
    rf"|\{{(?P<reference>{_REFERENCE})\}})"
)
_STEP = re.compile(rf"\.({_NAME})|\[({_KEY})\]")


@dataclass(frozen=True)
class Interpolated:
    """The text with references replaced, and the references left as typed."""

    text: str
    unresolved: tuple[str, ...] = ()


def interpolate(text: str, namespace: Mapping[str, Any]) -> Interpolated:
    """Replace each ``{reference}`` that resolves in ``namespace`` by its ``str()``."""
    unresolved: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group("escaped") is not None:
            return "{" + match.group("escaped") + "}"
        braced = match.group("braced")
        reference = braced or match.group("reference")
        found, value = resolve(reference, namespace)
        if not found:
            unresolved.append("{" + reference + "}")
            return match.group(0)
        shown = scrub_pieces(str(value))  # as for @name; pieces too: pandas cuts wide cells
        return "{" + shown + "}" if braced else shown

    result = _CANDIDATE.sub(replace, text)
    return Interpolated(result, tuple(dict.fromkeys(unresolved)))


def resolve(reference: str, namespace: Mapping[str, Any]) -> tuple[bool, Any]:
    """(True, value) when ``name.attr[key]…`` resolves in ``namespace``, else (False, None)."""
    name = re.match(_NAME, reference)
    assert name is not None
    if name.group(0) not in namespace:
        return False, None
    value = namespace[name.group(0)]
    for step in _STEP.finditer(reference, name.end()):
        attribute, key = step.group(1), step.group(2)
        try:
            value = getattr(value, attribute) if attribute else value[_key(key)]
        except Exception:  # whatever the object raises, the reference stays as typed
            return False, None
    return True, value


def _key(text: str) -> int | str:
    """``[3]`` and ``[-1]`` index by int, ``['a']`` by that string, ``[a]`` by ``'a'``."""
    if text[0] in "'\"" or text.lstrip("-").isdigit():
        key: int | str = ast.literal_eval(text)
        return key
    return text
