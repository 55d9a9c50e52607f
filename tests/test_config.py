"""Settings resolution and where nbchat keeps its files."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbchat.base import config
from nbchat.llm import local


@pytest.fixture
def linked_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A home folder reached through a symlink (as /home on FreeBSD); its real path."""
    real = tmp_path / "real-home"
    real.mkdir()
    (tmp_path / "home").symlink_to(real)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "XDG_DATA_HOME", "NBCHAT_STORE"):
        monkeypatch.delenv(var, raising=False)
    return real


def test_the_store_and_runtime_folders_are_the_ones_jupyter_uses(linked_home: Path) -> None:
    # jupyter_core resolves the home folder; Jupyter's own files live under the real path.
    data = linked_home / ".local" / "share" / "jupyter"
    assert config.jupyter_data_dir() == data
    assert config.default_store_path() == data / "nbchat"
    assert local.jupyter_runtime_dir() == data / "runtime"


def test_jupyters_variables_choose_the_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("NBCHAT_STORE")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "run"))
    assert config.resolve(base_url="http://h/v1").store == tmp_path / "data" / "nbchat"
    assert local.jupyter_runtime_dir() == tmp_path / "run"
