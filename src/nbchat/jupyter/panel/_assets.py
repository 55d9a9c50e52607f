"""The panel's front-end code and stylesheet, and the version that names them.

Jupyter Server serves them (:mod:`nbchat.jupyter.server.extension`), so a panel's first open
sends its state and a small loader, not 40 KB of code; where no server serves
them (another front end), the loader asks the kernel for them instead.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from ...base import markup

_HERE = Path(__file__).parent

# The panel's script, in the order its parts are joined into one ES module. They
# share the module's scope: none imports or exports, except the last, whose
# ``export default { render }`` is the module's.
PARTS = (
    "00-dom.js",
    "10-emoji.js",
    "20-messages.js",
    "30-side.js",
    "40-build.js",
    "50-draw.js",
    "60-prompts.js",
    "70-input.js",
    "90-render.js",
)

# The panel's stylesheet, in cascade order: a later part's rules win over an
# earlier one's of equal weight, so the order is the names' and must not change.
STYLE_PARTS = (
    "00-panel.css",
    "10-icons.css",
    "20-buttons.css",
    "30-header.css",
    "35-preview.css",
    "40-threads.css",
    "50-conversation.css",
    "55-answers.css",
    "60-prompts.css",
    "70-composer.css",
    "80-threads-foot.css",
    "90-side.css",
)


@functools.lru_cache(maxsize=1)
def code() -> str:
    """The panel's ES module: the parts in ``js/``, each under a line that names it."""
    return "\n".join(
        f"// -- js/{name}\n" + (_HERE / "js" / name).read_text(encoding="utf-8") for name in PARTS
    )


@functools.lru_cache(maxsize=1)
def stylesheet() -> str:
    """The panel's rules: the parts in ``css/``, each under a comment that names it,
    then the renderer's, which its answers need."""
    own = "\n".join(
        f"/* -- css/{name} */\n" + (_HERE / "css" / name).read_text(encoding="utf-8")
        for name in STYLE_PARTS
    )
    return own + markup.STYLE.removeprefix("<style>").removesuffix("</style>")


@functools.lru_cache(maxsize=1)
def version() -> str:
    """A digest of both: a new release gets new URLs, so a browser never keeps old code."""
    return hashlib.sha256((code() + stylesheet()).encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def loader() -> str:
    """The ES module anywidget is given: it loads :func:`code` from the server or the kernel."""
    text = (_HERE / "_panel_loader.js").read_text(encoding="utf-8")
    return text.replace("__VERSION__", version())


def asset(name: str) -> tuple[str, str] | None:
    """The body and content type served under ``name``, or None for any other name."""
    if name == f"panel-{version()}.js":
        return code(), "text/javascript; charset=utf-8"
    if name == f"panel-{version()}.css":
        return stylesheet(), "text/css; charset=utf-8"
    return None
