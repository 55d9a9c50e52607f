"""The real Claude Code CLI, offline, with the scripted server as its model, calls an MCP tool.

One run per transport, with stand-in MCP servers: nbchat's scripted one over
stdio, and over Streamable HTTP a small SDK server behind a bearer token. Each
proves the whole loop: the request lists the tool, the scripted reply calls
it, the MCP server runs it, and the next request carries its ``tool_result``.
Needs ``@anthropic-ai/claude-code`` (see ``claude_cli``).
"""

# No `from __future__ import annotations`: the MCP SDK reads the stand-in tool's hints.
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations

from claude_cli import API_KEY, run_claude
from mcp_helpers import server_entry
from nbchat.testing import RecordedRequest, Reply, ScriptedServer

TOKEN = "mcp-token-0123456789"


class BearerMCPServer:
    """The SDK's Streamable HTTP app on loopback, answering 401 to a request without
    ``Authorization: Bearer <token>``; its ``lookup`` tool records each call's header."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.calls: list[dict[str, Any]] = []
        self.refused = 0
        server = MCPServer("web")

        @server.tool(annotations=ToolAnnotations(read_only_hint=True))
        def lookup(word: str, ctx: Context) -> str:
            """What a word means."""
            request = ctx.request_context.request
            header = request.headers.get("authorization") if request is not None else None
            self.calls.append({"word": word, "authorization": header})
            return f"{word} read backwards is {word[::-1]}"

        self._app = server.streamable_http_app(stateless_http=True, json_response=True)
        self.url = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (
            dict(scope["headers"]).get(b"authorization") != f"Bearer {self.token}".encode()
        ):
            self.refused += 1
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
            return
        await self._app(scope, receive, send)

    @contextlib.contextmanager
    def serving(self) -> Iterator["BearerMCPServer"]:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        config = uvicorn.Config(self, lifespan="on", log_level="warning", ws="none")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.started, "the stand-in MCP server did not start"
        try:
            yield self
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()


def tool_names(request: RecordedRequest) -> list[str]:
    return [tool["name"] for tool in request.body.get("tools") or []]


def tool_result(request: RecordedRequest) -> dict[str, Any]:
    """The one ``tool_result`` block of the request's last message."""
    last = request.body["messages"][-1]
    assert last["role"] == "user", last
    (block,) = [b for b in last["content"] if b.get("type") == "tool_result"]
    return block


def called_id(request: RecordedRequest, name: str) -> str:
    """The id of the call to ``name`` in the request's assistant turn."""
    (turn,) = [m for m in request.body["messages"] if m["role"] == "assistant"]
    (use,) = [b for b in turn["content"] if b.get("type") == "tool_use" and b["name"] == name]
    return str(use["id"])


def calling(tool: str, arguments: dict[str, Any], answer: str) -> ScriptedServer:
    """A model that calls ``tool`` once, then answers. Thinking is on in Claude Code's
    requests, so the call comes with a signed thinking block for the loop to send back."""
    return ScriptedServer(
        Reply(tool_calls=[(tool, arguments)], reasoning="Use the tool.", times=1),
        Reply(answer, after_tool=tool),
        api_key=API_KEY,
    )


def test_over_http_with_a_bearer_token_the_tool_is_offered_called_and_answered():
    tool = "mcp__web__lookup"
    with calling(tool, {"word": "stressed"}, "Desserts.") as model, \
            BearerMCPServer(TOKEN).serving() as web:  # fmt: skip
        entry = {"type": "http", "url": web.url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        run = run_claude("What is stressed backwards?", model_url=model.anthropic_url,
                         mcp_servers={"web": entry}, allowed_tools=[tool])  # fmt: skip
        requests = model.chat_requests
    assert requests and tool in tool_names(requests[0]), (tool_names(requests[0]), run.debug_log)
    assert web.calls == [{"word": "stressed", "authorization": f"Bearer {TOKEN}"}]
    assert web.refused == 0
    first, second = requests
    assert first.headers["x-api-key"] == API_KEY
    result = tool_result(second)
    assert result["tool_use_id"] == called_id(second, tool)
    assert "stressed read backwards is desserts" in json.dumps(result["content"])
    assert not result.get("is_error")
    assert (run.returncode, run.text, run.result["num_turns"]) == (0, "Desserts.", 2)


def test_over_stdio_the_tool_is_offered_called_and_answered(tmp_path):
    tool = "mcp__nbtest__write_note"
    notes = tmp_path / "notes.txt"
    entry = server_entry(extra_args=["--notes", str(notes)])
    with calling(tool, {"text": "from Claude Code"}, "Noted.") as model:
        run = run_claude("Write a note.", model_url=model.anthropic_url,
                         mcp_servers={"nbtest": entry}, allowed_tools=[tool])  # fmt: skip
        requests = model.chat_requests
    assert requests and tool in tool_names(requests[0]), (tool_names(requests[0]), run.debug_log)
    assert notes.read_text(encoding="utf-8") == "from Claude Code\n"
    first, second = requests
    result = tool_result(second)
    assert result["tool_use_id"] == called_id(second, tool)
    assert "wrote 16 characters" in json.dumps(result["content"])
    assert not result.get("is_error")
    assert (run.returncode, run.text, run.result["permission_denials"]) == (0, "Noted.", [])
