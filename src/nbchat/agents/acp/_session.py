"""One hosted agent's live session: its process, its ACP connection, what it sends.

It runs on the host's event loop (a thread of its own). What the agent sends
is put on :attr:`AgentSession.inbox` for the turn that reads it, in the
kernel's main thread: events to show, a :class:`Permission` when the agent
asks, a :class:`Done` when its prompt returns or its process ends. A request
for permission waits on a future until the person's answer resolves it
(:meth:`AgentSession.answer`) or the session ends, when it is answered as
cancelled: an agent is never left waiting on nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import queue
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ...base._secrets import scrub
from ...base._visible import without_colours
from ...base.errors import AgentError, AgentGone
from . import _process
from ._permission import KINDS, is_remembered
from ._specs import AgentSpec
from ._updates import SHOWN_MAX, _bounded, _name, _shown

INIT_SECONDS = 60.0  # an adapter's first start (npm, a CLI's own start-up) may be slow
_ids = itertools.count(1)


@dataclass(frozen=True)
class Permission:
    """The agent asks before it acts: the call's id and the stored call's arguments."""

    call_id: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Done:
    """The prompt ended: how (the agent's stop reason), or the error that ended it."""

    stop_reason: str = "end_turn"
    error: Exception | None = None


@dataclass
class AgentSession:
    """An agent's process and its one ACP session, bound to one nbchat thread."""

    spec: AgentSpec
    thread_id: int
    loop: asyncio.AbstractEventLoop
    inbox: queue.Queue[Any] = field(default_factory=queue.Queue)
    session_id: str = ""
    process: asyncio.subprocess.Process | None = None
    stderr: deque[str] = field(default_factory=deque)
    alive: bool = False
    loading: bool = False  # session/load replays the history: not a turn's updates
    can_load: bool = False
    waiting: dict[str, asyncio.Future[str]] = field(default_factory=dict)
    remembered: set[str] = field(default_factory=set)  # tool kinds allowed for good: the agent's
    revoke: Any = None  # ends what nbchat handed the session (its MCP token)
    conn: Any = None

    # -- starting ----------------------------------------------------------------
    async def start(self, cwd: str, mcp_servers: list[Any], resume: str = "") -> None:
        """Start the agent, initialize, and open (or load) the session."""
        import acp
        from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

        try:
            self.process, self.stderr = await _process.start(
                self.spec.command, self.spec.args, _environment(self.spec), self.spec.cwd or cwd)
        except OSError as error:
            raise AgentError(f"{self.spec.label} did not start ({self.spec.command_line}): "
                             f"{error.strerror or error}") from None  # fmt: skip
        self.alive = True
        assert self.process.stdin is not None and self.process.stdout is not None
        client: Any = _Client(self)  # the SDK's Client protocol, the methods nbchat offers
        self.conn = acp.connect_to_agent(client, self.process.stdin, self.process.stdout)
        self.loop.create_task(self._watch())
        capabilities = ClientCapabilities(  # nbchat offers no files and no terminal of its own
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False)  # fmt: skip
        init = await self._within(self.conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities,
            client_info=Implementation(name="nbchat", title="nbchat", version=_version())),
            "initialize")  # fmt: skip
        caps = getattr(init, "agent_capabilities", None)
        self.can_load = bool(getattr(caps, "load_session", False))
        if resume and self.can_load:
            self.loading = True
            try:
                await self._within(self.conn.load_session(
                    cwd=cwd, session_id=resume, mcp_servers=mcp_servers), "session/load")
                self.session_id = resume
                return
            except AgentError:
                pass  # the agent no longer has it: a new session, the thread goes on
            finally:
                self.loading = False
        made = await self._within(self.conn.new_session(cwd=cwd, mcp_servers=mcp_servers),
                                  "session/new")  # fmt: skip
        self.session_id = str(made.session_id)

    async def _within(self, call: Any, what: str) -> Any:
        try:
            return await asyncio.wait_for(call, INIT_SECONDS)
        except asyncio.TimeoutError:
            raise AgentError(f"{self.spec.label} did not answer {what} within "
                             f"{INIT_SECONDS:.0f} s{self._said()}") from None  # fmt: skip
        except Exception as error:  # the SDK's RequestError, a closed pipe
            if isinstance(error, AgentError):
                raise
            raise AgentError(f"{self.spec.label} refused {what}: "
                             f"{_bounded(scrub(str(error)), 300)}{self._said()}") from None

    def _said(self) -> str:
        last = [line for line in self.stderr if line.strip()][-3:]
        return f" (it said: {scrub(without_colours(' / '.join(last)))[:400]})" if last else ""

    async def _watch(self) -> None:
        """When the process ends: every waiting request is cancelled, the turn told."""
        assert self.process is not None
        await self.process.wait()
        if self.alive:
            self.alive = False
            self._cancel_waiting()
            self.inbox.put(Done("cancelled", AgentGone(
                f"{self.spec.label} ended (exit status {self.process.returncode})"
                f"{self._said()}; ask again with %chat --with {self.spec.name}")))

    # -- a turn --------------------------------------------------------------------
    async def prompt(self, text: str) -> None:
        """Send one prompt; put Done on the inbox when it returns."""
        from acp import text_block

        try:
            response = await self.conn.prompt(session_id=self.session_id,
                                              prompt=[text_block(text)])  # fmt: skip
            self.inbox.put(Done(str(getattr(response, "stop_reason", "end_turn"))))
        except Exception as error:
            if self.alive:
                self.inbox.put(Done("failed", AgentError(
                    f"{self.spec.label} failed: {_bounded(scrub(str(error)), 300)}"
                    f"{self._said()}")))  # fmt: skip

    async def cancel(self) -> None:
        """Stop the turn: ``session/cancel``; waiting requests are answered as cancelled."""
        self._cancel_waiting()
        if self.alive and self.session_id:
            with contextlib.suppress(Exception):
                await self.conn.cancel(session_id=self.session_id)

    def answer(self, call_id: str, option_id: str | None) -> bool:
        """Resolve the request ``call_id`` (None: cancelled); False when nothing waits on it."""
        future = self.waiting.pop(call_id, None)
        if future is None or future.done():
            return False
        self.loop.call_soon_threadsafe(_resolve, future, option_id or "")
        return True

    def _cancel_waiting(self) -> None:
        for call_id in list(self.waiting):
            self.answer(call_id, None)

    async def close(self) -> None:
        """End the agent's whole process tree and what nbchat handed it."""
        self.alive = False
        self._cancel_waiting()
        if self.revoke is not None:
            with contextlib.suppress(Exception):
                self.revoke()
            self.revoke = None
        if self.process is not None and self.process.returncode is None:
            await asyncio.get_running_loop().run_in_executor(
                None, _process.end_tree, self.process.pid)
        with contextlib.suppress(Exception):
            await self.conn.close()

    # -- what the agent sends --------------------------------------------------------
    async def ask_permission(self, tool_call: Any, options: list[Any]) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        arguments = self._permission_arguments(tool_call, options)
        kinds = [o["kind"] for o in arguments["options"]]
        if not self.alive or not any(k in KINDS for k in kinds):
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        call_id = f"acp-{os.getpid()}-{next(_ids)}"
        remembered = arguments.get("tool_kind") in self.remembered and is_remembered(
            arguments.get("tool_kind"))  # the cap, read again: it may have been set since
        allow = next((o["id"] for o in arguments["options"]
                      if o["kind"] in ("allow_always", "allow_once")), None)  # fmt: skip
        if remembered and allow is not None:
            self.inbox.put(Permission(call_id, {**arguments, "auto": True}))
            chosen = allow
        else:
            future: asyncio.Future[str] = self.loop.create_future()
            self.waiting[call_id] = future
            self.inbox.put(Permission(call_id, arguments))
            chosen = await future
        if not chosen:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen, outcome="selected"))

    def _permission_arguments(self, tool_call: Any, options: list[Any]) -> dict[str, Any]:
        kept = [{"id": str(o.option_id)[:200], "name": str(o.name)[:200], "kind": str(o.kind)}
                for o in options if str(o.kind) in KINDS][:20]  # fmt: skip
        raw = getattr(tool_call, "raw_input", None)
        shown = _shown(getattr(tool_call, "content", None))
        if not shown and raw is not None:  # some adapters send only the raw input
            shown = _bounded(_as_text(raw), SHOWN_MAX)
        return {"agent": self.spec.label, "session": self.session_id,
                "tool_kind": str(getattr(tool_call, "kind", None) or "other"),
                "title": _name(tool_call, kind=False), "shown": shown, "options": kept,
                "tool_call_id": str(getattr(tool_call, "tool_call_id", ""))[:100]}  # fmt: skip


class _Client:
    """The SDK's client side: what the agent may call on nbchat."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if session_id == self.session.session_id and not self.session.loading:
            self.session.inbox.put(update)

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> Any:
        return await self.session.ask_permission(tool_call, options)

    def on_connect(self, conn: Any) -> None:
        pass


def require_sdk() -> None:
    """AgentError saying how to install it when the protocol's SDK is not installed."""
    try:
        import acp  # noqa: F401
    except ImportError:
        raise AgentError("hosting a coding agent needs the Agent Client Protocol's SDK: "
                         'pip install "nbchat[acp]", then restart the kernel') from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbchat")
    except PackageNotFoundError:
        return "0"


def _resolve(future: asyncio.Future[str], option_id: str) -> None:
    if not future.done():
        future.set_result(option_id)


def _environment(spec: AgentSpec) -> dict[str, str]:
    """The agent runs as the person: their environment, less what its entry unsets, with
    what it adds."""
    kept = {name: value for name, value in os.environ.items() if name not in spec.unset}
    return {**kept, **spec.env}


def _as_text(raw: Any) -> str:
    import json

    try:
        return json.dumps(raw, indent=1, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(raw)
