"""Toolbox: the tools one question offers, by name, as the model's schemas."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..base.errors import (
    ToolDefinitionError,
    ToolError,
)
from ._client import ClientTool, _check_client_tool
from ._kernel import Tool, tool


class Toolbox:
    """The tools offered to the LLM in a turn, by name.

    Built from tools (``KernelTool``, ``ClientTool`` instances or subclasses)
    and plain functions, which are wrapped with :func:`tool`.
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            made = _as_tool(item)
            if made.name in self._tools:
                raise ToolDefinitionError(
                    f"two tools are named {made.name!r}; rename one: "
                    f"@tool(name='{made.name}_2') for a function, the name attribute "
                    "for a ClientTool"
                )
            self._tools[made.name] = made

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names, in the order given."""
        return tuple(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool in OpenAI ``tools`` format, in order."""
        return [item.schema() for item in self._tools.values()]

    def get(self, name: str) -> Tool:
        """The tool called ``name``, or :class:`~nbchat.base.errors.ToolError` for the LLM."""
        try:
            return self._tools[name]
        except KeyError:
            offered = ", ".join(self._tools) or "none"
            raise ToolError(
                f"the model called an unknown tool {name!r}; offered: {offered}"
            ) from None

    def client_tool(self, name: str) -> ClientTool:
        """The client tool called ``name``, to answer a pending call; ToolError for the person."""
        found = self._tools.get(name)
        if not isinstance(found, ClientTool):
            offered = [key for key, item in self._tools.items() if isinstance(item, ClientTool)]
            raise ToolError(
                f"no client tool named {name!r} is offered here (client tools: "
                f"{', '.join(offered) or 'none'}); include it in Chat(tools=[...]) "
                "to answer the call"
            )
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolbox({list(self._tools)!r})"


def _as_tool(item: object) -> Tool:
    if isinstance(item, type) and issubclass(item, ClientTool):
        item = item()
    if isinstance(item, ClientTool):
        _check_client_tool(item, f"client tool {item!r}")
    if isinstance(item, Tool):
        return item
    if callable(item):
        return tool(item)
    raise ToolDefinitionError(
        f"{item!r} is not a tool; pass functions, @tool functions or ClientTool instances"
    )
