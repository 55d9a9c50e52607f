"""The real Codex CLI, offline: the scripted server is its model, and the model calls an MCP tool.

A stand-in for nbchat as an MCP server, over stdio (``nbchat.testing.mcp_server``)
and over Streamable HTTP behind a bearer token (``python tests/codex_cli.py``).
Each test proves the loop: Codex lists the tool to the model, the scripted
reply calls it, the server runs it, and Codex's next request carries its
output. What Codex needs for that is in ``codex_cli``'s docstring.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from codex_cli import (
    AGENT_CLIS,
    MODEL_KEY,
    NO_CODEX,
    HttpMcpServer,
    codex_available,
    run_codex,
)
from mcp_helpers import server_entry
from nbchat.testing import RecordedRequest, Reply, ScriptedServer

pytestmark = pytest.mark.agent_cli


@pytest.fixture(autouse=True)
def _codex_installed() -> None:
    """Skip without the CLI; fail when NBCHAT_TEST_AGENT_CLIS or CI says it is there."""
    if codex_available():
        return
    if AGENT_CLIS or os.environ.get("CI") == "true":
        pytest.fail(f"NBCHAT_TEST_AGENT_CLIS or CI=true is set, but {NO_CODEX}")
    pytest.skip(NO_CODEX)


TOKEN = "mcp-token-0123"


def model_requests(server: ScriptedServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path == "/v1/responses"]


def namespace_tools(request: RecordedRequest, namespace: str) -> list[str]:
    """The names of the function tools inside the request's namespace tool ``namespace``."""
    (space,) = [t for t in request.body["tools"]
                if t.get("type") == "namespace" and t.get("name") == namespace]  # fmt: skip
    return [tool["name"] for tool in space["tools"]]


def items(request: RecordedRequest, kind: str) -> list[dict[str, Any]]:
    return [item for item in request.body["input"] if item.get("type") == kind]


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    """A call's params without the ``_meta`` Codex adds (its call id, turn metadata)."""
    return {key: value for key, value in params.items() if key != "_meta"}


def test_codex_calls_a_tool_of_a_stdio_server_unattended(tmp_path: Path):
    notes = tmp_path / "notes.txt"
    stdio = server_entry(extra_args=["--notes", str(notes)])
    with ScriptedServer(api_key=MODEL_KEY) as server:
        server.script(
            Reply(tool_calls=[("mcp__demo__write_note", {"text": "from codex"})], when="a note"),
            Reply("Noted.", after_tool="mcp__demo__write_note"),
        )
        run = run_codex("Please write a note.", model_url=server.url, home=tmp_path / "codex",
                        mcp_servers={"demo": stdio})  # fmt: skip
        first, second = model_requests(server)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Noted."
    headers = {name.lower(): value for name, value in first.headers.items()}
    assert headers["authorization"] == f"Bearer {MODEL_KEY}"
    assert first.body["stream"] is True and first.body["input"][-1]["role"] == "user"
    assert "write_note" in namespace_tools(first, "mcp__demo")
    assert notes.read_text(encoding="utf-8") == "from codex\n"  # ran without asking
    (call,) = items(second, "function_call")
    assert (call["namespace"], call["name"], call["call_id"]) == ("mcp__demo", "write_note",
                                                                  "call_1")  # fmt: skip
    (output,) = items(second, "function_call_output")
    assert output["call_id"] == "call_1"
    assert "wrote 10 characters" in output["output"]


def test_codex_calls_a_tool_over_streamable_http_with_its_bearer_token(tmp_path: Path):
    with ScriptedServer() as server, HttpMcpServer(TOKEN, tmp_path) as mcp:
        server.script(
            Reply(tool_calls=[("mcp__web__add", {"a": 2, "b": 3})], when="add"),
            Reply("Five.", after_tool="mcp__web__add"),
        )
        web = {"url": mcp.url, "bearer_token_env_var": "STAND_IN_MCP_TOKEN"}
        run = run_codex("Please add 2 and 3.", model_url=server.url, home=tmp_path / "codex",
                        mcp_servers={"web": web}, env={"STAND_IN_MCP_TOKEN": TOKEN})  # fmt: skip
        first, second = model_requests(server)
        received = mcp.requests()
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Five."
    assert namespace_tools(first, "mcp__web") == ["add"]
    assert {r["authorization"] for r in received} == {f"Bearer {TOKEN}"}
    calls = [r["params"] for r in received if r["method"] == "tools/call"]
    assert [without_meta(call) for call in calls] == [
        {"name": "add", "arguments": {"a": 2, "b": 3}}
    ]
    (output,) = items(second, "function_call_output")
    assert output["call_id"] == "call_1"
    assert json.loads(output["output"].split("Output:\n", 1)[1]) == {"result": 5}


def test_a_required_server_that_refuses_the_token_stops_the_run(tmp_path: Path):
    with ScriptedServer() as server, HttpMcpServer(TOKEN, tmp_path) as mcp:
        web = {"url": mcp.url, "bearer_token_env_var": "STAND_IN_MCP_TOKEN"}
        run = run_codex("Please add 2 and 3.", model_url=server.url, home=tmp_path / "codex",
                        mcp_servers={"web": web}, env={"STAND_IN_MCP_TOKEN": "wrong"})  # fmt: skip
        assert model_requests(server) == []
        received = mcp.requests()
    assert run.returncode != 0
    assert received and {r["status"] for r in received} == {401}
