"""A math-heavy answer streams into a cell without MathJax typesetting every update.

JupyterLab typesets the math of an HTML output each time the output is
replaced: typesetting every update of a growing answer blocks the page far
longer than the stream lasts. While the answer streams its math stays as
written (not one ``mjx-container`` on the page); the final render is typeset;
and the kernel's Interrupt button still stops a stream mid-way.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import NotebookPage

pytestmark = pytest.mark.e2e

END = "The end of the answer."
SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
%config ChatMagics.live = True
from IPython.display import Markdown
Markdown("Warm: $e^{{i\\\\pi}} + 1 = 0$")
"""
SAMPLE = """(index) => {
    const cell = document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[index];
    const out = cell.querySelector('.jp-Cell-outputArea');
    return {text: out.innerText, typeset: out.querySelectorAll('mjx-container').length};
}"""
INTERRUPT = '.jp-NotebookPanel:not(.lm-mod-hidden) [data-command="notebook:interrupt-kernel"]'


def math_answer(formulas: int) -> str:
    """An answer of ``formulas`` formulas, three a paragraph (two inline, one display)."""
    paragraphs = [
        f"Step {n // 3}: since $x_{{{n}}}^2 + \\frac{{a_{{{n}}}}}{{b}} = \\sqrt{{c}}$ and "
        f"$\\sum_{{k=1}}^{{{n + 1}}} k^2 = \\alpha_{{{n}}}$, we get\n\n"
        f"$$\\int_0^{{{n + 1}}} e^{{-t^2}}\\,dt = \\beta_{{{n}}}$$"
        for n in range(0, formulas, 3)
    ]
    return "\n\n".join(paragraphs) + f"\n\n{END}"


def setup_cell(url: str, store: str) -> str:
    """The first cell: the endpoint and store, nbchat loaded, live mode, MathJax warmed."""
    return SETUP.format(url=url, store=store)


FORMULAS = 60


@pytest.fixture(scope="module")
def math_server() -> Iterator[ScriptedServer]:
    short, long = math_answer(FORMULAS), math_answer(600)
    with ScriptedServer(
        Reply(short, delay=6.0 / len(short.split(" ")), when="math please"),
        Reply(long, delay=0.02, when="a long proof"),
        Reply("Math", when=lambda body: "conversation title" in str(body["messages"][0])),
    ) as server:
        yield server


def _open(notebook, server: ScriptedServer, tmp_path, cell: str) -> NotebookPage:
    nb = notebook([setup_cell(server.url, str(tmp_path / "store")), cell])
    nb.run_cell(0)
    nb.output(0).locator("mjx-container").first.wait_for(timeout=60_000)  # MathJax works here
    return nb


def _while_streaming(nb: NotebookPage, timeout: float = 120) -> list[dict]:
    """What cell 1 showed, sampled every 0.25 s, from the first step until the answer's end."""
    samples = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sample = nb.page.evaluate(SAMPLE, 1)
        if END in sample["text"]:
            break
        if "Step" in sample["text"]:
            samples.append(sample)
        time.sleep(0.25)
    return samples


def _wait_for_typeset(nb: NotebookPage, count: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (shown := nb.page.evaluate(SAMPLE, 1))["typeset"] < count:
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return shown


def test_math_is_typeset_once_when_the_answer_is_complete(notebook, math_server, tmp_path):
    nb = _open(notebook, math_server, tmp_path, "%%chat -n\nmath please")
    nb.run_cell(1, wait=False)
    streaming = _while_streaming(nb)
    assert len(streaming) >= 3, "the answer did not stream in several updates"
    assert "$x_{0}^2" in streaming[-1]["text"]  # the math, as written, is there to read
    assert [s["typeset"] for s in streaming] == [0] * len(streaming)
    nb.wait_for_idle()
    final = _wait_for_typeset(nb, FORMULAS)
    assert final["typeset"] == FORMULAS
    assert "$x_{0}^2" not in final["text"]
    nb.screenshot("typeset")


def test_interrupt_stops_a_math_stream_midway(notebook, math_server, tmp_path):
    nb = _open(notebook, math_server, tmp_path, "%%chat -n\na long proof")
    nb.run_cell(1, wait=False)
    nb.wait_for_text(1, "Step 3:", timeout=60)
    nb.page.locator(INTERRUPT).first.click(timeout=10_000)
    nb.wait_for_text(1, "interrupted", timeout=60)
    nb.wait_for_idle()
    shown = nb.page.evaluate(SAMPLE, 1)
    assert END not in shown["text"]
    assert shown["typeset"] > 0  # the partial answer's final render is typeset


def test_the_panel_streams_math_without_typesetting_it(notebook, math_server, tmp_path):
    nb = _open(notebook, math_server, tmp_path, "%chat --panel")
    nb.run_cell(1)
    panel = nb.output(1).locator(".nbchat-panel")
    panel.locator("textarea").fill("math please")
    panel.get_by_role("button", name="Send").click()
    streaming = [sample["typeset"] for sample in _while_streaming(nb)]
    assert len(streaming) >= 3, "the answer did not stream into the panel in several updates"
    assert streaming == [0] * len(streaming)
