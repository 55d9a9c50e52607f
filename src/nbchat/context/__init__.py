"""Live objects as context for a question: bounded descriptions a model can read.

:func:`describe` turns any object into a :class:`ContextItem`: a name, a short
kind for people ("DataFrame 1,000,000×12"), a text for the model within a
token budget, and an image when the object is one (a figure, a PIL image,
PNG/JPEG bytes). Who describes it, first match wins:

1. the object's own ``_repr_llm_()``;
2. a ``formatter`` passed in (the Jupyter layer passes IPython's
   ``text/llm+plain`` formatter; this module never imports IPython);
3. nbchat's built-ins: pandas and polars frames and series, numpy arrays,
   matplotlib figures, exceptions, containers, modules, callables;
4. a shortened ``repr``.

pandas, polars, numpy and matplotlib are never imported here: an object is
recognised only if its library is already loaded.

A question carries its context apart from its text: a user message dict with a
``"context"`` list (:meth:`ContextItem.to_dict`), which the providers send as
content parts (:func:`content_parts`) or as Ollama's text and ``images``:
:data:`CONTEXT_NOTE`, then each item in a ``<context>`` block its text cannot
close (:mod:`nbchat.base._delimiters`). Descriptions never carry the keys nbchat
uses nor the values of secret-named environment variables (:mod:`nbchat.base._secrets`).

>>> item = describe({"lr": 0.1, "epochs": 3}, "params")
>>> item.summary
'params (dict of 2)'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..base._secrets import cut_scrubbed, excerpt
from ..base.content import CHARS_PER_TOKEN as CHARS_PER_TOKEN  # importable here, as before
from ..base.content import (
    CONTEXT_NOTE,
    ContextImage,
    ContextItem,
    content_parts,
    context_line,
    estimate_tokens,
    fit,
    flatten_text,
    items_from_message,
    message_content,
)
from ..base.content import chars_within as chars_within
from ..base.errors import InputError
from ._describers import describe_builtin, short_repr
from ._images import MAX_SIDE, image_of, is_image
from ._trust import NOT_DESCRIBED, foreign, kind_of, module_of, outline, static_lookup, type_name

DEFAULT_BUDGET = 2000
Formatter = Callable[[object], "str | None"]

__all__ = [
    "CONTEXT_NOTE",
    "DEFAULT_BUDGET",
    "ContextImage",
    "ContextItem",
    "as_items",
    "content_parts",
    "context_line",
    "describe",
    "estimate_tokens",
    "flatten_text",
    "items_from_message",
    "message_content",
]


def describe(
    obj: object,
    name: str,
    *,
    budget: int = DEFAULT_BUDGET,
    formatter: Formatter | None = None,
    image: bool = True,
    max_side: int = MAX_SIDE,
    safe: bool = False,
) -> ContextItem:
    """``obj`` as a :class:`ContextItem` named ``name``, its text within ``budget`` tokens.

    Parameters
    ----------
    budget
        At most this many tokens (estimated) of text; longer descriptions are
        cut at a line and say so.
    formatter
        Called with the object when it has no ``_repr_llm_``; a str it returns
        is the description, None passes to the built-ins.
    image
        Attach figures and images as pictures (their text description stays).
    safe
        Run no code the notebook defined (outside agents' reads): an object
        holding anything of the notebook's own types, however deep, is named
        by type, shape and dtype only; no formatter, no ``repr`` on failure.
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
        raise InputError(f"the context budget is a number of tokens above 0, got {budget!r}")
    held = foreign(obj) if safe else None
    if held is not None:
        return ContextItem(name, kind_of(obj), f"{outline(obj)}. {NOT_DESCRIBED} ({held}); "
                           "ask the person, or run code in the notebook after their yes.")
    kind, text = _description(obj, None if safe else formatter, safe)
    picture = image_of(obj, max_side) if image and is_image(obj) else None
    if picture is not None:
        text += f"\n(the image is attached: {picture.width}×{picture.height} px)"
    return ContextItem(name, kind, cut_scrubbed(text, lambda whole: fit(whole, budget)), picture)


def _description(obj: object, formatter: Formatter | None, safe: bool) -> tuple[str, str]:
    try:
        return _first_description(obj, formatter)
    except Exception as exc:  # the object's own code (or an odd dtype) failed: say so, go on
        kind = type_name(type(obj))
        why = excerpt(f"{type_name(type(exc))}: {exc}", 200)
        text = f"{module_of(type(obj))}.{kind} (not described: {why})"
        return kind, text if safe else f"{text}: {short_repr(obj)}"


def _first_description(obj: object, formatter: Formatter | None) -> tuple[str, str]:
    kind = type_name(type(obj))
    own = _own_repr_llm(obj)
    if own is not None:
        return kind, own
    if formatter is not None:
        formatted = formatter(obj)
        if isinstance(formatted, str) and formatted:
            return kind, formatted
    builtin = describe_builtin(obj)
    if builtin is not None:
        return builtin
    if is_image(obj):
        return "image", f"an image ({module_of(type(obj))}.{kind})"
    return kind, f"{module_of(type(obj))}.{kind}: {short_repr(obj)}"


def _own_repr_llm(obj: object) -> str | None:
    """The object's class's ``_repr_llm_()``: looked up on the class, as ``__repr__`` is.

    Not on the object: a ``_repr_llm_`` set on a function, a module or a frame
    is the notebook's code attached to a type that does not describe itself so.
    """
    if issubclass(type(obj), type):  # a class's _repr_llm_ is for its instances
        return None
    found = static_lookup(type(obj), "_repr_llm_")
    if found is None:
        return None
    bind = static_lookup(type(found), "__get__")
    method = bind(found, obj, type(obj)) if bind is not None else found
    if not callable(method):
        return None
    value = method()
    return value if isinstance(value, str) else None


def as_items(context: Any, budget: int = DEFAULT_BUDGET) -> list[ContextItem]:
    """Context as given to ``Chat.ask``: items, ``(name, object)`` pairs or a ``{name: object}``.

    A list holds items, pairs or bare objects (described under their type's
    name); anything else is one bare object.
    """
    if isinstance(context, Mapping):
        pairs: Iterable[Any] = context.items()
    elif isinstance(context, (list, tuple)):
        pairs = context
    else:
        pairs = [context]
    items: list[ContextItem] = []
    for entry in pairs:
        if isinstance(entry, ContextItem):
            items.append(entry)
        elif isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str):
            items.append(describe(entry[1], entry[0], budget=budget))
        else:
            items.append(describe(entry, type_name(type(entry)), budget=budget))
    return items
