"""A scripted ACP agent for tests and the tutorial, on the protocol's own Python SDK.

``python -m nbchat.testing.acp_agent [SCRIPT.json]`` speaks ACP over stdio as
Claude Code's or Codex's adapter would, but every turn follows a script
instead of a model. The script (the file named, else ``SCRIPTED_ACP_SCRIPT``)
is ``{"turns": [{"when": TEXT, "steps": [...]}, ...]}``: a prompt takes the
first turn whose ``when`` it contains; none found, the agent says what it
was asked. Steps:

- ``{"say": TEXT, "chunks": N}`` — the text in N message chunks;
- ``{"think": TEXT}`` — a thought; ``{"plan": [[TEXT, STATUS], ...]}`` — the plan;
- ``{"tool": {"kind": ..., "title": ..., "path": ..., "old": ..., "new": ...}}`` —
  a tool call that completes (with a diff when ``new`` is given);
- ``{"write": {"path": P, "content": C, "title": ...}}`` — asks permission
  (``allow_once``, ``allow_always``, ``reject_once``), writes the file only if
  allowed; a rejection ends the turn, as Claude's adapter does; ``"ask":
  false`` writes without asking (an agent that does not ask);
- ``{"mcp": {"tool": NAME, "arguments": {...}, "server": NAME}}`` — calls a
  tool of an MCP server handed over in ``session/new`` (HTTP), and says its
  text result;
- ``{"spawn": SECONDS}`` — starts a child that sleeps (its pid in the
  ``SCRIPTED_ACP_PIDS`` file, if set); ``{"sleep": SECONDS}``; ``{"flood": N}`` —
  N one-character chunks; ``{"exit": CODE}`` — the process ends at once.

``session/cancel`` ends the turn at its next step with ``cancelled``. Needs
``agent-client-protocol`` (``pip install nbchat[acp]``), and ``mcp`` for the
``mcp`` step. It imports nothing of nbchat.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from .mcp_server import user_config, write_config

SCRIPT_ENV = "SCRIPTED_ACP_SCRIPT"
PIDS_ENV = "SCRIPTED_ACP_PIDS"


def load_script(path: str | None) -> dict[str, Any]:
    """The script: the file ``path`` names, else the one ``SCRIPTED_ACP_SCRIPT`` names."""
    named = path or os.environ.get(SCRIPT_ENV, "")
    if not named:
        return {"turns": []}
    return json.loads(Path(named).read_text(encoding="utf-8"))


class ScriptedAgent:
    """The SDK's agent side, playing a script."""

    def __init__(self, script: dict[str, Any]) -> None:
        self.script = script
        self.conn: Any = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.cancelled: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> Any:
        from acp import InitializeResponse
        from acp.schema import AgentCapabilities, Implementation, McpCapabilities

        return InitializeResponse(
            protocol_version=protocol_version,
            agent_capabilities=AgentCapabilities(
                load_session=True, mcp_capabilities=McpCapabilities(http=True, sse=False)),
            agent_info=Implementation(name="scripted-agent", title="Scripted agent",
                                      version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        from acp import NewSessionResponse

        session_id = uuid.uuid4().hex
        self.sessions[session_id] = {"cwd": cwd, "mcp": list(mcp_servers or [])}
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None,
                           **kwargs: Any) -> Any:
        from acp import LoadSessionResponse

        self.sessions[session_id] = {"cwd": cwd, "mcp": list(mcp_servers or [])}
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.add(session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        from acp import PromptResponse

        self.cancelled.discard(session_id)
        text = " ".join(str(getattr(block, "text", "")) for block in prompt)
        steps = next((turn["steps"] for turn in self.script.get("turns", [])
                      if str(turn.get("when", "")) in text),
                     [{"say": f"You asked: {text}"}])  # fmt: skip
        for step in steps:
            if session_id in self.cancelled:
                return PromptResponse(stop_reason="cancelled")
            if await self._step(session_id, step) == "stop":
                break
        if session_id in self.cancelled:
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="end_turn")

    # -- steps ------------------------------------------------------------------
    async def _step(self, session_id: str, step: dict[str, Any]) -> str | None:
        import acp

        send = self.conn.session_update
        if "say" in step:
            text, count = str(step["say"]), max(1, int(step.get("chunks", 1)))
            size = -(-len(text) // count)
            for start in range(0, len(text), size):
                await send(session_id, acp.update_agent_message_text(text[start:start + size]))
        elif "think" in step:
            await send(session_id, acp.update_agent_thought_text(str(step["think"])))
        elif "plan" in step:
            entries = [acp.plan_entry(str(c), priority="medium", status=s) for c, s in step["plan"]]
            await send(session_id, acp.update_plan(entries))
        elif "tool" in step:
            await self._tool(session_id, step["tool"])
        elif "write" in step:
            return await self._write(session_id, step["write"])
        elif "mcp" in step:
            await send(session_id, acp.update_agent_message_text(
                await self._mcp(session_id, step["mcp"])))
        elif "flood" in step:
            for _ in range(int(step["flood"])):
                await send(session_id, acp.update_agent_message_text("x"))
        elif "sleep" in step:
            await self._sleep(session_id, float(step["sleep"]))
        elif "spawn" in step:
            self._spawn(float(step["spawn"]))
        elif "exit" in step:
            os._exit(int(step["exit"]))
        return None

    async def _sleep(self, session_id: str, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        while loop.time() < end and session_id not in self.cancelled:
            await asyncio.sleep(0.05)

    def _spawn(self, seconds: float) -> None:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        pids = os.environ.get(PIDS_ENV)
        if pids:
            with open(pids, "a", encoding="utf-8") as out:
                out.write(f"{os.getpid()}\n{child.pid}\n")

    async def _tool(self, session_id: str, tool: dict[str, Any]) -> None:
        import acp

        call_id = uuid.uuid4().hex[:12]
        content = []
        if "new" in tool:
            content = [acp.tool_diff_content(tool.get("path", "file"), tool["new"],
                                             tool.get("old"))]  # fmt: skip
        locations = [acp.schema.ToolCallLocation(path=tool["path"])] if "path" in tool else None
        await self.conn.session_update(session_id, acp.start_tool_call(
            call_id, str(tool.get("title", "a tool")), kind=tool.get("kind", "other"),
            status="pending", locations=locations))  # fmt: skip
        await self.conn.session_update(session_id, acp.update_tool_call(
            call_id, status="completed", content=content or None))

    async def _write(self, session_id: str, write: dict[str, Any]) -> str | None:
        import acp
        from acp.schema import PermissionOption, ToolCallUpdate

        call_id = uuid.uuid4().hex[:12]
        path = Path(self.sessions[session_id]["cwd"]) / str(write["path"])
        title = str(write.get("title", f"Write {write['path']}"))
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        diff = acp.tool_diff_content(str(write["path"]), str(write["content"]), old)
        if write.get("ask", True):
            options = [PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
                       PermissionOption(option_id="always", name="Always allow",
                                        kind="allow_always"),
                       PermissionOption(option_id="reject", name="Reject", kind="reject_once")]
            asked = await self.conn.request_permission(
                session_id=session_id, options=options,
                tool_call=ToolCallUpdate(tool_call_id=call_id, title=title, kind="edit",
                                         status="pending", content=[diff],
                                         raw_input={"path": str(write["path"])}))  # fmt: skip
            chosen = getattr(asked.outcome, "option_id", None)
            if chosen not in ("allow", "always"):
                return "stop"
        path.write_text(str(write["content"]), encoding="utf-8")
        await self.conn.session_update(session_id, acp.start_tool_call(
            call_id, title, kind="edit", status="completed", content=[diff]))
        return None

    async def _mcp(self, session_id: str, call: dict[str, Any]) -> str:
        import httpx2
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        servers = self.sessions[session_id]["mcp"]
        name = call.get("server")
        server = next((s for s in servers if name is None or s.name == name), None)
        if server is None:
            return "(no MCP server was handed to this session)"
        headers = {h.name: h.value for h in server.headers}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                streamable_http_client(server.url, http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as mcp:  # fmt: skip
            await mcp.initialize()
            result = await mcp.call_tool(call["tool"], call.get("arguments", {}))
        texts = [getattr(part, "text", "") for part in result.content]
        return "\n".join(text for text in texts if text)


def add_to_config(name: str, turns: list[dict[str, Any]]) -> str:
    """Add this agent, playing ``turns``, to your ``<jupyter config dir>/nbchat/agents.json``.

    The script goes to a file of its own beside it; other agents in the file
    are kept. Undo with :func:`remove_from_config`. The file's path.
    """
    import tempfile

    path, data = user_config("agents.json")
    handle, script = tempfile.mkstemp(suffix=".json", prefix=f"acp-{name}-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump({"turns": turns}, out)
    entry = {"command": sys.executable, "args": ["-m", "nbchat.testing.acp_agent", script]}
    data.setdefault("agentServers", {})[name] = entry
    write_config(path, data)
    return path


def remove_from_config(name: str) -> None:
    """Take the agent ``name`` out of your ``agents.json`` again (and its script)."""
    path, data = user_config("agents.json")
    entry = data.get("agentServers", {}).pop(name, None)
    if entry and entry.get("args", [""])[-1].endswith(".json"):
        Path(entry["args"][-1]).unlink(missing_ok=True)
    write_config(path, data)


def main(argv: list[str] | None = None) -> None:
    """Serve one client over stdio until it closes."""
    import acp

    args = sys.argv[1:] if argv is None else argv
    agent = ScriptedAgent(load_script(args[0] if args else None))
    asyncio.run(acp.run_agent(agent))  # type: ignore[arg-type]  # the SDK types its protocol strictly


if __name__ == "__main__":
    main()
