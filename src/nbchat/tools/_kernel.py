"""Tool, and kernel tools: Python functions the model may call, run in the kernel.

:func:`tool` builds a function's schema from its type hints and docstring;
the arguments the model sends are checked against it before the function runs.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping
from typing import Any, overload

from ..base.errors import (
    ToolDefinitionError,
)
from ._arguments import load_arguments
from ._schema import function_schema

Arguments = str | Mapping[str, Any]
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""The longest free-text answer, in characters, after stripping."""


def _check_name(name: object, what: str, fix: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolDefinitionError(
            f"{what}: {name!r} is not a valid tool name (1 to 64 letters, digits, '_' or '-'); "
            f"{fix}"
        )
    return name


class Tool:
    """What the chat engine needs of any tool: its name, description and parameters schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI ``tools`` format (a copy: changing it changes nothing here)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.parameters),
            },
        }

    def parse_arguments(self, arguments: Arguments) -> dict[str, Any]:
        """Check the LLM's arguments (JSON text or a dict) against :attr:`parameters`.

        Raises :class:`~nbchat.base.errors.InvalidToolArguments`, whose message is
        written for the LLM: every problem found, then the parameters to send.
        """
        return load_arguments(self.name, self.parameters, arguments)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


# ---------------------------------------------------------------- kernel tools


class KernelTool(Tool):
    """A Python function the LLM may call; it runs in the kernel. Made by :func:`tool`.

    Calling the tool calls the function, so a decorated function keeps working
    as before. :meth:`parse_arguments` returns Python values: Enum members,
    tuples and floats where the hints ask for them.
    """

    func: Callable[..., Any]

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        if isinstance(func, KernelTool):
            func = func.func
        if not callable(func):
            raise ToolDefinitionError(f"{func!r} is not a function; @tool decorates functions")
        label = f"{func.__name__}()" if hasattr(func, "__name__") else repr(func)
        if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
            raise ToolDefinitionError(
                f"cannot make a tool of {label}: async functions are not supported; "
                "write a plain def (run the coroutine inside it if you must)"
            )
        self.func = func
        self.name = _check_name(
            getattr(func, "__name__", None) if name is None else name,
            f"cannot make a tool of {label}",
            "pass one, e.g. @tool(name='lookup_city')",
        )
        self.description, self.parameters, self._converters = function_schema(
            func, label, description
        )
        self._positional_only = [
            param
            for param in inspect.signature(func).parameters.values()
            if param.kind is param.POSITIONAL_ONLY
        ]
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def parse_arguments(self, arguments: Arguments) -> dict[str, Any]:
        values = super().parse_arguments(arguments)
        return {key: self._converters[key](value) for key, value in values.items()}

    def run(self, arguments: Arguments) -> str:
        """Check the arguments, call the function and return its result as text.

        A str result is returned as it is, anything else as JSON (``str()`` for
        what JSON cannot hold). Exceptions raised by the function propagate.
        """
        values = self.parse_arguments(arguments)
        positional = [values.pop(param.name, param.default) for param in self._positional_only]
        result = self.func(*positional, **values)
        if isinstance(result, str):
            return result
        return json.dumps(result, default=str, ensure_ascii=False)


@overload
def tool(
    func: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> KernelTool: ...


@overload
def tool(
    func: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], KernelTool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> KernelTool | Callable[[Callable[..., Any]], KernelTool]:
    """Make a Python function a tool the LLM may call; use as ``@tool`` or ``@tool(name=...)``.

    Parameters
    ----------
    func
        The function. Its type hints give the schema: str, int, float, bool,
        None, ``list[X]``, ``tuple[X, Y]``, ``dict[str, X]``, ``Literal[...]``,
        Enum subclasses, ``X | None``, ``Annotated[X, "description"]`` and
        ``Any``. A parameter without a hint takes the type of its default
        when that is a str, int, float or bool, and is a string otherwise.
        Parameters with defaults are optional.
    name
        The name the LLM sees; the function's name by default.
    description
        What the LLM is told the tool does; the docstring's first paragraph by
        default. Parameter descriptions come from the docstring's numpydoc
        ``Parameters`` or Google ``Args:`` section.

    Raises
    ------
    ToolDefinitionError
        For ``*args``, ``**kwargs``, positional-only parameters without a hint,
        hints JSON cannot carry, async functions and names the LLM API refuses.
    """
    if func is None:
        return functools.partial(KernelTool, name=name, description=description)
    return KernelTool(func, name=name, description=description)


# ---------------------------------------------------------------- client tools


"""The default instances of the built-in client tools: ask_user, choose, confirm."""


# ---------------------------------------------------------------- registry


