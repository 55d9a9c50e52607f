"""A saved notebook for the notebook agent's tests: the ``nb`` fixture and its readers.

``nb`` is a two-cell notebook (ids ``c0`` and ``c1``) that the session names, as a
Jupyter server names a kernel's notebook (``JPY_SESSION_NAME``); no page holds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

THREE = "import pandas as pd\nA = 1\ndf = pd.read_csv('sales.csv')\nB = 2\nprint(df)\n"


def notebook(path: Path, *sources: str) -> None:
    cells = [{"id": f"c{i}", "cell_type": "code", "metadata": {}, "source": source,
              "outputs": [], "execution_count": None} for i, source in enumerate(sources)]
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                                "cells": cells}))  # fmt: skip


def saved(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text())["cells"]


def source(path: Path, cell_id: str) -> str:
    (cell,) = [c for c in saved(path) if c["id"] == cell_id]
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.fixture
def nb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "analysis.ipynb"
    notebook(path, THREE, "x = 1\n")
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    return path


