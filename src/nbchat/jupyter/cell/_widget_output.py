"""What the prompts and the panel share: showing an error in the widget, and an Output handle.

:func:`shows_errors` wraps a widget method so an :class:`~nbchat.NbchatError`
goes to the widget's ``show_error`` (where the person looks) instead of up to
the comm handler. :class:`OutputHandle` is the display handle of an Output
widget, which the renderer streams into from widget callbacks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as widgets
from IPython import get_ipython
from IPython.core.formatters import DisplayFormatter

from ...base.errors import NbchatError

__all__ = ["OutputHandle", "shows_errors"]

F = TypeVar("F", bound=Callable[..., Any])


def shows_errors(method: F) -> F:
    """Show an NbchatError raised by a widget method in its owner, instead of raising it.

    The owner's ``show_error`` puts the message where the person looks (the
    prompt, the panel's status line); the input they typed is left alone.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except NbchatError as error:
            self.show_error(error)
            return None

    return wrapper  # type: ignore[return-value]


class OutputHandle:
    """A display handle whose display is an Output widget's synced state.

    ``update`` replaces the widget's outputs through its state, so it works
    from a widget callback (where ``display`` reaches no cell) and inside an
    Output widget (which captures new outputs but ignores display updates).
    """

    def __init__(self, output: widgets.Output | None = None) -> None:
        self.output = output if output is not None else widgets.Output()

    def __repr__(self) -> str:
        return f"<OutputHandle {self.text[:40]!r}>"

    def display(self, obj: object, **kwargs: Any) -> None:
        self.update(obj, **kwargs)

    def update(
        self, obj: object, *, raw: bool = False, metadata: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        """Show ``obj`` (or, with ``raw``, the mimebundle ``obj``) instead of what was there."""
        if raw:
            data, meta = dict(obj), {}  # type: ignore[call-overload]
        else:
            data, meta = _formatter().format(obj)
        meta.update(metadata or {})
        self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": meta},)

    def clear(self) -> None:
        self.output.outputs = ()

    @property
    def data(self) -> dict[str, Any]:
        """The mimebundle shown now (empty when nothing is)."""
        outputs = self.output.outputs
        return dict(outputs[-1].get("data", {})) if outputs else {}

    @property
    def text(self) -> str:
        """What is shown, as plain text."""
        return str(self.data.get("text/plain", ""))


_DEFAULT_FORMATTER: DisplayFormatter | None = None


def _formatter() -> DisplayFormatter:
    global _DEFAULT_FORMATTER
    shell = get_ipython()
    if shell is not None:
        return shell.display_formatter
    if _DEFAULT_FORMATTER is None:
        _DEFAULT_FORMATTER = DisplayFormatter()
    return _DEFAULT_FORMATTER
