"""The run_code prompt as widget state: Run, Edit, Reject driven with .click(), no kernel."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from nbchat import Chat, StoreCorrupt
from nbchat.base.records import PendingCall, Prompt
from nbchat.context.run_code import RunCode
from nbchat.jupyter.panel.widget import show_tool_prompts
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import close_shell
from wire_helpers import content_parts

CODE = "df.price.mean()"


@pytest.fixture
def runs():
    return []


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path, runs) -> Chat:
    def runner(code: str) -> str:
        runs.append(code)
        return "result:\n2.0"

    return Chat(
        base_url=scripted_server.url,
        model="scripted-small",
        store=tmp_path / "store",
        tools=[RunCode(runner)],
    )


def waiting_prompt(chat: Chat, server: ScriptedServer):
    server.script(
        Reply("A Title", when=lambda body: "conversation title" in body["messages"][0]["content"]),
        Reply("Mean is 2.", after_tool="run_code"),
        Reply(tool_calls=[("run_code", {"code": CODE, "why": "To get the mean."})], when="mean"),
    )
    thread = chat.new_thread()
    assert chat.ask(thread, "the mean?").status == "suspended"
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    return thread, prompt


def visible_code(html_text: str) -> str:
    """The text of the code block a browser would show."""
    block = re.search(r"<pre[^>]*><code>(.*?)</code></pre>", html_text, re.S)
    assert block is not None
    lines = block.group(1).replace('<span class="nbchat-line">', "\n")  # a block per line
    return html.unescape(re.sub(r"<[^>]+>", "", lines)).removeprefix("\n").rstrip("\n")


def sent_results(server: ScriptedServer) -> list[str]:
    return [
        r.messages[-1]["content"] for r in server.chat_requests if r.messages[-1]["role"] == "tool"
    ]


def test_the_prompt_shows_the_code_highlighted_and_three_buttons(chat, scripted_server):
    _, prompt = waiting_prompt(chat, scripted_server)
    assert [b.description for b in prompt.buttons] == ["Run", "Edit", "Reject", "Run edited"]
    assert prompt.run_edited.layout.display == "none" and prompt.editor.layout.display == "none"
    assert prompt.editor.value == CODE
    shown = prompt.children[0].outputs[0]["data"]  # the code, escaped and highlighted
    assert "text/markdown" not in shown
    assert '<pre class="nbchat-code nbchat-lines"><code>' in shown["text/html"]
    assert visible_code(shown["text/html"]) == CODE
    prompt.buttons[2].click()  # answered: no prompt is left waiting for the next tests


def test_run_runs_once_and_locks_the_prompt(chat, scripted_server, runs):
    thread, prompt = waiting_prompt(chat, scripted_server)
    prompt.buttons[0].click()
    assert runs == [CODE] and prompt.is_answered
    assert [b.disabled for b in prompt.buttons] == [True] * 4
    assert prompt.buttons[0].button_style == "success"
    assert chat.store.get(thread).turns[0].answer == "Mean is 2."
    assert sent_results(scripted_server)[-1].startswith("<answer>\nresult:\n2.0\n</answer>")


def test_edit_opens_the_editor_and_runs_what_was_edited(chat, scripted_server, runs):
    _, prompt = waiting_prompt(chat, scripted_server)
    prompt.buttons[1].click()
    assert prompt.editor.layout.display == "" and prompt.run_edited.layout.display == ""
    assert runs == []
    prompt.editor.value = "df.price.median()"
    prompt.run_edited.click()
    assert runs == ["df.price.median()"] and prompt.editor.disabled
    assert sent_results(scripted_server)[-1].startswith(
        "<answer>\nThe user edited the code before running it; this is what ran:\n"
        "```python\ndf.price.median()\n```"
    )


def test_reject_sends_the_reason_and_runs_nothing(chat, scripted_server, runs):
    _, prompt = waiting_prompt(chat, scripted_server)
    prompt.reason_box.value = "not on the full data"
    prompt.buttons[2].click()
    assert runs == [] and prompt.is_answered and prompt.buttons[2].button_style == "success"
    assert sent_results(scripted_server)[-1].startswith(
        "<answer>\nThe user rejected running the code; it did not run. Their reason: "
        "not on the full data\n</answer>"
    )
    assert repr(prompt) == "To get the mean. → rejected: not on the full data"


def test_a_terminal_sees_the_code_and_how_to_answer():
    call = PendingCall(
        1,
        0,
        "c1",
        "run_code",
        {"code": "x = 1\nx + 1"},
        Prompt.from_dict(RunCode(lambda code: "").prompt({"code": "x = 1\nx + 1"})),
    )
    assert call.question == (
        "The model wants to run this code in your kernel.\n      x = 1\n      x + 1\n"
        "   (run, reject: WHY, or edit: NEW CODE)"
    )


def test_the_panel_sends_mentioned_objects_as_context(chat, scripted_server, tmp_path):
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from nbchat.jupyter.panel.widget import ChatPanel

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.user_ns["df"] = pd.DataFrame({"price": [1.0, 2.0]})
        panel = ChatPanel(chat=chat)
        panel.value = "Why is @df so small? And @missing?"
        panel.submit()
        content = content_parts(scripted_server.chat_requests[0].messages[-1]["content"])
        assert content[0] == {"type": "text", "text": "Why is @df so small? And @missing?"}
        assert content[2]["text"].startswith('<context name="df" kind="DataFrame 2×1">')
        assert panel.status == "not defined here, no context attached: @missing"
    finally:
        close_shell()


def test_the_panel_picker_offers_the_notebook_s_variables_and_sends_the_picked(
    chat, scripted_server
):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from nbchat.jupyter.panel.widget import ChatPanel

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_cell("import pandas as pd\nsales = pd.DataFrame({'n': [1, 2, 3]})\nlimit = 2")
        panel = ChatPanel(chat=chat)
        assert panel.variables == ["sales", "limit"] and panel.attachable
        shell.run_cell("later = 'x'")
        panel._handle_custom_msg({"event": "variables"}, [])  # the chips' menu opened
        assert panel.variables == ["sales", "limit", "later"]
        panel.picked = ["sales"]
        panel.value = "How many rows, compared with @limit?"
        panel.submit()
        content = content_parts(scripted_server.chat_requests[0].messages[-1]["content"])
        assert [p["text"].split("\n")[0] for p in content[2:]] == [
            '<context name="sales" kind="DataFrame 3×1">',
            '<context name="limit" kind="int">',
        ]
        assert panel.picked == []  # the picks went with that question
    finally:
        close_shell()


def test_outside_a_kernel_the_picker_hides(chat):
    from nbchat.jupyter.panel.widget import ChatPanel

    panel = ChatPanel(chat=chat)
    assert not panel.attachable and panel.variables == []


HIDING = (
    "total = 1\n"
    "```\n<img src=x onerror=alert(1)>\n"
    "<!--\nimport os; os.remove('data.csv')\n-->\n"
    "total"
)


def test_code_that_closes_a_fence_or_hides_lines_is_shown_whole(chat, scripted_server, runs):
    scripted_server.script(
        Reply("Done.", after_tool="run_code"),
        Reply(tool_calls=[("run_code", {"code": HIDING})], when="sum"),
    )
    thread = chat.new_thread()
    chat.ask(thread, "the sum?")
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    shown = prompt.children[0].outputs[0]["data"]["text/html"]
    assert "<img" not in shown and "<!--" not in shown  # all of it is text
    assert visible_code(shown) == HIDING  # every line, the commented ones too
    assert "7 lines" in shown
    prompt.buttons[0].click()
    assert runs == [HIDING]  # byte for byte what was shown


def test_the_prompt_says_why_the_code_needs_a_yes(chat, scripted_server):
    scripted_server.script(
        Reply("Done.", after_tool="run_code"),
        Reply(tool_calls=[("run_code", {"code": "open('x.txt', 'w').write('hi')"})], when="write"),
    )
    thread = chat.new_thread()
    chat.ask(thread, "write it")
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    shown = prompt.children[0].outputs[0]["data"]["text/html"]
    assert "It needs your yes because it calls open()" in html.unescape(shown)
    prompt.buttons[2].click()


def test_a_run_whose_stored_code_changed_after_it_was_shown_is_refused(
    chat, scripted_server, runs
):
    thread, prompt = waiting_prompt(chat, scripted_server)
    path = Path(chat.store.location(thread))
    stored = json.loads(path.read_text())
    (pending,) = next(iter(stored["turns"].values()))["pending"]
    assert json.dumps(pending).count(CODE) == 1  # one copy of the code in the pending call
    pending["arguments"]["code"] = "__import__('os').system('id')"
    path.write_text(json.dumps(stored))
    prompt.buttons[0].click()
    assert runs == []
    assert "is not the code the prompt showed" in prompt.error
    assert not prompt.is_answered
    with pytest.raises(StoreCorrupt, match="not the code the prompt showed"):
        chat.answer_tool_call(thread, {"action": "run", "shown": prompt_digest(CODE)})
    assert runs == []
    prompt.buttons[2].click()  # Reject: nothing is left waiting for the next tests
    assert runs == [] and prompt.is_answered


def prompt_digest(code: str) -> str:
    from nbchat.context.run_code import shown_digest

    return shown_digest(code)


def test_a_prompt_answered_elsewhere_says_so_in_words_and_disables_its_buttons(
    chat, scripted_server, runs
):
    thread, prompt = waiting_prompt(chat, scripted_server)
    chat.answer_tool_call(thread, "run")  # %chat --answer run, another tab, another kernel
    assert runs == [CODE]
    prompt.buttons[0].click()
    assert runs == [CODE]  # not twice
    assert prompt.error == ""
    assert "already answered: run" in prompt.children[-1].value
    assert "CodeDecision" not in prompt.children[-1].value
    assert all(button.disabled for button in prompt.buttons)
    turn = chat.store.get(thread).turns[0]
    assert [done.shown for done in turn.answered] == ["run"]
