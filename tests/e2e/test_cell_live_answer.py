"""A cell's streaming answer in JupyterLab is redrawn only where it changed, and stays text.

Once the page has said it holds nbchat's extension, each update also carries the
markup as ``application/vnd.nbchat.live+html``. The extension's renderer keeps the
paragraphs the answer has settled (the same DOM nodes, update after update, so text
the person selected stays selected) and appends to the one that grows. The final
render is plain ``text/html``: what is saved holds no live markup. Hostile text
streamed through it shows as text and runs nothing.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Request

from nbchat.testing import Reply

from .test_hostile import _JS_RAN, _active, payload

pytestmark = pytest.mark.e2e

LIVE = "application/vnd.nbchat.live+html"
SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
%config ChatMagics.live = True
"""
SETTLED = "The first paragraph settles early."
ANSWER = (f"{SETTLED}\n\n```python\nprint('styled')\n```\n\n"
          + " ".join(f"word{n}" for n in range(200)) + " the end.")
# The output of cell `index`: its renderer's mime type and text; `mark` tags the answer's
# first paragraph node and selects its text, `marked` says whether the node shown now is
# the one tagged, `selected` what the page's selection holds.
_JS_OUTPUT = """([index, mark]) => {
    const cell = document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[index];
    const out = cell.querySelector('.jp-Cell-outputArea');
    const shown = out.querySelector('[data-mime-type]');
    const first = out.querySelector('.nbchat-md p');
    if (mark && first) {  // and the person selects it, to copy it while the rest streams
        first.nbchatMark = true;
        window.getSelection().selectAllChildren(first);
    }
    const code = out.querySelector('.nbchat-md pre.nbchat-code');
    return {mime: shown ? shown.dataset.mimeType : null, text: out.innerText,
            marked: !!(first && first.nbchatMark), selected: window.getSelection().toString(),
            styles: out.querySelectorAll('style').length,
            space: code ? getComputedStyle(code).whiteSpace : null};
}"""
_JS_SAVED_KEYS = """(index) => {
    const panel = window.jupyterapp.shell.currentWidget;
    return panel.content.model.toJSON().cells[index].outputs
        .flatMap(output => Object.keys(output.data || {})).sort();
}"""


def _start(notebook, scripted_server, tmp_path, reply: Reply):
    """A notebook whose page has answered the kernel (a first short turn), then the long one
    started; the page is sampled while it streams."""
    scripted_server.script(Reply("Hello.", times=1), reply)
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat -n first", "%chat -n second"])
    nb.run_cell(0)
    nb.run_cell(1)  # the page answers the kernel's question once this cell has ended
    nb.run_cell(2, wait=False)
    return nb


def test_a_streaming_answer_keeps_the_paragraphs_it_has_drawn(
    notebook, scripted_server, tmp_path
):
    nb = _start(notebook, scripted_server, tmp_path, Reply(ANSWER, chunk_size=8, delay=0.04))
    nb.wait_for_text(2, "word2 ", timeout=60)
    first = nb.page.evaluate(_JS_OUTPUT, [2, True])
    assert "the end." not in first["text"], "the answer ended before it was sampled"
    assert first["mime"] == LIVE and SETTLED in first["text"]
    nb.wait_for_text(2, "word60 ", timeout=60)
    later = nb.page.evaluate(_JS_OUTPUT, [2, False])
    assert "the end." not in later["text"], "the answer ended before it was sampled again"
    assert later["mime"] == LIVE
    assert later["marked"], "the settled paragraph was drawn again instead of kept"
    assert later["selected"] == SETTLED, "the person's selection was lost to an update"
    assert later["styles"] == 0 and later["space"] == "pre"  # styled by the page
    assert later["text"].index(SETTLED) < later["text"].index("print('styled')")

    nb.wait_for_text(2, "the end.", timeout=60)
    nb.wait_for_idle()
    final = nb.page.evaluate(_JS_OUTPUT, [2, False])
    assert final["mime"] == "text/html" and final["styles"] == 1
    assert "word199 the end." in final["text"].replace("\n", " ")
    assert nb.page.evaluate(_JS_SAVED_KEYS, 2) == ["text/html", "text/plain"]


def test_hostile_text_streamed_live_shows_as_text_and_runs_nothing(
    notebook, scripted_server, tmp_path, page
):
    fetched: list[str] = []

    def on_request(request: Request) -> None:
        if "nbchat-pwned" in request.url:
            fetched.append(request.url)

    page.on("request", on_request)
    text = f"Streaming begins.\n\n{payload('live')}\n\n" + " ".join(
        f"more{n}" for n in range(120)) + " done."  # fmt: skip
    nb = _start(notebook, scripted_server, tmp_path, Reply(text, chunk_size=6, delay=0.03))
    samples = []
    for seen in ("Payload live begins.", "anchor-live", "more10 ", "more90 "):
        nb.wait_for_text(2, seen, timeout=60)
        sample = nb.page.evaluate(_JS_OUTPUT, [2, False])
        samples.append((seen, sample["mime"], _active(nb.output(2))))
    nb.wait_for_text(2, "done.", timeout=60)
    nb.wait_for_idle()
    shown = nb.page.evaluate(_JS_OUTPUT, [2, False])["text"]

    assert [s[1] for s in samples] == [LIVE] * len(samples), samples
    assert all(not active for _, _, active in samples), samples
    assert nb.page.evaluate(_JS_RAN) == [] and fetched == []
    for line in ("<script>window.pwned_live_script=1</script>",
                 "[link-live](javascript:window.pwned_live_link=1)", "command-live"):  # fmt: skip
        assert line in shown
