"""Whole turns against the scripted server: options, endings, windows, reasoning, tools.

What the engine sends is read from the server's request log; what it keeps,
from the store; what a cell shows, from the renderer's outputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

import nbchat
from markup_helpers import body
from nbchat import LLM, Chat, ChatHistory
from nbchat.base.events import (
    ContextWindowed,
    ReasoningDelta,
    TextDelta,
    TurnFinished,
    TurnStarted,
)
from nbchat.base.options import TITLE_OPTIONS
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.jupyter.cell.render import render_turn
from nbchat.jupyter.magic.magics import CONTINUE_QUESTION, load
from nbchat.testing import Reply, ScriptedServer
from provider_helpers import base_url
from shell_helpers import close_shell

ON_BOTH = pytest.mark.parametrize("provider", ["openai", "anthropic"])


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path: Path) -> Chat:
    return Chat(base_url=scripted_server.url, store=tmp_path / "store", model="scripted-small")


def chat_on(server: ScriptedServer, provider: str, store: Path, **kwargs: Any) -> Chat:
    """A Chat whose endpoint is the scripted server speaking ``provider``'s wire format."""
    url = base_url(server, provider)
    return Chat(base_url=url, provider=provider, store=store, model="scripted-small", **kwargs)


def asked(server: ScriptedServer) -> list[Any]:
    """Chat requests, the title requests left out."""
    return [r for r in server.chat_requests if r.messages[0].get("content") != TITLE_PROMPT]


def long_thread(chat: Chat, turns: int, words: int = 40) -> int:
    thread = chat.new_thread()
    chat.update_thread_title(thread, "Long")
    for i in range(turns):
        chat.append_response(thread, f"question {i} " + "word " * words, f"answer {i} " * words)
    return thread


# -- options ----------------------------------------------------------------------


def test_options_merge_environment_session_thread_and_call_and_are_saved(
    scripted_server, tmp_path, monkeypatch
):
    monkeypatch.setenv("NBCHAT_OPTIONS", '{"max_tokens": 900, "top_k": 5, "seed": 7}')
    chat = Chat(
        base_url=scripted_server.url, store=tmp_path, model="scripted-small",
        options={"max_tokens": 500, "temperature": 0.7},
    )  # fmt: skip
    thread = chat.new_thread(options={"temperature": 0.2, "stop": "END"})
    chat.ask(thread, "Hello", options={"max_tokens": 300, "seed": None})
    expected = {"max_tokens": 300, "top_k": 5, "temperature": 0.2, "stop": "END"}
    assert asked(scripted_server)[-1].options == expected
    assert chat.store.get(thread).turns[0].options == expected
    chat.ask(thread, "Again")
    assert asked(scripted_server)[-1].options == {**expected, "max_tokens": 500, "seed": 7}


def test_thread_options_are_saved_shown_and_removed(chat, scripted_server):
    thread = chat.new_thread()
    chat.update_thread_settings(thread, options={"max_tokens": 200, "num_ctx": 8192})
    assert chat.store.get(thread).settings["options"] == {"max_tokens": 200, "num_ctx": 8192}
    chat.update_thread_settings(thread, options={"num_ctx": None})
    chat.ask(thread, "Hi")
    assert asked(scripted_server)[-1].options == {"max_tokens": 200}
    with pytest.raises(nbchat.InputError, match="temperature"):
        chat.update_thread_settings(thread, options={"temperature": "hot"})


def test_llm_and_history_questions_take_options(scripted_server):
    llm = LLM("scripted-small", base_url=scripted_server.url, options={"seed": 3})
    llm.ask("One", options={"max_tokens": 50})
    llm.ask_with_history("Two", ChatHistory(), options={"temperature": 0.0})
    first, second = scripted_server.chat_requests
    assert (first.options, second.options) == (
        {"seed": 3, "max_tokens": 50},
        {"seed": 3, "temperature": 0.0},
    )


def test_an_llm_answer_says_whether_it_is_whole(scripted_server):
    scripted_server.script(Reply("One two", when="cut", finish_reason="length"), Reply("Done."))
    llm = LLM("scripted-small", base_url=scripted_server.url)
    cut = llm.ask("Please cut this", options={"max_tokens": 2})
    assert cut == "One two" and isinstance(cut, str)
    assert (cut.status, cut.finish_reason, cut.complete) == ("incomplete", "length", False)
    assert "%chat --continue" in cut.note
    whole = llm.ask_with_history("Whole?", ChatHistory())
    assert (whole, whole.status, whole.complete) == ("Done.", "complete", True)


def test_the_title_request_has_its_own_small_cap(chat, scripted_server):
    thread = chat.new_thread(options={"max_tokens": 4000, "num_ctx": 8192})
    chat.ask(thread, "Tell me about sorting lists")
    chat.wait_for_titles()
    titles = [r for r in scripted_server.chat_requests if r not in asked(scripted_server)]
    assert len(titles) == 1
    assert titles[0].options == {"num_ctx": 8192, **TITLE_OPTIONS}


# -- honest endings -----------------------------------------------------------------


@ON_BOTH
def test_an_answer_cut_at_the_token_limit_is_incomplete_and_says_so(
    scripted_server, tmp_path, provider
):
    chat = chat_on(scripted_server, provider, tmp_path)
    scripted_server.script(Reply("One two three", finish_reason="length", reasoning="Hm."))
    thread = chat.new_thread()
    answer = chat.iter_ask(thread, "Count", options={"max_tokens": 3})
    events = list(answer)
    assert (answer.status, answer.finish_reason) == ("incomplete", "length")
    assert answer.reasoning == "Hm."
    assert answer.text == "One two three" and answer.note == events[-1].note
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert (finished.status, finished.finish_reason, finished.note) == (
        "incomplete",
        "length",
        "stopped at the 3-token limit — `%chat --continue` to go on",
    )
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.finish_reason) == ("incomplete", "length")
    assert turn.answer == "One two three"


@ON_BOTH
def test_a_stream_ending_without_a_finish_reason_is_incomplete(scripted_server, tmp_path, provider):
    chat = chat_on(scripted_server, provider, tmp_path)
    scripted_server.script(Reply("Half an answer", no_finish=True))
    thread = chat.new_thread()
    answer = chat.ask(thread, "Tell me")
    assert answer.status == "incomplete"
    assert chat.store.get(thread).turns[0].finish_reason is None


@ON_BOTH
def test_a_truncated_tool_call_is_never_run(scripted_server, tmp_path, provider):
    ran: list[str] = []

    @nbchat.tool
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    chat = chat_on(scripted_server, provider, tmp_path, tools=[delete])
    scripted_server.script(
        Reply("Deleting.", tool_calls=[("delete", '{"path": "/home/ana/notes')],
              finish_reason="length"),
        Reply("Never asked."),
    )  # fmt: skip
    thread = chat.new_thread()
    finished = list(chat.iter_ask(thread, "clean up"))[-1]
    assert ran == [] and len(asked(scripted_server)) == 1
    assert finished.status == "incomplete" and "delete call" in finished.note
    turn = chat.store.get(thread).turns[0]
    assert turn.messages == [{"role": "assistant", "content": "Deleting."}]


# -- long threads -------------------------------------------------------------------


def test_a_500_turn_thread_keeps_answering_on_a_4k_context(tmp_path):
    with ScriptedServer(context_size=4096) as server:
        chat = Chat(base_url=server.url, store=tmp_path, model="scripted-small")
        thread = long_thread(chat, 500)
        for question in ("First?", "Second?"):
            events = list(chat.iter_ask(thread, question))
            assert events[-1].status == "complete"
        windowed = [e for e in events if type(e) is ContextWindowed]
        assert len(windowed) == 1 and windowed[0].context_size == 4096
        sent = asked(server)[-1].messages
        assert windowed[0].dropped_turns + (len(sent) - 1) // 2 == 501  # all turns but the new
        assert sent[-1]["content"] == "Second?"
        assert [r.status for r in asked(server)] == [200, 200]
    assert len(chat.store.get(thread).turns) == 502  # the stored thread is never trimmed


@ON_BOTH
def test_an_overflow_is_retried_once_with_a_smaller_window(tmp_path, monkeypatch, provider):
    monkeypatch.setenv("NBCHAT_CONTEXT_SIZE", "100000")  # the client believes a larger context
    with ScriptedServer(context_size=2000) as server:
        chat = chat_on(server, provider, tmp_path)
        thread = long_thread(chat, 60)
        events = list(chat.iter_ask(thread, "Still there?"))
        assert events[-1].status == "complete"
        assert [r.status for r in asked(server)] == [400, 200]
        windowed = [e for e in events if type(e) is ContextWindowed]
        assert len(windowed) == 1 and windowed[0].context_size == 2000
        assert len(asked(server)[1].messages) < len(asked(server)[0].messages)


@ON_BOTH
def test_an_overflow_that_a_window_cannot_fix_fails_once(tmp_path, provider):
    with ScriptedServer(context_size=5) as server:
        chat = chat_on(server, provider, tmp_path)
        thread = chat.new_thread()
        with pytest.raises(nbchat.ContextOverflow):
            chat.ask(thread, "one two three four five six seven eight")
        assert [r.status for r in asked(server)] == [400]


# -- reasoning ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "form"),
    [("openai", "reasoning_content"), ("openai", "think"), ("anthropic", "reasoning_content")],
)
def test_reasoning_is_kept_with_the_turn_and_never_sent_back(
    scripted_server, tmp_path, provider, form
):
    chat = chat_on(scripted_server, provider, tmp_path)
    scripted_server.script(Reply("Four.", reasoning="Two and two.", reasoning_as=form, times=1))
    thread = chat.new_thread()
    events = list(chat.iter_ask(thread, "What is 2+2?"))
    assert "".join(e.text for e in events if type(e) is ReasoningDelta) == "Two and two."
    assert "".join(e.text for e in events if type(e) is TextDelta) == "Four."
    finished = events[-1]
    assert (finished.text, finished.reasoning) == ("Four.", "Two and two.")
    turn = chat.store.get(thread).turns[0]
    assert (turn.answer, turn.reasoning) == ("Four.", "Two and two.")
    answer = chat.ask(thread, "Again: 2+2?")
    assert (answer.text, answer.reasoning) == ("2 + 2 = 4.", "")
    chat.ask(thread, "And 3+3?")
    contents = [str(m["content"]) for m in asked(scripted_server)[-1].messages]
    assert contents == ["What is 2+2?", "Four.", "Again: 2+2?", "2 + 2 = 4.", "And 3+3?"]


def test_reasoning_is_shown_collapsed_above_the_answer_and_kept_out_of_the_text(ip):
    events = [
        TurnStarted(3, 1, "m"),
        ReasoningDelta("Let me see."),
        TextDelta("Four."),
        TurnFinished(3, 1, "Four.", "complete", "m", reasoning="Let me see."),
    ]
    with capture_output() as cap:
        result = render_turn(events, mode="final")
    final = cap.outputs[-1].data
    assert body(final["text/html"]) == (
        '<details class="nbchat-reasoning"><summary><i>Thought</i></summary>\n'
        "<p>Let me see.</p>\n</details>\n\n<p>Four.</p>\n"
    )  # a <details> without "open": collapsed
    assert final["text/plain"] == "Four." and result.text == "Four."


def test_a_terminal_shows_reasoning_indented_above_the_answer(ip, capsys):
    events = [
        TurnStarted(3, 1, "m"),
        ReasoningDelta("Let me\nsee."),
        TextDelta("Four."),
        TurnFinished(3, 1, "Four.", "complete", "m"),
    ]
    render_turn(events, mode="text")
    assert capsys.readouterr().out == "    Let me\n    see.\n\nFour.\n"


def test_the_cell_says_why_an_answer_stopped_and_what_was_left_out(ip):
    events = [
        TurnStarted(3, 1, "m"),
        ContextWindowed(12, 4096),
        TextDelta("One two"),
        TurnFinished(3, 1, "One two", "incomplete", "m", finish_reason="length",
                     note="stopped at the 2-token limit — `%chat --continue` to go on"),
    ]  # fmt: skip
    with capture_output() as cap:
        result = render_turn(events, mode="final")
    assert cap.outputs[-1].data["text/plain"] == (
        "One two\n\n… stopped at the 2-token limit — `%chat --continue` to go on\n\n"
        "ℹ️ 12 earlier turns were left out of the request to fit the model's 4,096-token "
        "context (the thread keeps them)"
    )
    assert result.status == "incomplete" and result.text == "One two"


# -- built-in client tools -----------------------------------------------------------


def test_builtin_tools_are_off_for_models_that_cannot_use_them(
    scripted_server, tmp_path, monkeypatch
):
    monkeypatch.setenv("NBCHAT_TOOLLESS_MODELS", "other, scripted-*")
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    thread = chat.new_thread()
    chat.ask(thread, "Hi")
    assert "tools" not in asked(scripted_server)[-1].body
    chat.update_thread_settings(thread, builtin_tools=True)
    chat.ask(thread, "Hi again")
    names = [t["function"]["name"] for t in asked(scripted_server)[-1].body["tools"]]
    assert names == ["ask_user", "choose", "confirm"]


def test_builtin_tools_are_off_for_the_bundled_local_model(tmp_path):
    with ScriptedServer(models=["smollm2"]) as server:
        chat = Chat(base_url=server.url, store=tmp_path, model="smollm2")
        chat.ask(chat.new_thread(), "Hi")
        assert "tools" not in server.chat_requests[0].body


def test_builtin_tools_switch_per_session(scripted_server, tmp_path):
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small",
                builtin_tools=False)  # fmt: skip
    chat.ask(chat.new_thread(), "Hi")
    assert "tools" not in asked(scripted_server)[-1].body


# -- the magics -----------------------------------------------------------------------


@pytest.fixture
def ip(scripted_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("NBCHAT_BASE_URL", scripted_server.url)
    monkeypatch.setenv("NBCHAT_MODEL", "scripted-small")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    load(shell)
    yield shell
    close_shell()


def test_cell_flags_set_the_options_of_one_question(ip, scripted_server):
    ip.run_cell("%%chat --max-tokens 300 --temperature 0.2 --seed 1 --stop END -o top_k=5\n"
                "Summarize this")  # fmt: skip
    ip.run_cell("%chat And again")
    first, second = asked(scripted_server)
    assert first.options == {"max_tokens": 300, "temperature": 0.2, "seed": 1, "stop": "END",
                             "top_k": 5}  # fmt: skip
    assert second.options == {}


def test_session_and_saved_thread_options(ip, scripted_server, capsys):
    ip.run_cell("%config ChatMagics.options = {'temperature': 0.5}")
    ip.run_cell("%chat Hello")
    ip.run_cell("%chat --set --max-tokens 100 --builtin-tools off")
    assert "options max_tokens=100; built-in tools off" in capsys.readouterr().out
    ip.run_cell("%chat Hello again")
    first, second = asked(scripted_server)
    assert first.options == {"temperature": 0.5} and "tools" in first.body
    assert second.options == {"temperature": 0.5, "max_tokens": 100}
    assert "tools" not in second.body
    ip.run_cell("%chat --show")  # a terminal prints the text/plain
    shown = capsys.readouterr().out
    assert "\n\nOptions: max_tokens=100\n\nBuilt-in tools: off\n\n" in shown
    with capture_output() as cap:
        ip.run_cell("%chat --show")
    assert (
        "<p><strong>Options:</strong> max_tokens=100</p>\n"
        "<p><strong>Built-in tools:</strong> off</p>\n"
    ) in body(cap.outputs[0].data["text/html"])


def test_continue_goes_on_with_the_current_thread(ip, scripted_server):
    scripted_server.script(Reply("One two", finish_reason="length", times=1), Reply("three."))
    ip.run_cell("%chat --max-tokens 2 Count to three")
    ip.run_cell("%chat --continue")
    first, second = asked(scripted_server)
    assert second.messages[-3:] == [
        {"role": "user", "content": "Count to three"},
        {"role": "assistant", "content": "One two"},
        {"role": "user", "content": CONTINUE_QUESTION},
    ]


def test_continue_without_a_thread_is_one_line(ip, scripted_server):
    result = ip.run_cell("%chat --continue")
    assert "no current thread to continue" in str(result.error_in_exec)
    assert scripted_server.requests == []


def test_the_terminal_front_end_takes_options_and_shows_thinking_and_the_cut(
    scripted_server, tmp_path
):
    scripted_server.script(
        Reply("One two three", reasoning="Counting.", finish_reason="length")
    )
    env = {**os.environ, "NBCHAT_BASE_URL": scripted_server.url, "NBCHAT_MODEL": "scripted-small",
           "NBCHAT_STORE": str(tmp_path), "PYTHONPATH": str(Path(nbchat.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "nbchat", "ask", "--max-tokens", "3", "-o", "top_k=5", "Count"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.stdout == (
        "    Counting.\n\nOne two three\n"
        "[stopped at the 3-token limit — %chat --continue to go on]\n"
    ), done.stderr
    assert asked(scripted_server)[0].options == {"max_tokens": 3, "top_k": 5}


def test_builtin_tools_switch_per_magics_session(ip, scripted_server):
    ip.run_cell("%config ChatMagics.builtin_tools = False")
    ip.run_cell("%chat Hello")
    ip.run_cell("%chat --builtin-tools on Hello again")
    first, second = asked(scripted_server)
    assert "tools" not in first.body and len(second.body["tools"]) == 3


def test_a_bad_session_option_is_one_line(ip, scripted_server, capsys):
    ip.run_cell("%config ChatMagics.options = {'max_tokens': -5}")
    result = ip.run_cell("%chat Hello")
    assert "ChatMagics.options: max_tokens must be a whole number above 0" in str(
        result.error_in_exec
    )
    assert scripted_server.requests == []
