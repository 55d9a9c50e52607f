"""Where the modules of nbchat 0.1's flat layout went, so that code importing them still runs.

``import nbchat.errors`` (or ``nbchat.chat``, ``nbchat.widgets``, …) gives the
module at its new place in the layered packages, the same module object, so
patching one patches the other. New code imports from the new place or, better,
from :mod:`nbchat` itself.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "nbchat._allowlist": "nbchat.context._allowlist",
    "nbchat._arguments": "nbchat.tools._arguments",
    "nbchat._check": "nbchat.context._check",
    "nbchat._code_tool": "nbchat.context.run_code",
    "nbchat._delimiters": "nbchat.base._delimiters",
    "nbchat._describers": "nbchat.context._describers",
    "nbchat._endings": "nbchat.engine._endings",
    "nbchat._endpoints": "nbchat.llm._endpoints",
    "nbchat._images": "nbchat.context._images",
    "nbchat._interpolate": "nbchat.context._interpolate",
    "nbchat._jupyter_notes": "nbchat.jupyter._notes",
    "nbchat._magic_syntax": "nbchat.jupyter._magic_syntax",
    "nbchat._mcp_config": "nbchat.mcp._config",
    "nbchat._mcp_tools": "nbchat.mcp.tools",
    "nbchat._mentions": "nbchat.context._mentions",
    "nbchat._messages": "nbchat.jupyter._messages",
    "nbchat._notebook": "nbchat.jupyter.notebook_tools",
    "nbchat._notices": "nbchat.base._notices",
    "nbchat._panel_assets": "nbchat.jupyter._panel_assets",
    "nbchat._panel_stream": "nbchat.jupyter._panel_stream",
    "nbchat._pg": "nbchat.store._pg",
    "nbchat._prompts": "nbchat.jupyter.prompts",
    "nbchat._risk": "nbchat.context._risk",
    "nbchat._schema": "nbchat.tools._schema",
    "nbchat._secrets": "nbchat.base._secrets",
    "nbchat._side": "nbchat.jupyter._side",
    "nbchat._sinks": "nbchat.jupyter._sinks",
    "nbchat._static": "nbchat.jupyter._static",
    "nbchat._storage": "nbchat.store._files",
    "nbchat._titles": "nbchat.engine._titles",
    "nbchat._turn": "nbchat.engine._turn",
    "nbchat._usage": "nbchat.engine._usage",
    "nbchat._views": "nbchat.jupyter._views",
    "nbchat.chat": "nbchat.engine.chat",
    "nbchat.config": "nbchat.base.config",
    "nbchat.errors": "nbchat.base.errors",
    "nbchat.events": "nbchat.base.events",
    "nbchat.history": "nbchat.engine.history",
    "nbchat.instructions": "nbchat.context.instructions",
    "nbchat.magics": "nbchat.jupyter.magics",
    "nbchat.markup": "nbchat.base.markup",
    "nbchat.mcpservers": "nbchat.mcp.servers",
    "nbchat.options": "nbchat.base.options",
    "nbchat.pgstore": "nbchat.store.postgres",
    "nbchat.policy": "nbchat.base.policy",
    "nbchat.records": "nbchat.base.records",
    "nbchat.render": "nbchat.jupyter.render",
    "nbchat.storetools": "nbchat.store.copy",
    "nbchat.widgets": "nbchat.jupyter.panel",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name and hands back the module at its new name."""

    def __init__(self) -> None:
        self._own: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED[spec.name])
        self._own[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module ran under its new name; importing it under the old one only
        # stamped the old name's spec on it, which would mislead reload().
        own = self._own.pop(module.__name__, None)
        if own is not None:
            module.__spec__ = own
            module.__loader__ = own.loader


def install() -> None:
    """Let the old names import (once per process)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
