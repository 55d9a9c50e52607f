"""A cell's streaming updates leave the renderer's stylesheet to the page that holds it.

Each update replaces the output's HTML whole; a ``<style>`` in each made the browser
check the whole page's styles again every time. The lab extension holds the same
stylesheet: once the page has said so, the updates carry none and still look the
same, and the final render carries it (what is saved, what other front ends show).
"""

from __future__ import annotations

import pytest

from nbchat.testing import Reply

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
%config ChatMagics.live = True
"""
ANSWER = ("Here is code:\n\n```python\nprint('styled')\n```\n\n"
          + " ".join(f"word{n}" for n in range(150)) + " the end.")
SAMPLE = """(index) => {
    const cell = document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[index];
    const out = cell.querySelector('.jp-Cell-outputArea');
    const code = out.querySelector('.nbchat-md pre.nbchat-code');
    return {text: out.innerText, styles: out.querySelectorAll('style').length,
            space: code ? getComputedStyle(code).whiteSpace : null,
            radius: code ? getComputedStyle(code).borderTopLeftRadius : null};
}"""


def test_streaming_updates_leave_the_stylesheet_to_the_page(notebook, scripted_server, tmp_path):
    scripted_server.script(Reply(ANSWER, chunk_size=8, delay=0.05))
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat -n first", "%chat -n second"])
    nb.run_cell(0)
    nb.run_cell(1)  # the page answers the kernel's question once this cell has ended
    assert nb.page.evaluate(SAMPLE, 1)["styles"] == 1  # a final render carries it
    nb.run_cell(2, wait=False)
    nb.wait_for_text(2, "word5 ", timeout=60)
    streaming = nb.page.evaluate(SAMPLE, 2)
    assert "the end." not in streaming["text"], "the answer ended before it was sampled"
    assert streaming["styles"] == 0
    assert (streaming["space"], streaming["radius"]) == ("pre", "3px")  # styled by the page
    nb.wait_for_text(2, "the end.", timeout=60)
    nb.wait_for_idle()
    final = nb.page.evaluate(SAMPLE, 2)
    assert final["styles"] == 1 and (final["space"], final["radius"]) == ("pre", "3px")
