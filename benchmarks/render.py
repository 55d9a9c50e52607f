"""How long the one renderer takes on text it has not seen: one answer, and ``--show``.

Renders, side by side in one run, with the renderer of this checkout and with
the one of a git revision (``--baseline``, default the last one on
markdown-it-py and Pygments; loaded from git, skipped if that revision's
renderer cannot be imported on its own):

- a cold 25 KB answer (prose, lists, a table, inline and display math, prices,
  Python code blocks): each round renders a text never rendered before, so no
  cache helps (target <= 5 ms),
- ``%chat --show`` of a 200-turn thread of 2.5 KB answers: the thread's HTML
  as the magic builds it, every answer new to the renderer (target <= 250 ms),

and prints the medians and the old / new ratios.

Run: ``.venv/bin/python benchmarks/render.py [--rounds 15] [--baseline main]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from nbchat.base import markup
from nbchat.jupyter import _views
from nbchat.store.base import Thread, Turn

ROOT = Path(__file__).resolve().parents[1]
PURE_PYTHON = "faf7e06"  # the last revision whose renderer was markdown-it-py and Pygments


def section(tag: str, number: int) -> str:
    """About 1.25 KB of an answer: every block kind an answer has, unique to ``tag``."""
    return (
        f"## Step {number} of {tag}\n\n"
        f"To fit the model **{tag}-{number}**, call `fit(X, y)` on the _scaled_ data; it "
        f"costs $5 a run, or $10 with [the docs](https://example.org/{tag}/{number}) open. "
        f"The loss is $L = \\frac{{1}}{{n}}\\sum_i (y_i - \\hat y_i)^2$ for run {number}.\n\n"
        f"- split the data ({number} folds)\n- scale each column\n- fit, then score\n\n"
        f"```python\nimport numpy as np\n\ndef fit_{tag}_{number}(X, y):\n"
        f"    w = np.linalg.lstsq(X, y, rcond=None)[0]  # {tag}\n"
        f"    return {{'w': w, 'score': float(((X @ w - y) ** 2).mean())}}\n```\n\n"
        f"| fold | score | time |\n|---:|:---:|---|\n| {number} | 0.{number:03d} | 1.2 s |\n"
        f"| {number + 1} | 0.9{number % 10} | 1.1 s |\n\n"
        f"$$\\hat w = (X^\\top X)^{{-1}} X^\\top y \\quad ({number})$$\n\n"
        f"> Note: a *singular* `X^T X` needs `rcond` ({tag}).\n\n"
    )


def answer(tag: str, size: int) -> str:
    """An answer of about ``size`` characters, unique to ``tag``."""
    parts: list[str] = []
    while sum(map(len, parts)) < size:
        parts.append(section(tag, len(parts)))
    return "".join(parts)


def thread(tag: str, turns: int, size: int) -> Thread:
    return Thread(
        id=1, user="bench", title="Benchmark", model="m", system=None, created=0.0,
        updated=0.0, settings={},
        turns=[Turn(query=f"question {i}", answer=answer(f"{tag}t{i}", size), status="complete",
                    model="m") for i in range(turns)],
    )


def baseline(revision: str) -> ModuleType | None:
    """The renderer module as it is at ``revision``, or None if it cannot be loaded."""
    path = f"{revision}:src/nbchat/base/markup.py"
    shown = subprocess.run(["git", "-C", str(ROOT), "show", path],
                           capture_output=True, text=True, check=False)
    if shown.returncode:
        return None
    path = Path(tempfile.mkdtemp()) / "markup_baseline.py"
    path.write_text(shown.stdout)
    spec = importlib.util.spec_from_file_location("markup_baseline", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # a renderer split into modules of its package
        print(f"(the renderer at {revision} cannot be loaded here: {exc})")
        return None
    return module


@contextmanager
def rendering_with(module: ModuleType) -> Iterator[None]:
    """``--show``'s view code using ``module`` as its renderer, for the time of the block."""
    saved = _views.markup
    _views.markup = module  # type: ignore[assignment]
    try:
        yield
    finally:
        _views.markup = saved


def timed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def measure(renderers: dict[str, ModuleType], rounds: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {name: {"answer": [], "show": []}
                                                for name in renderers}
    for name, module in renderers.items():  # warm: imports, parser, lexers, sanitizer
        module.markdown(answer(f"warm{name}", 25_000))
    for number in range(rounds):
        for name, module in renderers.items():
            text = answer(f"a{number}{name}", 25_000)
            times[name]["answer"].append(timed(lambda m=module, t=text: m.markdown(t)))
            shown = thread(f"s{number}{name}", 200, 2_500)
            with rendering_with(module):
                times[name]["show"].append(timed(
                    lambda m=module, t=shown: m.bundle(*_views.thread_html(t))))
    return times


def report(times: dict[str, dict[str, list[float]]], rounds: int) -> None:
    def median(name: str, what: str) -> float:
        return statistics.median(times[name][what]) * 1000

    print(f"{rounds} rounds, medians (each round renders text never rendered before):")
    targets = {"answer": ("cold 25 KB answer", 5.0), "show": ("--show, 200 turns x 2.5 KB", 250.0)}
    for what, (label, target) in targets.items():
        for name in times:
            print(f"  {label:<28} {name:<9} {median(name, what):8.1f} ms   (target <= {target:g})")
        if "baseline" in times:
            ratio = median("baseline", what) / median("new", what)
            print(f"  {'':<28} {'old / new':<9} {ratio:8.1f} x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", default=PURE_PYTHON,
                        help="git revision whose renderer to compare with (default: the last "
                             "one on markdown-it-py and Pygments)")
    args = parser.parse_args()
    renderers = {"new": markup}
    old = baseline(args.baseline)
    if old is not None:
        renderers = {"baseline": old, "new": markup}
    report(measure(renderers, args.rounds), args.rounds)


if __name__ == "__main__":
    sys.exit(main())
