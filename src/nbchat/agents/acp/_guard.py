"""Run an agent and end its whole process group when the kernel that started it dies.

``python _guard.py COMMAND [ARGS…]`` (run as a file: it imports nothing of
nbchat) starts the agent with the guard's own stdin, stdout and stderr, so
the agent speaks ACP to the kernel directly. Adapters do not exit when
their stdin closes, so a kernel that is killed would leave them running:
the guard asks Linux to send it SIGTERM when its parent dies
(``PR_SET_PDEATHSIG``), and on SIGTERM it ends its process group (the agent
and what the agent started), first asking, then not. It exits with the
agent's exit status.
"""

import os
import signal
import subprocess
import sys
import time

GRACE = 1.5  # seconds between SIGTERM and SIGKILL


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return


_agent: "subprocess.Popen[bytes] | None" = None


def _end_group(*_: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches the guard too
    try:
        os.killpg(0, signal.SIGTERM)
        deadline = time.monotonic() + GRACE
        while _agent is not None and _agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(0, signal.SIGKILL)  # what the agent started and left behind, and the guard
    finally:
        os._exit(143)


def main(argv: list[str]) -> int:
    parent = os.getppid()
    _die_with_parent()
    signal.signal(signal.SIGTERM, _end_group)
    if os.getppid() != parent:  # the kernel died before the guard was set
        _end_group()
    global _agent
    _agent = subprocess.Popen(argv)
    return _agent.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
