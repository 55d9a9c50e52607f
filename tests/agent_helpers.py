"""A real Jupyter server with nbchat's extension, notebooks with kernels, and MCP clients.

`agent_server` runs an isolated `jupyter-lab` (see `e2e.jupyterlab`) whose
store, user and token folder are the test's; `start_session` opens a notebook
with a kernel through the REST API, as JupyterLab does; `mint` makes an agent
token in the same token folder; `mcp_call` and `mcp_tools` use the official
MCP SDK's client over Streamable HTTP.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat

from e2e.jupyterlab import JupyterLab, start_jupyterlab
from nbchat.agents import TokenStore

USER = "agent-tester"


@contextmanager
def agent_server(
    base: Path, env: Mapping[str, str] | None = None, name: str = "lab"
) -> Iterator[JupyterLab]:
    """A Jupyter server with nbchat, its store and token folder under ``base``.

    Another ``name`` is another server (its own Jupyter dirs) on the same store,
    tokens and notebooks: a restarted server.
    """
    extra = {
        "NBCHAT_STORE": str(base / "store"),
        "NBCHAT_USER": USER,
        "NBCHAT_AGENT_TOKENS": str(base / "tokens"),
        "NBCHAT_BASE_URL": "demo",
        **(env or {}),
    }
    with start_jupyterlab(base / name, env=extra, root=base / "root") as lab:
        yield lab


def tokens(base: Path) -> TokenStore:
    return TokenStore(USER, base / "tokens")


def mint(base: Path, label: str = "test-agent", **kwargs: Any) -> str:
    """A new agent token's secret."""
    return tokens(base).mint(label, **kwargs).secret


def write_notebook(lab: JupyterLab, name: str, cells: list[str] | None = None) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in (cells or [])]
    path = lab.root_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def start_session(lab: JupyterLab, name: str) -> dict[str, Any]:
    """Open ``name`` with a python3 kernel, as JupyterLab does; the session."""
    body = json.dumps({"path": name, "type": "notebook", "name": name,
                       "kernel": {"name": "python3"}}).encode()
    return rest(lab, "api/sessions", "POST", body)


def rest(lab: JupyterLab, path: str, method: str = "GET", body: bytes | None = None) -> Any:
    request = urllib.request.Request(
        f"{lab.url}/{path}", data=body, method=method,
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        data = response.read()
    return json.loads(data) if data else None


def endpoint(lab: JupyterLab) -> str:
    return f"{lab.url}/nbchat/mcp"


async def _session(url: str, token: str, action: Any) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with client, streamable_http_client(url, http_client=client) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await action(session)


def run_async(make: Any) -> Any:
    """``asyncio.run(make())`` in a thread of its own: the test thread may hold a running
    loop (Playwright's sync API keeps one for the whole session)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def mcp_tools(lab: JupyterLab, token: str) -> list[Any]:
    """The tools the endpoint lists, through the SDK's client."""
    async def listed(session: Any) -> Any:
        return (await session.list_tools()).tools

    return run_async(lambda: _session(endpoint(lab), token, listed))


def mcp_call(lab: JupyterLab, token: str, tool: str, **arguments: Any) -> Any:
    """One tool call through the SDK's client; the CallToolResult."""
    async def called(session: Any) -> Any:
        return await session.call_tool(tool, arguments)

    return run_async(lambda: _session(endpoint(lab), token, called))


def result_data(result: Any) -> Any:
    """A tool result's structured content, or its text."""
    if getattr(result, "structured_content", None):
        return result.structured_content
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


def kernel_client(lab: JupyterLab, session: Mapping[str, Any]) -> Any:
    """A jupyter_client client on the session's kernel, as a second front end."""
    from jupyter_client import BlockingKernelClient

    runtime = Path(lab.log_path).parent / "runtime"
    client = BlockingKernelClient(
        connection_file=str(runtime / f"kernel-{session['kernel']['id']}.json")
    )
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(60)
    return client


def run_cell(client: Any, code: str, timeout: float = 60) -> str:
    """Run ``code`` in the kernel; its printed and shown text, updates of displays too
    (errors as ``ERROR name: value``)."""
    msg_id = client.execute(code)
    out: list[str] = []
    while True:
        message = client.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind in ("display_data", "execute_result", "update_display_data"):
            out.append(content["data"].get("text/plain", "") + "\n")
        elif kind == "error":
            out.append(f"ERROR {content['ename']}: {content['evalue']}\n")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)
