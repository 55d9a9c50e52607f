"""The Chats the ``%chat`` settings build, rebuilt only when a setting changes.

:class:`SessionChats` keeps two: the plain one every question uses, and the one
an ``--agent`` question uses, which also offers the notebook tools and shares
the plain one's endpoint client. Both answer outside agents' calls in this
kernel. The key given with ``%chat --key`` is kept here, in memory only, for
the endpoint it was given for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ...base.options import check_options
from ._shell import environment

if TYPE_CHECKING:
    from ...engine.chat import Chat
    from ._settings import ChatSettings

__all__ = ["SessionChats"]


class SessionChats:
    """The session's Chats for ``settings``; ``on_new_store()`` runs when the store changes."""

    def __init__(self, settings: ChatSettings, on_new_store: Callable[[], None]) -> None:
        self._settings = settings
        self._on_new_store = on_new_store
        self.current: Chat | None = None  # the plain Chat last built
        self._current_key: tuple[Any, ...] | None = None
        self._agent: tuple[tuple[Any, ...], Chat] | None = None
        self._notebook: tuple[tuple[str, str], list[Any]] | None = None
        self._answering: list[Any] | None = None
        self._key: tuple[str, str] | None = None  # (endpoint, key) from --key
        self._key_version = 0

    def plain(self) -> Chat:
        """The Chat of plain questions, for the settings as they are now."""
        s = self._settings
        tools = self.user_tools()
        options = check_options(s.options, source="ChatMagics.options")
        key = (s.model, s.base_url, s.provider, s.store, s.user, environment(),
               tuple(map(id, tools)), tuple(s.permissions), repr(sorted(options.items())),
               s.builtin_tools, self._key_version, s.window)  # fmt: skip
        if self.current is None or key != self._current_key:
            from ...engine.chat import Chat

            old = self.current
            self.current = Chat(
                model=s.model or None, base_url=s.base_url or None,
                api_key=self.key_for_endpoint(),
                provider=s.provider or None, store=s.store or None, user=s.user or None,
                tools=tools, permissions=s.permissions, options=options,
                builtin_tools=s.builtin_tools, window=s.window,
                answering=self._agent_answering, hosted=self._hosted,
            )
            self._current_key = key
            if old is not None and old.store.location() != self.current.store.location():
                self._on_new_store()  # the current thread was another store's or user's
        return self.current

    def with_notebook_tools(self) -> Chat:
        """The Chat of ``--agent`` questions: the plain one's endpoint, plus the notebook tools."""
        from ...engine.chat import Chat

        s = self._settings
        base = self.plain()
        key = (id(base), s.approval, s.notebook, tuple(map(id, self.user_tools())),
               self._key_version)
        if self._agent is None or self._agent[0] != key:
            chat = Chat(
                model=s.model or None, base_url=s.base_url or None,
                api_key=self.key_for_endpoint(), provider=s.provider or None,
                store=base.store, tools=[*self.user_tools(), *self._notebook_tools()],
                permissions=s.permissions, window=s.window, answering=self._agent_answering,
                hosted=self._hosted,
            )
            chat._llm = base._llm  # one endpoint client (and one fallback notice) for both
            self._agent = (key, chat)
        return self._agent[1]

    def endpoint(self) -> str:
        """The endpoint the settings name (empty when nbchat will find one itself)."""
        from ...base.config import resolve

        return resolve(base_url=self._settings.base_url or None).base_url

    def set_key(self, endpoint: str, key: str) -> None:
        """Use ``key`` for ``endpoint`` from the next question on (the Chats are rebuilt)."""
        self._key = (endpoint, key)
        self._key_version += 1

    def key_for_endpoint(self) -> str | None:
        """The key given with --key, while the endpoint is still the one it was given for."""
        if self._key is None or self._key[0] != self.endpoint():
            return None
        return self._key[1]

    def user_tools(self) -> list[Any]:
        """The objects named by the ``tools`` setting, from the user's namespace."""
        shell = self._settings.shell
        names = self._settings.tools
        namespace = shell.user_ns if shell is not None else {}
        missing = [name for name in names if name not in namespace]
        if missing:
            raise UsageError(
                f"ChatMagics.tools names {', '.join(map(repr, missing))}, which "
                f"{'is' if len(missing) == 1 else 'are'} not defined; define the tool first "
                f"or fix %config ChatMagics.tools"
            )
        return [namespace[name] for name in names]

    def _notebook_tools(self) -> list[Any]:
        """The notebook tools for the current approval policy (made once per policy)."""
        approval = (self._settings.approval, self._settings.notebook)
        if self._notebook is None or self._notebook[0] != approval:
            from ..notebook._page_proposals import watch
            from ..notebook._undo import recorder
            from ..notebook.tools import notebook_tools, show_run
            from ._notebook_commands import current_mode, leave_plan

            settings = self._settings
            tools = notebook_tools(settings.shell, approval=approval[0], on_run=show_run,
                                   mode=lambda: current_mode(settings),  # type: ignore[arg-type]
                                   on_change=lambda change: recorder(self.plain().store)(change),
                                   notebook=approval[1],
                                   on_plan=lambda thread, _: leave_plan(self.plain().store,
                                                                        thread))  # fmt: skip
            watch(settings.shell)  # the page draws the proposals and answers them
            self._notebook = (approval, tools)
        return self._notebook[1]

    def _hosted(self) -> Any:
        """The kernel's host of coding agents (ACP), when an agent's request is answered."""
        from ..agents._hosting import host_for

        return host_for(self.plain().store)

    def _agent_answering(self) -> list[Any]:
        """The tools that answer outside agents' calls in this kernel (never offered)."""
        shell = self._settings.shell
        if shell is None or getattr(shell, "kernel", None) is None:
            return []
        if self._answering is None:
            from ..agents._kernel import kernel_answering_tools

            self._answering = kernel_answering_tools(shell)
        return self._answering
