"""What the first question costs: ``import nbchat``, and the first ``%chat`` to its first token.

Prints:

- ``import nbchat`` in a fresh interpreter (median of ``--imports`` runs; target
  <= 100 ms), beside ``import httpx`` for scale, and what the first ``%chat``
  imports of nbchat, its slowest modules first (``python -X importtime``);
- in each of ``--kernels`` fresh kernels, with nbchat auto-loaded as pip
  installs it (nothing imported until the first ``%chat``): a bare httpx
  request's first token, then the first ``%chat What is 2+2?``'s first token,
  both timed from the client sending the cell to the token arriving on IOPub,
  and the difference (target: the first answer's first token <= 150 ms after
  the bare request's).

Run: ``.venv/bin/python benchmarks/first_question.py [--imports 9] [--kernels 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kernel_helpers import Kernel, kernel_env  # noqa: E402
from nbchat.testing import Reply, ScriptedServer  # noqa: E402

TIMED_IMPORT = "import time; t = time.perf_counter(); import {0}; print(time.perf_counter() - t)"
BARE = """\
import httpx, json
with httpx.Client(timeout=60) as client:
    body = {{"model": "scripted-small", "stream": True,
             "messages": [{{"role": "user", "content": "bare"}}]}}
    with client.stream("POST", {url!r} + "/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and "word0" in line:
                print("first token", flush=True)
"""
QUESTION = "What is 2+2?"


def main() -> None:
    options = _arguments()
    imports = {name: _import_times(name, options.imports) for name in ("nbchat", "httpx")}
    slowest = _slowest_imports()
    firsts = _first_tokens(options.kernels)
    _report(imports, slowest, firsts)


def _import_times(module: str, runs: int) -> list[float]:
    return [float(subprocess.run([sys.executable, "-c", TIMED_IMPORT.format(module)],
                                 capture_output=True, text=True, check=True).stdout)
            for _ in range(runs)]  # fmt: skip


def _slowest_imports() -> list[tuple[float, str]]:
    """What the first ``%chat`` imports of nbchat (IPython and httpx already imported), the
    slowest modules first, each by its own time."""
    first = "import IPython, httpx, markdown_it; import nbchat.jupyter.magic.magics"
    lines = subprocess.run([sys.executable, "-X", "importtime", "-c", first],
                           capture_output=True, text=True, check=True).stderr.splitlines()
    rows = []
    for line in lines:
        parts = line.removeprefix("import time:").split("|")
        name = parts[-1].strip()
        if len(parts) == 3 and name.startswith("nbchat") and parts[0].strip().isdigit():
            rows.append((int(parts[0]) / 1e6, name))  # importtime counts microseconds
    return sorted(rows, reverse=True)


def _first_tokens(kernels: int) -> list[tuple[float, float]]:
    """(bare, %chat) seconds to the first token, one pair per fresh kernel."""
    asked = lambda text: lambda body: body["messages"][-1].get("content") == text  # noqa: E731
    pairs = []
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply(tokens=200, when=asked("bare")), Reply(tokens=200, when=asked(QUESTION)),
        Reply("A title"),
    ) as server:
        for n in range(kernels):
            env = kernel_env(
                Path(root) / f"kernel{n}", NBCHAT_BASE_URL=server.url, NBCHAT_LIVE="1",
                NBCHAT_MODEL="scripted-small", NBCHAT_STORE=str(Path(root) / "store"),
                NBCHAT_USER="bench",
            )
            with Kernel(env) as kernel:
                bare = _first(kernel, BARE.format(url=server.url), "first token")
                chat = _first(kernel, f"%chat {QUESTION}", "word0")
            pairs.append((bare, chat))
    return pairs


def _first(kernel: Kernel, code: str, token: str) -> float:
    """Seconds from sending ``code`` to the first output holding ``token``."""
    arrived: list[float] = []

    def seen(message: dict[str, Any], _: Kernel) -> None:
        content = message["content"]
        text = content.get("text", "") + "".join(map(str, content.get("data", {}).values()))
        if token in text and not arrived:
            arrived.append(time.perf_counter())

    started = time.perf_counter()
    kernel.ok(code, timeout=120, on_message=seen)
    if not arrived:
        raise SystemExit(f"no output held {token!r}: {code!r} did not answer")
    return arrived[0] - started


def _report(imports: dict[str, list[float]], slowest: list[tuple[float, str]],
            firsts: list[tuple[float, float]]) -> None:
    ms = lambda values: statistics.median(values) * 1000  # noqa: E731
    print(f"import in a fresh interpreter ({len(imports['nbchat'])} runs, medians):")
    print(f"  import nbchat                 {ms(imports['nbchat']):7.1f} ms   (target <= 100)")
    print(f"  import httpx                  {ms(imports['httpx']):7.1f} ms   (for scale)")
    print(f"  what the first %chat imports of nbchat: {sum(t for t, _ in slowest) * 1000:.1f} "
          f"ms in all; the slowest, each by its own time:")
    for seconds, name in slowest[:8]:
        print(f"    {seconds * 1000:6.1f} ms  {name}")
    bare = [b for b, _ in firsts]
    chat = [c for _, c in firsts]
    after = [c - b for b, c in firsts]
    print(f"first token in a fresh kernel ({len(firsts)} kernels, medians):")
    print(f"  bare httpx request            {ms(bare):7.1f} ms")
    print(f"  first %chat {QUESTION}     {ms(chat):7.1f} ms")
    print(f"  %chat after the bare request  {ms(after):7.1f} ms   (target <= 150; runs: "
          f"{', '.join(f'{a * 1000:.0f}' for a in after)})")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=9)
    parser.add_argument("--kernels", type=int, default=5)
    return parser.parse_args()


if __name__ == "__main__":
    main()
