"""Claude Code and Codex, the real CLIs, reach a live notebook through nbchat's real MCP endpoint.

One Jupyter server with nbchat's extension (``agent_helpers.agent_server``)
serves the module: a notebook open with a kernel, nbchat's endpoint at
``{server}/nbchat/mcp``, agent tokens minted into its token folder. Each test
runs one CLI once (``claude_cli.run_claude``, ``codex_cli.run_codex``) with a
scripted server as its model and nbchat as its only MCP server: over
Streamable HTTP with the token as a bearer header, or through the stdio
bridge ``python -m nbchat mcp --url …`` holding it in ``NBCHAT_AGENT_TOKEN``.

What is proved is read off the model's side (the ``tools`` each request
offered, the tool results the CLI sent back) and the kernel's (its variables,
through a second kernel client), never the CLIs' exit codes: a CLI drops an
MCP server that fails and still ends 0. A gated call is answered as the
person would, with ``%chat --answer HANDLE run`` in the notebook's kernel,
while the CLI's ``call_status`` waits.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import USER, agent_server, endpoint, mcp_tools, start_session, tokens
from agent_helpers import write_notebook as write_notebook_file
from claude_cli import API_KEY, require_claude, run_claude
from codex_cli import AGENT_CLIS, MODEL_KEY, NO_CODEX, codex_available, run_codex
from e2e.jupyterlab import JupyterLab
from nbchat.agents import AgentCall, AgentGate, Minted
from nbchat.store import open_store
from nbchat.testing import RecordedRequest, Reply, ScriptedServer

pytestmark = [pytest.mark.agent_cli, pytest.mark.kernel]

SRC = str(Path(__file__).resolve().parents[1] / "src")
NOTEBOOK = "agents.ipynb"
SERVER = "nbchat"  # the MCP server's name in each CLI's configuration
TOKEN_VARIABLE = "NBCHAT_AGENT_TOKEN"  # the bridge reads it; Codex's HTTP bearer comes from it
COUNT = 'counter += 1; print("ran", counter)'


def tool(name: str) -> str:
    """An nbchat tool as scripts name it: Claude Code's spelling, which the scripted server
    splits into Codex's namespace and name."""
    return f"mcp__{SERVER}__{name}"


def bridge(url: str, secret: str) -> dict[str, Any]:
    """A stdio entry for ``python -m nbchat mcp`` (this worktree's nbchat), both CLIs' shape."""
    return {"command": sys.executable, "args": ["-m", "nbchat", "mcp", "--url", url],
            "env": {TOKEN_VARIABLE: secret, "PYTHONPATH": SRC}}  # fmt: skip


# -- the two CLIs, as these tests drive them ---------------------------------------------------


def _tool_text(content: Any) -> str:
    """A tool result's content (a string, or a list of text parts) as one text."""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content)


class Claude:
    """Claude Code: ``mcp__nbchat__TOOL`` tools, ``tool_result`` blocks, the result as JSON."""

    name = "claude"
    api_key = API_KEY

    def require(self) -> None:
        require_claude()

    def entry(self, transport: str, url: str, secret: str) -> tuple[dict[str, Any], dict]:
        """nbchat's ``mcpServers`` entry, and the variables the CLI itself needs (none)."""
        if transport == "stdio":
            return bridge(url, secret), {}
        return {"type": "http", "url": url,
                "headers": {"Authorization": f"Bearer {secret}"}}, {}  # fmt: skip

    def run(self, prompt: str, model: ScriptedServer, entry: Mapping[str, Any],
            env: Mapping[str, str], home: Path) -> Any:  # fmt: skip
        return run_claude(prompt, model_url=model.anthropic_url, mcp_servers={SERVER: entry},
                          allowed_tools=[f"mcp__{SERVER}"], env=env)  # fmt: skip

    def requests(self, model: ScriptedServer) -> list[RecordedRequest]:
        return model.chat_requests

    def offered(self, request: RecordedRequest) -> list[str]:
        """nbchat's tools the request offered the model, by their MCP names, sorted."""
        prefix = tool("")
        return sorted(t["name"].removeprefix(prefix) for t in request.body.get("tools") or []
                      if t["name"].startswith(prefix))  # fmt: skip

    def payload(self, request: RecordedRequest) -> Any:
        """What nbchat's endpoint answered the call this request carries the result of."""
        last = request.body["messages"][-1]
        (block,) = [b for b in last["content"] if b.get("type") == "tool_result"]
        assert not block.get("is_error"), block
        return json.loads(_tool_text(block["content"]))


class Codex:
    """Codex: a ``mcp__nbchat`` namespace tool, ``function_call_output`` items whose text is
    ``Wall time: … seconds`` and ``Output:`` before the result."""

    name = "codex"
    api_key = MODEL_KEY

    def require(self) -> None:
        if codex_available():
            return
        if AGENT_CLIS or os.environ.get("CI") == "true":
            pytest.fail(f"NBCHAT_TEST_AGENT_CLIS or CI=true is set, but {NO_CODEX}")
        pytest.skip(NO_CODEX)

    def entry(self, transport: str, url: str, secret: str) -> tuple[dict[str, Any], dict]:
        """nbchat's ``[mcp_servers]`` table, and the variables the CLI itself needs."""
        if transport == "stdio":
            return bridge(url, secret), {}
        return {"url": url, "bearer_token_env_var": TOKEN_VARIABLE}, {TOKEN_VARIABLE: secret}

    def run(self, prompt: str, model: ScriptedServer, entry: Mapping[str, Any],
            env: Mapping[str, str], home: Path) -> Any:  # fmt: skip
        return run_codex(prompt, model_url=model.url, mcp_servers={SERVER: entry}, env=env,
                         home=home)  # fmt: skip

    def requests(self, model: ScriptedServer) -> list[RecordedRequest]:
        return [r for r in model.requests if r.path == "/v1/responses"]

    def offered(self, request: RecordedRequest) -> list[str]:
        tools, name = request.body.get("tools") or [], f"mcp__{SERVER}"
        spaces = [t for t in tools if t.get("type") == "namespace" and t["name"] == name]
        return sorted(t["name"] for space in spaces for t in space["tools"])

    def payload(self, request: RecordedRequest) -> Any:
        items = request.body["input"]
        (output,) = [i for i in items if i.get("type") == "function_call_output"][-1:]
        text = _tool_text(output["output"])
        assert "Output:" in text, text
        return json.loads(text.split("Output:", 1)[1])


Agent = Claude | Codex


@pytest.fixture(params=[Claude, Codex], ids=["claude", "codex"])
def agent(request: pytest.FixtureRequest) -> Agent:
    chosen = request.param()
    chosen.require()
    return chosen


# -- one Jupyter server, one notebook and its kernel, for the module ---------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-clis")


@pytest.fixture(scope="module")
def lab(base: Path) -> Iterator[JupyterLab]:
    with agent_server(base) as server:
        yield server


@pytest.fixture(scope="module")
def kernel(lab: JupyterLab, base: Path) -> Iterator[Any]:
    """A second client on the notebook's kernel: the person's side of the tests."""
    from jupyter_client import BlockingKernelClient

    write_notebook_file(lab, NOTEBOOK, ["counter = 0"])
    session = start_session(lab, NOTEBOOK)
    connection = base / "lab" / "runtime" / f"kernel-{session['kernel']['id']}.json"
    client = BlockingKernelClient(connection_file=str(connection))
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(60)
    yield client
    client.stop_channels()


def execute(client: Any, code: str) -> None:
    """Run ``code`` in the kernel as the person's cell; fail if it raises."""
    reply = client.execute_interactive(code, timeout=60, output_hook=lambda message: None)
    content = reply["content"]
    assert content["status"] == "ok", f"{code!r}: {content.get('ename')}: {content.get('evalue')}"


def value(client: Any, expression: str) -> Any:
    """The value of ``expression`` in the kernel (a literal), evaluated without a cell."""
    reply = client.execute_interactive("", silent=True, user_expressions={"v": expression},
                                       timeout=60, output_hook=lambda message: None)  # fmt: skip
    result = reply["content"]["user_expressions"]["v"]
    assert result["status"] == "ok", result
    return ast.literal_eval(result["data"]["text/plain"])


# -- reads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_nbchat_tools_are_offered_and_a_read_reaches_the_kernel(
    agent: Agent, transport: str, lab: JupyterLab, kernel: Any, base: Path, tmp_path: Path
):
    probe = f"probe_{agent.name}_{transport}"
    execute(kernel, f"{probe} = [1, 2, 3]")
    secret = tokens(base).mint(f"{agent.name} {transport} read").secret
    listed = sorted(t.name for t in mcp_tools(lab, secret))
    entry, env = agent.entry(transport, endpoint(lab), secret)
    with ScriptedServer(api_key=agent.api_key) as model:
        model.script(
            # times=1, no `when`: Claude Code's first request ends with the MCP servers'
            # instructions, not the prompt.
            Reply(tool_calls=[(tool("list_variables"), {"path": NOTEBOOK})],
                  reasoning="Look at the notebook's variables.", times=1),  # fmt: skip
            Reply("Read them.", after_tool=tool("list_variables")),
        )
        run = agent.run("What variables does the notebook have?", model, entry, env,
                        tmp_path / "home")  # fmt: skip
        requests = agent.requests(model)
    assert requests, run
    assert agent.offered(requests[0]) == listed, run
    assert {"list_variables", "run_code", "call_status"} <= set(listed)
    first, second = requests
    variables = agent.payload(second)["result"]
    assert f"{probe}: list of 3" in variables.splitlines(), variables


# -- the gate -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatedRun:
    """A CLI's run through a gated call: its model requests, and the call's handle."""

    requests: list[RecordedRequest]
    handle: str
    run: Any


def next_handle(base: Path) -> str:
    """The handle a new token's first call gets: its thread is the store's next, turn 0.

    The scripted model cannot read the handle from run_code's result as a real
    one would, so the test works it out beforehand (and checks it)."""
    threads = open_store(base / "store", USER).threads()
    return f"{max((t.id for t in threads), default=0) + 1}.0"


def waiting_call(base: Path, minted: Minted, timeout: float = 30.0) -> AgentCall:
    """The token's one call waiting for the person, once the store holds all of it."""
    gate = AgentGate(open_store(base / "store", USER))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        calls = gate.waiting(minted.token)
        # Between the gate's start_turn and update_turn the turn is there without its call
        # (tool "?"): wait for the whole of it.
        if calls and calls[0].tool != "?":
            (call,) = calls
            return call
        time.sleep(0.05)
    raise AssertionError(f"no call of {minted.token.label!r} waited within {timeout} s")


def gated_run(agent: Agent, transport: str, lab: JupyterLab, kernel: Any, base: Path,
              home: Path, answer: str) -> GatedRun:  # fmt: skip
    """The scripted model asks to run :data:`COUNT`, then waits with call_status while the
    person answers ``answer`` in the kernel."""
    execute(kernel, "counter = 0")
    minted = tokens(base).mint(f"{agent.name} {transport} gate")
    handle = next_handle(base)
    entry, env = agent.entry(transport, endpoint(lab), minted.secret)
    asked = {"path": NOTEBOOK, "code": COUNT, "why": "Count once."}
    with ScriptedServer(api_key=agent.api_key) as model:
        model.script(
            Reply(tool_calls=[(tool("run_code"), asked)], reasoning="Run it.", times=1),
            Reply(tool_calls=[(tool("call_status"), {"handle": handle, "wait_seconds": 20})],
                  reasoning="Wait for the person.", after_tool=tool("run_code")),  # fmt: skip
            Reply("Done.", after_tool=tool("call_status")),
        )
        # The CLI runs in a thread; the person answers from this one, which owns the kernel
        # client (jupyter_client's blocking client keeps an event loop per thread).
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(agent.run, "Count once in the notebook.", model, entry, env,
                                  home)  # fmt: skip
            call = waiting_call(base, minted)
            assert (call.handle, call.tool, call.notebook) == (handle, "run_code", NOTEBOOK)
            # The model has answered run_code's result with call_status: the CLI is calling it.
            model.wait_for(lambda: len(agent.requests(model)) >= 2
                           and agent.requests(model)[1].completed, timeout=30)  # fmt: skip
            time.sleep(0.3)  # so the answer comes while call_status waits, not before
            assert value(kernel, "counter") == 0  # nothing ran before the answer
            # -t names the call's thread: --answer HANDLE alone looks for the handle among the
            # calls of the kernel's current thread only, which an earlier answer set.
            execute(kernel, f"%chat -t {handle.split('.')[0]} --answer {handle} {answer}")
            run = running.result(timeout=90)
        return GatedRun(agent.requests(model), handle, run)


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_run_code_waits_for_the_person_and_runs_once(
    agent: Agent, transport: str, lab: JupyterLab, kernel: Any, base: Path, tmp_path: Path
):
    gated = gated_run(agent, transport, lab, kernel, base, tmp_path / "home", "run")
    assert len(gated.requests) == 3, (gated.run, [r.body for r in gated.requests[1:]])
    first, after_run, after_status = gated.requests
    waiting = agent.payload(after_run)
    assert (waiting["handle"], waiting["state"]) == (gated.handle, "waiting"), waiting
    done = agent.payload(after_status)
    assert (done["handle"], done["state"], done["answer"]) == (gated.handle, "done", "run"), done
    assert "stdout:\nran 1\n" in done["result"], done
    assert value(kernel, "counter") == 1


def test_a_rejected_call_leaves_the_kernel_alone_and_the_agent_learns_why(
    lab: JupyterLab, kernel: Any, base: Path, tmp_path: Path
):
    claude = Claude()
    claude.require()
    gated = gated_run(claude, "http", lab, kernel, base, tmp_path / "home",
                      "reject: not in this notebook")  # fmt: skip
    assert len(gated.requests) == 3, gated.run
    rejected = claude.payload(gated.requests[2])
    assert (rejected["handle"], rejected["state"], rejected["answer"]) == (
        gated.handle, "rejected", "reject: not in this notebook"), rejected  # fmt: skip
    assert "it did not run" in rejected["result"], rejected
    assert "not in this notebook" in rejected["result"], rejected
    assert value(kernel, "counter") == 0
