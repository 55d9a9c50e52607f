"""Make the pictures in docs/screenshots/ again, from the current code, in the real browser.

    python docs/refresh_screenshots.py

runs the browser tests that take them (real JupyterLab in headless Chromium,
against the scripted server), then copies each screenshot here, reduced to 256
colours so the repository stays small. A test that fails copies nothing. The
two jupyter-ai pictures of docs/guides/panel.md were taken in a separate
environment with jupyter-ai installed, and are not remade here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
HERE = ROOT / "docs" / "screenshots"
TESTS = [
    "tests/e2e/test_docs_pictures.py",
    "tests/e2e/test_chat_panel.py::test_the_panel_looks_native_and_does_what_a_chat_panel_does",
]
# what each test saves (under test-artifacts/e2e/) -> its name here
PICTURES = {
    "docs/cell-and-panel.png": "nbchat-cell-and-panel.png",
    "chat-panel/empty-1280x800-light.png": "nbchat-empty-1280x800-light.png",
    "chat-panel/thread-1280x800-light.png": "nbchat-1280x800-light.png",
    "chat-panel/thread-1280x800-dark.png": "nbchat-1280x800-dark.png",
    "chat-panel/thread-1024x700-light.png": "nbchat-1024x700-light.png",
    "chat-panel/thread-1024x700-dark.png": "nbchat-1024x700-dark.png",
    "chat-panel/streaming.png": "nbchat-streaming.png",
    "chat-panel/switcher.png": "nbchat-switcher.png",
}


def refresh() -> int:
    """Run the tests; copy their pictures here if they pass. The tests' exit code."""
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", *TESTS], cwd=ROOT, check=False)
    if ran.returncode != 0:
        print("the browser tests failed: no picture was copied", file=sys.stderr)
        return ran.returncode
    for made, name in PICTURES.items():
        with Image.open(ARTIFACTS / made) as picture:
            picture.convert("RGB").quantize(colors=256).save(HERE / name, optimize=True)
        print(f"docs/screenshots/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(refresh())
