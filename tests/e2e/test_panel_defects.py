"""Three things a person hit in the panel at 1024×700, in real JupyterLab + Chromium.

While an answer streams its question shows once; Escape in the thread
switcher's search forgets the search, so reopening it lists every thread; a
question sent while scrolled up brings the view down to what was just sent.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Locator, Page

from nbchat.testing import Reply

from .jupyterlab import NotebookPage

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
from nbchat import Chat
chat = Chat()
for title in ("Bakery names", "Sample sizes", "Plot colours"):
    thread = chat.new_thread()
    for n in range(12):
        chat.append_response(thread, f"{{title}} question {{n}}", f"An answer {{n}}.\\n" * 6,
                             title=title)
"""


def is_title_request(body):
    return "conversation title" in body["messages"][0]["content"]


def open_panel(page: Page, notebook, server, tmp_path) -> tuple[NotebookPage, Locator]:
    page.set_viewport_size({"width": 1024, "height": 700})
    nb = notebook([SETUP.format(url=server.url, store=str(tmp_path / "store")),
                   "%chat --panel"])
    nb.run_cell(0)
    nb.run_cell(1)
    panel = nb.output(1).locator(".nbchat-panel").first
    panel.locator(".nbchat-input-box").wait_for(timeout=30_000)
    return nb, panel


def wait_until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def ask(panel: Locator, question: str) -> None:
    box = panel.locator(".nbchat-input-box")
    box.fill(question)
    box.press("Enter")


def test_a_streaming_answer_shows_its_question_once(page, notebook, scripted_server, tmp_path):
    scripted_server.script(Reply("A Title", when=is_title_request),
                           Reply(tokens=150, delay=0.03))
    _, panel = open_panel(page, notebook, scripted_server, tmp_path)
    ask(panel, "What is a good sample size?")
    bubbles = panel.locator(".nbchat-from-person", has_text="What is a good sample size?")
    wait_until(lambda: "word20" in panel.inner_text(), "the answer streams")
    counts = set()
    for _ in range(6):  # while it streams, polls and checkpoints come and go
        counts.add(bubbles.count())
        time.sleep(0.5)
    assert counts == {1}, counts
    wait_until(lambda: "word149" in panel.inner_text(), "the answer ends")
    assert bubbles.count() == 1


def test_escape_in_the_switchers_search_forgets_the_search(page, notebook, scripted_server,
                                                           tmp_path):
    _, panel = open_panel(page, notebook, scripted_server, tmp_path)
    panel.locator(".nbchat-switch").click()
    search = panel.locator(".nbchat-search")
    search.fill("bakery")
    threads = panel.locator("button.nbchat-thread")
    wait_until(lambda: threads.count() == 1, "the search filters the threads")
    search.press("Escape")
    panel.locator(".nbchat-switch").click()
    assert search.input_value() == ""
    wait_until(lambda: threads.count() == 3, "every thread is listed again")


def test_a_question_sent_while_scrolled_up_is_followed(page, notebook, scripted_server, tmp_path):
    scripted_server.script(Reply("A Title", when=is_title_request),
                           Reply(tokens=120, delay=0.02))
    _, panel = open_panel(page, notebook, scripted_server, tmp_path)
    scroll = panel.locator(".nbchat-conversation")
    wait_until(lambda: scroll.evaluate("s => s.scrollHeight > s.clientHeight + 200"),
               "a conversation taller than the panel")
    scroll.evaluate("s => { s.scrollTop = 0; s.dispatchEvent(new Event('scroll')); }")
    ask(panel, "One more question")
    wait_until(lambda: "word119" in panel.inner_text(), "the answer ends")
    time.sleep(0.5)
    at_end = scroll.evaluate("s => s.scrollHeight - s.scrollTop - s.clientHeight")
    assert at_end < 40, at_end
