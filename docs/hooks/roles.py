"""Griffe extension: the Sphinx roles in nbchat's docstrings become links, checked.

nbchat's docstrings name other objects as ``:class:`Chat```,
``:func:`~nbchat.base.markup.markdown```, … Each one is looked up in the
package (from the object's own scope outward, then from the top). A name that
nbchat does not have fails the strict build; one it has becomes a link where
the API reference shows that object, and stays code where it does not. Names
outside nbchat (``:class:`str```) stay code.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj):`(~?)(\.?)([\w.]+)(\(\))?`")

log = logging.getLogger("mkdocs.hooks.roles")


def _lookup(scope: griffe.Object, path: str) -> griffe.Object | griffe.Alias | None:
    try:
        return scope[path]
    except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def resolve(obj: griffe.Object, package: griffe.Module, target: str) -> str | None:
    """The canonical path ``target`` names, seen from ``obj``; None if nbchat has no such object."""
    scopes: list[Any] = []
    scope: Any = obj
    while scope is not None:
        scopes.append(scope)
        scope = scope.parent
    relative = target.removeprefix(f"{package.name}.")
    for scope in [*scopes, package]:
        found = _lookup(scope, relative if scope is package else target)
        if found is not None:
            try:
                return found.canonical_path
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                return found.path
    return None


class SphinxRoles(griffe.Extension):
    """Rewrite every role of every docstring in the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None and ROLE.search(obj.docstring.value):
                obj.docstring.value = ROLE.sub(functools.partial(_link, obj, pkg),
                                               obj.docstring.value)



def _link(obj: griffe.Object, pkg: griffe.Module, match: re.Match[str]) -> str:
    """The role as code, linked where the reference shows its object; a warning if none."""
    short, relative, target, call = match.groups()
    shown = f"<code>{target.rsplit('.', 1)[-1] if short else target}{call or ''}</code>"
    path = resolve(obj, pkg, target)
    if path is None:
        if relative or target.startswith(f"{pkg.name}.") or target.split(".")[0] in pkg.members:
            log.warning(f"{obj.path}: the docstring names {target}, which nbchat has not")
        return shown
    return f'<autoref identifier="{path}" optional>{shown}</autoref>'


def _walk(obj: griffe.Object):
    yield obj
    for member in obj.members.values():
        if not member.is_alias and member.parent is obj:
            yield from _walk(member)
