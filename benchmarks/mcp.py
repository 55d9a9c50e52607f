"""Cost of MCP tools: the first call (server start included), later calls, unused servers.

1. First call: a fresh process's first ``add`` call through nbchat (the SDK's
   import, the stdio server's start, its tool list, the call), and the same
   with the bare SDK.
2. Later calls: nbchat's path (argument check, gate, call, result text)
   against the bare SDK call to a second copy of the same server, which is
   the server's own time; alternating, median of each; the difference is
   nbchat's overhead (target: at most 5 ms).
3. ``%chat`` with three configured servers the question does not use
   (``--mcp off``), and with their tool lists already cached, against ``%chat``
   with no server configured; median of each (target: at most 5 ms extra).

Run: ``python benchmarks/mcp.py`` (needs ``nbchat[mcp]``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run as a script, this file's folder comes first on sys.path, and this file would be `mcp`.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
SRC = str(HERE.parent / "src")
SERVER = {"command": sys.executable, "args": ["-m", "nbchat.testing.mcp_server"],
          "env": {"PYTHONPATH": SRC}, "approve": "read-only"}  # fmt: skip
FIRST_CALL = """
import time
start = time.perf_counter()
from nbchat.mcp.tools import mcp_tools
(add,) = [tool for tool in mcp_tools(None) if tool.name == "t__add"]
assert add.get_tool_output(add.parse_arguments({"a": 1, "b": 2}), "run") == "3"
print(time.perf_counter() - start)
"""
BARE_FIRST_CALL = """
import os, sys, time
start = time.perf_counter()
import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

async def first():
    parameters = StdioServerParameters(command=sys.executable, args=sys.argv[1:],
                                       env={"PYTHONPATH": os.environ["PYTHONPATH"]})
    async with stdio_client(parameters) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            await session.call_tool("add", {"a": 1, "b": 2})
            print(time.perf_counter() - start, flush=True)

anyio.run(first)
"""


def configure(folder: Path, count: int) -> None:
    path = folder / "nbchat" / "mcp.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    names = ["t", "u", "v"][:count]
    path.write_text(json.dumps({"mcpServers": {name: SERVER for name in names}}))


def first_call(rounds: int, code: str) -> list[float]:
    times = []
    for _ in range(rounds):
        done = subprocess.run([sys.executable, "-c", code, *SERVER["args"]], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONPATH": SRC})
        times.append(float(done.stdout))
    return times


def later_calls(rounds: int, calls: int) -> tuple[list[float], list[float]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from nbchat.mcp.tools import mcp_tools

    (add,) = [tool for tool in mcp_tools(None) if tool.name == "t__add"]
    parameters = StdioServerParameters(command=sys.executable, args=SERVER["args"],
                                       env=SERVER["env"])  # fmt: skip
    ours: list[float] = []
    bare: list[float] = []

    def our_round() -> None:
        start = time.perf_counter()
        for _ in range(calls):
            arguments = add.parse_arguments('{"a": 1, "b": 2}')
            answer = add.parse_response(arguments, add.auto_response(arguments))
            add.get_tool_output(arguments, answer)
        ours.append((time.perf_counter() - start) / calls)

    async def measure() -> None:  # one task: the SDK's contexts end where they began
        async with contextlib.AsyncExitStack() as stack:
            log = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            read, write = await stack.enter_async_context(stdio_client(parameters, errlog=log))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(calls):
                    await session.call_tool("add", {"a": 1, "b": 2})
                bare.append((time.perf_counter() - start) / calls)
                our_round()  # blocks this loop, which only waits meanwhile

    asyncio.run(measure())
    return ours, bare


def chat_cells(folder: Path, rounds: int) -> dict[str, float]:
    from IPython.core.interactiveshell import InteractiveShell

    from nbchat.jupyter.magic.magics import load
    from nbchat.testing import Reply, ScriptedServer

    with ScriptedServer(Reply("Hi.")) as server:
        os.environ.update(NBCHAT_BASE_URL=server.url, NBCHAT_MODEL="scripted-small",
                          NBCHAT_STORE=str(folder / "store"))  # fmt: skip
        shell = InteractiveShell.instance()
        load(shell)
        cases = {"no server configured": (0, ""), "3 servers, --mcp off": (3, "--mcp off "),
                 "3 servers, lists cached": (3, "")}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in cases}
        with contextlib.redirect_stdout(io.StringIO()):
            shell.run_cell("%chat --no-stream --builtin-tools off warm up")
            for _ in range(rounds):
                for name, (count, flag) in cases.items():
                    configure(folder, count)
                    shell.run_cell(f"%chat --no-stream {flag}warm")  # starts them when used
                    start = time.perf_counter()
                    shell.run_cell(f"%chat --no-stream {flag}hello")
                    times[name].append(time.perf_counter() - start)
        return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="nbchat-mcp-bench-"))
    os.environ["JUPYTER_CONFIG_DIR"] = str(folder)
    os.environ["NBCHAT_MCP_ADMIN_CONFIG"] = str(folder / "no-admin.json")
    configure(folder, 1)
    for name, code in (("nbchat", FIRST_CALL), ("bare SDK", BARE_FIRST_CALL)):
        firsts = first_call(max(3, args.rounds // 2), code)
        print(f"first call in a process, SDK import and server start included, {name}: median "
              f"{statistics.median(firsts) * 1000:.0f} ms (min {min(firsts) * 1000:.0f}, "
              f"max {max(firsts) * 1000:.0f})")
    ours, bare = later_calls(args.rounds, args.calls)
    print(f"later calls: nbchat {statistics.median(ours) * 1000:.2f} ms, bare SDK "
          f"{statistics.median(bare) * 1000:.2f} ms, overhead "
          f"{(statistics.median(ours) - statistics.median(bare)) * 1000:.2f} ms (target <= 5)")
    cells = chat_cells(folder, args.rounds)
    base = cells["no server configured"]
    for name, seconds in cells.items():
        print(f"%chat, {name}: {seconds * 1000:.1f} ms ({(seconds - base) * 1000:+.1f} ms)")
    from nbchat.mcp.servers import session_servers

    session_servers().close()


if __name__ == "__main__":
    main()
