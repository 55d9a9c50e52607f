"""Code awaiting a yes that holds characters drawn as nothing: marked, warned of, refused.

Trojan Source (CVE-2021-42574) and zero-width characters make code read
differently from what Python runs. Every code block marks each one as its
escape; a prompt names them; code with one outside its strings and comments
does not run as it is, and such code asks under every approval policy.
"""

from __future__ import annotations

import pytest

from nbchat import Chat, InvalidToolAnswer
from nbchat.base import markup
from nbchat.base._visible import escape_hidden, hidden_in
from nbchat.context.run_code import RunCode
from nbchat.jupyter.panel.widget import show_tool_prompts
from nbchat.testing import Reply, ScriptedServer

HIDDEN = [
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
    "\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad",
    "\u00a0", "\u3000", "\u2028", "\u2029", "\u3164", "\u115f", "\ufe0f", "\U000e0041",
    "\x1b", "\x00", "\x7f", "\x9b", "\r",
]


@pytest.mark.parametrize("char", HIDDEN, ids=[f"U+{ord(c):04X}" for c in HIDDEN])
def test_every_hidden_character_is_drawn_as_its_marked_escape(char):
    source = f'if answer != "no{char}":\n    go()'
    shown = [markup.code(source), markup.approval(source), markup.code_inline(source)]
    if char not in "\x00\r":  # CommonMark reads these as U+FFFD and a line break
        shown.append(markup.markdown(f"```python\n{source}\n```"))
    for html_text in shown:
        assert char not in html_text
        assert f'<span class="nbchat-hidden">{escape_hidden(char)}</span>' in html_text
    assert "holds 1 character that draws nothing" in markup.approval(source)
    assert list(hidden_in(source))[0][1:] == (1, char)


def test_newlines_tabs_and_ordinary_text_are_left_as_they_are():
    # (A joiner inside an emoji sequence is marked too: in code, a joiner is a joiner.)
    source = "for x in range(3):\n\tprint('héllo, 世界 💻')\r\n"
    assert "nbchat-hidden" not in markup.code(source)
    assert markup.approval(source).count("nbchat-hidden") == 0


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path) -> tuple[Chat, list[str]]:
    runs: list[str] = []
    tool = RunCode(lambda code: runs.append(code) or "done", approval="never-ask")
    return Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s",
                tools=[tool]), runs


def _ask(chat: Chat, server: ScriptedServer, code: str) -> int:
    server.script(
        Reply(tool_calls=[("run_code", {"code": code})], when="please", times=1),
        Reply("Done.", after_tool="run_code"),
    )
    thread = chat.new_thread()
    assert chat.ask(thread, "please").status == "suspended"  # asks, even under never-ask
    return thread


def test_hidden_characters_outside_strings_never_run_as_they_are(chat, scripted_server):
    chat, runs = chat
    thread = _ask(chat, scripted_server, "x\u3164 = 1\nprint(x\u3164)")
    with pytest.raises(InvalidToolAnswer, match=r"U\+3164 HANGUL FILLER on line 1.*Edit it"):
        chat.answer_tool_call(thread, "run")
    assert runs == [] and chat.pending_calls(thread)  # still waiting: Edit or Reject
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    assert prompt.editor.value == "x\\u3164 = 1\nprint(x\\u3164)"  # what the editor draws
    prompt.submit({"action": "edit", "code": "x = 1\nprint(x)"})
    assert runs == ["x = 1\nprint(x)"]


def test_hidden_characters_inside_a_string_run_once_the_person_has_seen_them(
    chat, scripted_server
):
    chat, runs = chat
    code = 'mode = "dry-run\u202e"\nprint(mode)'
    thread = _ask(chat, scripted_server, code)
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    shown = prompt.children[0].outputs[0]["data"]["text/html"]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE on line 1" in shown and "\u202e" not in shown
    prompt.buttons[0].click()
    assert runs == [code]


def test_code_put_in_the_next_cell_holds_the_escapes_and_a_note_says_so(run, ip, server):
    server.script(Reply('Try:\n\n```python\nif mode != "dry-run\u202e":\n    go()\n```\n'))
    ran = run("%chat --code write it")
    assert ip.rl_next_input == 'if mode != "dry-run\\u202e":\n    go()'
    assert "U+202E RIGHT-TO-LEFT OVERRIDE on line 1" in ran.out
    assert "the escape is kept in its place" in ran.out


def test_inline_code_in_an_answer_marks_them_too():
    shown = markup.markdown("Compare with `answer != \"no\u200b\"` first.")
    assert "\u200b" not in shown
    mark = '<span class="nbchat-hidden">\\u200b</span>'
    assert f"<code>answer != &quot;no{mark}&quot;</code>" in shown
