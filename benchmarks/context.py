"""Benchmark describing live objects as context: time and size against the budget.

    python benchmarks/context.py               # 1,000,000×12 DataFrame, 10⁷ array, a figure
    python benchmarks/context.py --repeat 10
    python benchmarks/context.py --kernel      # also: %chat @df … against %chat … in a kernel

Target: each description in at most 50 ms and within its token budget
(2,000 by default). Prints the median and the worst of the repeats, and the
description's estimated tokens. The DataFrame mixes float, int, text and
date columns, with nulls, as a real one does. A figure is measured twice: its
text alone, and with its PNG, whose cost is matplotlib drawing the figure.
``--kernel`` times, in a real kernel against the scripted server, a question
mentioning the DataFrame against the same question without the mention
(medians of the cell's wall time as the kernel measures it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from nbchat.context import DEFAULT_BUDGET, ContextItem, describe, estimate_tokens

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TARGET_MS = 50.0


def dataframe(rows: int = 1_000_000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    columns: dict[str, object] = {f"x{i}": rng.normal(size=rows) for i in range(8)}
    columns["units"] = rng.integers(0, 1000, rows)
    columns["city"] = rng.choice(["Oslo", "Lima", "Pune", "Kyiv"], rows)
    columns["day"] = pd.date_range("2020-01-01", periods=rows, freq="min")
    columns["flag"] = rng.random(rows) > 0.5
    df = pd.DataFrame(columns)
    df.loc[::13, "x2"] = np.nan
    return df


def figure() -> object:
    rng = np.random.default_rng(7)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for series in range(3):
        axes[0].plot(rng.normal(size=200).cumsum(), label=f"series {series}")
    axes[0].set(title="Walks", xlabel="step", ylabel="value")
    axes[0].legend()
    axes[1].hist(rng.normal(size=10_000), bins=50)
    axes[1].set_title("Histogram")
    return fig


def measure(label: str, make: Callable[[], ContextItem], repeat: int) -> bool:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        item = make()
        times.append((time.perf_counter() - start) * 1000)
    tokens = estimate_tokens(item.text)
    worst, median = max(times), statistics.median(times)
    image = f", image {item.image.width}×{item.image.height}" if item.image else ""
    ok = median <= TARGET_MS and tokens <= DEFAULT_BUDGET
    print(
        f"{label:<34} median {median:6.1f} ms  worst {worst:6.1f} ms  "
        f"{tokens:5,} tokens{image}  {'ok' if ok else 'OVER TARGET'}"
    )
    return ok


KERNEL_SETUP = """\
%load_ext nbchat
%config ChatMagics.live = False
import time, numpy as np, pandas as pd
rng = np.random.default_rng(7)
df = pd.DataFrame({f"x{i}": rng.normal(size=1_000_000) for i in range(11)})
df["city"] = rng.choice(["Oslo", "Lima"], 1_000_000)
"""
TIMED = "t = time.perf_counter()\n_r = %chat {question}\nprint(time.perf_counter() - t)"


def kernel_cost(repeat: int) -> None:
    """Median wall time of ``%chat`` with and without ``@df`` in a real kernel."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from kernel_helpers import Kernel, kernel_env
    from nbchat.testing import Reply, ScriptedServer

    with tempfile.TemporaryDirectory() as root, ScriptedServer(Reply("Fine.")) as server:
        env = kernel_env(
            Path(root) / "kernel", NBCHAT_BASE_URL=server.url, NBCHAT_MODEL="scripted-small",
            NBCHAT_STORE=str(Path(root) / "store"), NBCHAT_USER="bench",
        )  # fmt: skip
        with Kernel(env) as kernel:
            kernel.ok(KERNEL_SETUP, timeout=300)
            kernel.ok("%chat -n warm up")
            timings: dict[str, list[float]] = {"plain": [], "@df": []}
            for _ in range(repeat):
                for label, question in (("plain", "Describe df"), ("@df", "Describe @df")):
                    run = kernel.ok(TIMED.format(question=question), interactive=False)
                    timings[label].append(float(run.stdout.strip().splitlines()[-1]) * 1000)
    plain, mention = (statistics.median(timings[k]) for k in ("plain", "@df"))
    print(f"%chat in a kernel, 1,000,000×12 df ({repeat} runs, medians):")
    print(f"  %chat Describe df                 {plain:7.1f} ms")
    print(f"  %chat Describe @df                {mention:7.1f} ms   (+{mention - plain:.1f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kernel", action="store_true", help="also time %%chat in a kernel")
    args = parser.parse_args()
    df = dataframe()
    array = np.random.default_rng(7).normal(size=10_000_000)
    fig = figure()
    describe(df.head(), "warm-up")
    results = [
        measure("DataFrame 1,000,000×12", lambda: describe(df, "df"), args.repeat),
        measure("ndarray 10,000,000 float64", lambda: describe(array, "a"), args.repeat),
        measure("Figure, 2 axes (text only)", lambda: describe(fig, "f", image=False), args.repeat),
        measure("Figure, 2 axes (PNG attached)", lambda: describe(fig, "fig"), args.repeat),
    ]
    print("all within target" if all(results) else "some description missed the target")
    if args.kernel:
        kernel_cost(args.repeat)


if __name__ == "__main__":
    main()
