"""Other processes by their pid: whether one still runs, and when it started."""

from __future__ import annotations

import os
import sys


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts; a zombie too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_running(pid: int) -> bool:
    """Whether ``pid`` runs: exists and, on Linux, is not a zombie waiting to be reaped."""
    if not pid_exists(pid):
        return False
    return not sys.platform.startswith("linux") or _stat(pid)[:1] not in ([b"Z"], [])


def started(pid: int) -> str:
    """When ``pid`` started, in clock ticks since boot (Linux; "" elsewhere): with the pid,
    it names one process, where a pid alone may have been reused."""
    fields = _stat(pid)
    return fields[19].decode() if len(fields) > 19 else ""


def _stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the command's name (state first); [] if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []
