"""An agent's process: started in a process group of its own, its stderr drained, its tree ended.

Adapters do not exit when their stdin closes, and they start processes of
their own (a shell, the agent's CLI, MCP servers): ending the direct child is
not enough. Each agent starts under ``_guard.py``, the leader of a new
session, so its process group holds what it starts; :func:`end_tree` ends
that group and any descendant that left it, first asking (SIGTERM), then not
(SIGKILL), and the guard ends the group itself when the kernel dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Mapping

from ...base._pids import is_running

STREAM_LIMIT = 64 * 1024 * 1024  # ACP lines (a whole file's diff) pass asyncio's 64 KiB default
STDERR_LINES = 40  # the last lines kept to explain a failed start
GRACE = 1.5  # seconds between SIGTERM and SIGKILL
GUARD = os.path.join(os.path.dirname(__file__), "_guard.py")  # ends the group if the kernel dies


async def start(
    command: str, args: tuple[str, ...], env: Mapping[str, str], cwd: str | None
) -> tuple[asyncio.subprocess.Process, deque[str]]:
    """Start the agent; its process, and the last lines of its stderr as they come."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, GUARD, command, *args, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(env), cwd=cwd,
        limit=STREAM_LIMIT, start_new_session=True,
    )  # fmt: skip
    tail: deque[str] = deque(maxlen=STDERR_LINES)
    task = asyncio.get_running_loop().create_task(_drain(process, tail))
    process._nbchat_drain = task  # type: ignore[attr-defined]  # kept alive with the process
    return process, tail


async def _drain(process: asyncio.subprocess.Process, tail: deque[str]) -> None:
    """Read the agent's stderr to its end: a full pipe would stall the agent."""
    assert process.stderr is not None
    with contextlib.suppress(Exception):
        while line := await process.stderr.readline():
            tail.append(line.decode("utf-8", "replace").rstrip()[:500])


def descendants(pid: int) -> set[int]:
    """Every process started by ``pid``, however deep (Linux: from /proc; elsewhere: none)."""
    children: dict[int, list[int]] = {}
    if not sys.platform.startswith("linux"):
        return set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def end_tree(pid: int) -> None:
    """End ``pid``, its process group and every descendant; returns once they are gone."""
    tree = descendants(pid) | {pid}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)  # the group the agent leads
        for member in list(tree):
            with contextlib.suppress(OSError):
                os.kill(member, sig)
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline:
            tree = {member for member in tree if is_running(member)}
            if not tree:
                return
            time.sleep(0.02)
