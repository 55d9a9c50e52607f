"""The chat panel in real JupyterLab: send a question, watch the answer stream in."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from nbchat.testing import Reply

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
ANSWER = "Tea is brewed by steeping leaves in hot water, then poured and enjoyed slowly."


def open_panel(notebook, scripted_server, tmp_path):
    """A notebook on the scripted server with the panel in its second cell, ready to type in."""
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --panel"])
    return nb, *nb.run_panel()


def is_title_request(body):
    return "conversation title" in body["messages"][0]["content"]


def test_send_streams_the_answer_and_lists_the_new_thread(notebook, scripted_server, tmp_path):
    scripted_server.script(
        Reply("Brewing Tea Basics", when=is_title_request),
        Reply(ANSWER, when="how is tea made", chunk_size=4, delay=0.15),
        Reply("", when="which tea", tool_calls=[
            ("choose", {"question": "Green or black?", "options": ["green", "black"]}),
        ]),
        Reply("Black tea it is: steep it for four minutes.", after_tool="choose"),
    )
    nb, out, box = open_panel(notebook, scripted_server, tmp_path)
    expect(out).to_contain_text("No thread selected")
    nb.screenshot("1-empty-panel")

    box.fill("How is tea made?")
    out.get_by_role("button", name="Send").click()
    # The answer streams in (20 chunks over 3 s): part of it shows before all of it.
    nb.wait_for_text(1, "Tea is brewed")
    assert "enjoyed slowly." not in out.inner_text()
    nb.screenshot("2-streaming")
    nb.wait_for_text(1, "enjoyed slowly.")
    # The new thread is listed, with the title the model gave it.
    # (the select shows spaces as no-break spaces; \\s matches both)
    expect(out.locator(".nbchat-threads .nbchat-thread")).to_have_text(
        [re.compile(r"^Brewing\sTea\sBasics\s\(#1\)$")]
    )
    assert box.input_value() == ""
    nb.screenshot("3-answered")

    box.fill("Which tea should I pick?")
    out.get_by_role("button", name="Send").click()
    black = out.get_by_role("button", name="black")
    black.wait_for(timeout=30_000)
    nb.screenshot("4-tool-prompt")
    black.click()
    nb.wait_for_text(1, "steep it for four minutes")
    assert out.get_by_role("button", name="black").count() == 0  # the answered prompt is gone
    nb.screenshot("5-tool-answered")


GROWING = ("Settled first.\n\n```python\nprint('settled')\n```\n\n"
           + " ".join(f"word{n}" for n in range(120)) + " the end.")


def test_a_streaming_answer_keeps_what_it_settled(notebook, scripted_server, tmp_path):
    """Each update of a streaming answer redraws only what changed: the paragraph and
    code block it settled keep their nodes, the growing paragraph is appended to, and
    the thinking a person opened stays open while the answer streams."""
    scripted_server.script(
        Reply("Settled", when=is_title_request),
        Reply(GROWING, when="grow", chunk_size=6, delay=0.04, reasoning="First I weigh it."),
    )
    nb, out, box = open_panel(notebook, scripted_server, tmp_path)
    box.fill("Grow an answer")
    out.get_by_role("button", name="Send").click()

    live = out.locator(".nbchat-live .nbchat-body")
    live.locator("p", has_text="word1 ").wait_for(timeout=30_000)
    out.locator(".nbchat-live details > summary").click()  # the person opens the thinking
    marked = live.evaluate("""body => {
        const [first, last] = [body.querySelector('p'), [...body.querySelectorAll('p')].pop()];
        first.dataset.seen = last.dataset.seen = 'yes';
        body.querySelector('.nbchat-codeblock').dataset.seen = 'yes';
        return last.textContent;
    }""")
    last_word = max(int(n) for n in re.findall(r"word(\d+)", marked))
    live.locator("p", has_text=f"word{min(last_word + 20, 119)} ").wait_for(timeout=30_000)
    seen = live.evaluate("""body => ({
        first: body.querySelector('p').dataset.seen,
        code: body.querySelector('.nbchat-codeblock').dataset.seen,
        last: [...body.querySelectorAll('p')].pop().dataset.seen,
        lastText: [...body.querySelectorAll('p')].pop().textContent,
        open: body.closest('.nbchat-message').querySelector('details').open,
        codeblocks: body.querySelectorAll('.nbchat-codeblock').length,
    })""")
    assert seen["first"] == seen["code"] == "yes"  # settled: the same nodes
    assert seen["last"] == "yes" and seen["lastText"].startswith(marked)  # grew in place
    assert len(seen["lastText"]) > len(marked)
    assert seen["open"] is True and seen["codeblocks"] == 1
    nb.wait_for_text(1, "the end.")
    answer = out.locator(".nbchat-messages .nbchat-from-model .nbchat-body").last
    expect(answer).to_contain_text("Settled first.")
    assert answer.locator("p").last.inner_text().startswith("word0 word1 word2")
    assert answer.locator("p").last.inner_text().endswith("the end.")
