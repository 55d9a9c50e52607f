"""Run the tutorials as nbval does and save their outputs: `python notebooks/refresh.py [NAME ...]`.

Each notebook runs in a fresh kernel with the demo model and an empty store
(the environment of conftest.py), so what is saved is what the tests compare.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from conftest import TUTORIAL_ENV  # type: ignore[import-not-found]

HERE = Path(__file__).parent


def refresh(path: Path) -> None:
    """Execute ``path`` top to bottom in a new kernel and write its outputs back."""
    os.environ.update(TUTORIAL_ENV)
    with tempfile.TemporaryDirectory(prefix="nbchat-tutorial-") as store:
        os.environ["NBCHAT_STORE"] = store
        os.environ["NBCHAT_AGENT_TOKENS"] = os.path.join(store, "agent-tokens")
        os.environ["JUPYTER_CONFIG_DIR"] = os.path.join(store, "jupyter-config")
        notebook = nbformat.read(path, as_version=4)
        NotebookClient(notebook, timeout=120, allow_errors=True,
                       resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(notebook, path)
    print(f"refreshed {path.name}")


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(p.name for p in HERE.glob("*.ipynb"))
    for name in names:
        refresh(HERE / name)
