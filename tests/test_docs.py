"""The documentation says what the code does: its examples run, its reference lists the code.

Every code block of every page in docs/ runs (Python in a fresh IPython shell
with ``%chat`` loaded, against the scripted server, one shell a page so a block
can use the names an earlier one made) or is marked illustrative; the reference
lists exactly the options the magic declares and the settings it reads; the
tutorials' saved outputs, which the site shows as they are, are nbchat's own
sanitized HTML.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from docs_helpers import DOCS, PAGES, RUNNABLE, Block, blocks, hook
from nbchat.base import markup
from nbchat.mcp._config import load_config, user_config_path

ROOT = DOCS.parent
VOID_CLOSED = re.compile(r"<(hr|br)([^>]*)></\1>")  # the sanitizer writes void tags unclosed
EXAMPLES = [block for page in PAGES for block in blocks(page)]
PAGES_WITH_PYTHON = sorted(
    {b.page for b in EXAMPLES if b.language == "python" and not b.illustrative})


def test_every_block_is_runnable_or_marked_illustrative():
    unmarked = [str(b) for b in EXAMPLES if not b.illustrative and b.language not in RUNNABLE]
    assert unmarked == []
    assert len(PAGES_WITH_PYTHON) >= 15  # the convention is not "mark everything"


@pytest.mark.parametrize("page", PAGES_WITH_PYTHON, ids=lambda p: str(p.relative_to(DOCS)))
def test_the_python_examples_of_a_page_run(page: Path, run):
    for block in blocks(page):
        if block.language != "python" or block.illustrative:
            continue
        ran = run(block.code)
        assert ran.error is None, f"{block}: {ran.error!r}\n{ran.out}\n{ran.err}"
        assert markup.MARK_PROBLEM not in ran.out, f"{block} printed a problem:\n{ran.out}"


@pytest.mark.parametrize(
    "block", [b for b in EXAMPLES if b.language == "json" and not b.illustrative], ids=str
)
def test_the_json_examples_parse_and_an_mcp_json_is_read_by_nbchat(block: Block, tmp_path,
                                                                   monkeypatch):
    data = json.loads(block.code)
    if "mcpServers" not in data:
        return
    monkeypatch.setenv("TRACKER_TOKEN", "example-token")
    is_admin = "allow" in data or "mcp" in data
    path = tmp_path / "admin-mcp.json" if is_admin else user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.code, encoding="utf-8")
    if is_admin:
        monkeypatch.setenv("NBCHAT_MCP_ADMIN_CONFIG", str(path))
    config = load_config()
    assert set(config.servers) | set(config.refused) >= set(data["mcpServers"])


def test_the_reference_lists_every_option_and_setting_and_nothing_else():
    assert hook("reference").differences() == []


def test_an_option_or_variable_missing_from_the_reference_is_named(tmp_path, monkeypatch):
    reference = hook("reference")
    for page, row in ((reference.MAGIC_PAGE, "| `--retry` |"),
                      (reference.SETTINGS_PAGE, "| `NBCHAT_LIVE` |")):
        copy = tmp_path / page.name
        lines = page.read_text(encoding="utf-8").splitlines()
        copy.write_text("\n".join(line for line in lines if not line.startswith(row))
                        + "\n| `NBCHAT_NOT_A_SETTING` | x |\n| `--not-an-option` | x |\n")
        monkeypatch.setattr(reference, page.stem.upper() + "_PAGE", copy)
    assert sorted(p.replace(f"{tmp_path}/", "") for p in reference.differences()) == [
        "--not-an-option is in magic.md but not in the code",
        "--retry is in the code but not in magic.md",
        "NBCHAT_LIVE is in the code but not in settings.md",
        "NBCHAT_NOT_A_SETTING is in settings.md but not in the code",
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_the_tutorials_saved_html_is_nbchats_sanitized_html(path: Path):
    """The site shows saved outputs as they are: each HTML one must be the renderer's own."""
    outputs = [output for cell in nbformat.read(path, as_version=4).cells
               for output in cell.get("outputs", [])]
    html = [output["data"]["text/html"] for output in outputs
            if "text/html" in output.get("data", {})]
    assert html
    for shown in html:
        wrapper = markup.STYLE + f'<div class="{markup.ROOT_CLASSES}">'
        assert shown.startswith(wrapper), shown[:200]
        body = shown[len(wrapper):].removesuffix("</div>")
        assert markup.sanitize(body) == VOID_CLOSED.sub(r"<\1\2>", body)  # nothing removed
    assert all(set(output.get("data", {})) <= {"text/html", "text/plain", "image/png"}
               for output in outputs)


def test_a_docstring_role_resolves_only_to_an_object_nbchat_has():
    import griffe  # the docs extra, which dev installs
    roles = hook("roles")
    package = griffe.load("nbchat", search_paths=[str(ROOT / "src")], resolve_aliases=False)
    chat = package["engine.chat.Chat"]
    assert roles.resolve(chat, package, "nbchat.base.errors.ToolError") == (
        "nbchat.base.errors.ToolError")
    assert roles.resolve(chat, package, "ask") == "nbchat.engine.chat.Chat.ask"
    assert roles.resolve(chat, package, "nbchat.errors.ToolError") is None  # an old path
    assert roles.resolve(chat, package, "str") is None
