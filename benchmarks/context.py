"""Benchmark describing live objects as context: time and size against the budget.

    python benchmarks/context.py               # 1,000,000×12 DataFrame, 10⁷ array, a figure
    python benchmarks/context.py --repeat 10

Target: each description in at most 50 ms and within its token budget
(2,000 by default). Prints the median and the worst of the repeats, and the
description's estimated tokens. The DataFrame mixes float, int, text and
date columns, with nulls, as a real one does. A figure is measured twice: its
text alone, and with its PNG, whose cost is matplotlib drawing the figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
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


if __name__ == "__main__":
    main()
