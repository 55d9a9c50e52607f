"""Project instructions: the nearest AGENTS.md or .nbchat.md, only from folders only you own."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbchat.context.instructions import find_instructions
from nbchat.testing import Reply
from shell_helpers import asked


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project" / "analysis"
    folder.mkdir(parents=True)
    (tmp_path / "project" / "AGENTS.md").write_text("Use polars, not pandas.\n")
    return folder


def test_the_nearest_file_wins_and_nbchat_md_before_agents_md(project, tmp_path):
    found = find_instructions(project, stop=tmp_path)
    assert (found.path, found.text) == (project.parent / "AGENTS.md", "Use polars, not pandas.")
    (project / "AGENTS.md").write_text("Plot with altair.")
    (project / ".nbchat.md").write_text("Answer in French.")
    assert find_instructions(project, stop=tmp_path).text == "Answer in French."
    assert find_instructions(project, stop=project) is not None
    (project / ".nbchat.md").unlink()
    (project / "AGENTS.md").unlink()
    assert find_instructions(project, stop=project) is None  # the parent is past the stop


def test_nothing_is_followed_from_a_folder_or_file_others_may_write(project, tmp_path):
    (project.parent / "AGENTS.md").chmod(0o664)
    assert find_instructions(project, stop=tmp_path) is None
    (project.parent / "AGENTS.md").chmod(0o644)
    project.parent.chmod(0o777)
    try:
        assert find_instructions(project, stop=tmp_path) is None
    finally:
        project.parent.chmod(0o755)
    assert find_instructions(project, stop=tmp_path) is not None


def test_a_long_file_is_cut_to_the_budget(project, tmp_path):
    (project / "AGENTS.md").write_text("rule\n" * 10_000)
    found = find_instructions(project, stop=tmp_path, budget=100)
    assert len(found.text) <= 400 and found.text.endswith("to fit 100 tokens)")


def test_the_magics_add_them_only_when_asked_and_name_the_file(run, server, project, monkeypatch):
    monkeypatch.chdir(project)
    (project / "AGENTS.md").write_text("Always answer in haiku.")
    server.script(Reply("Fine."))
    assert run("%chat hello").out.strip() == "Fine."
    assert "haiku" not in str(asked(server)[-1].messages)
    run('%config ChatMagics.instructions = "auto"')
    ran = run("%chat hello")
    assert ran.out.splitlines()[0] == f"instructions: {project / 'AGENTS.md'} (~5 tokens)"
    system = asked(server)[-1].messages[0]
    assert system["role"] == "system" and "Always answer in haiku." in system["content"]
    monkeypatch.setenv("NBCHAT_INSTRUCTIONS", "auto")
    run('%config ChatMagics.instructions = "off"')
    run("%chat hi")
    assert "haiku" not in str(asked(server)[-1].messages)  # the setting wins over the variable
    run("%config ChatMagics.instructions = None")
    run("%chat hi")
    assert "haiku" in asked(server)[-1].messages[0]["content"]
