"""MkDocs hook: the notebooks in ``notebooks/`` become the site's ``tutorials/`` pages.

They are rendered as saved (mkdocs-jupyter with ``execute: false``): their
outputs are what nbval checks, and every HTML output in them is nbchat's own,
made by ``nbchat.base.markup`` (``tests/test_docs.py`` checks it).
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from mkdocs_jupyter.plugin import NotebookFile

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@event_priority(-100)  # after mkdocs-jupyter, which wraps only the files of docs/
def on_files(files: Files, config) -> Files:
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        page = NotebookFile(File.generated(config, f"tutorials/{notebook.name}",
                                           abs_src_path=str(notebook)), **config)
        page.abs_src_path = str(notebook)  # the wrapper reads it from itself, not the file
        files.append(page)
    return files
