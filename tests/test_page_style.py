"""The lab extension holds the renderer's stylesheet, exactly, under the kernel's version."""

from __future__ import annotations

import json
import re
from pathlib import Path

from nbchat.base import markup
from nbchat.jupyter.cell import _page_style

CSS = Path(__file__).resolve().parents[1] / "labextension" / "style" / "markup.css"


def test_the_extension_holds_the_renderers_stylesheet_and_its_version():
    held = CSS.read_text(encoding="utf-8")
    version = re.search(r'--nbchat-markup-style: "([0-9a-f]+)";', held)
    rules = markup.STYLE.removeprefix("<style>\n").removesuffix("</style>")
    fix = (
        "labextension/style/markup.css must hold nbchat.base.markup.STYLE's rules and "
        f"its version {_page_style.VERSION}: copy them there and rebuild the extension"
    )
    assert version is not None and version.group(1) == _page_style.VERSION, fix
    assert held.endswith(rules), fix
    assert '@import url("./markup.css");' in (CSS.parent / "index.css").read_text("utf-8")


def test_outside_a_kernel_the_stylesheet_stays_in_every_update():
    assert _page_style.page_holds_style() is False


def test_the_extension_draws_the_live_updates_the_kernel_sends():
    source = (CSS.parents[1] / "src" / "live.ts").read_text(encoding="utf-8")
    declared = re.search(r"export const LIVE_MIME_TYPE = '([^']+)';", source)
    assert declared is not None and declared.group(1) == _page_style.LIVE_MIME_TYPE
    built = json.loads((Path(_page_style.__file__).parents[2] / "labextension" / "package.json")
                       .read_text(encoding="utf-8"))  # fmt: skip
    assert built["jupyterlab"]["_build"].get("mimeExtension"), "rebuild the extension"
