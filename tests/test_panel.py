"""The panel's keyboard box, background answers, store following, usage and long threads.

Widget state driven from code, no kernel: ``.click()``, the question box's
``submit()``/``stop()``, and the custom messages the browser sends.
"""

from __future__ import annotations

import dataclasses
import re

import pytest

import nbchat
from markup_helpers import body, visible
from nbchat import Chat
from nbchat.base.errors import ConfigError, InputError
from nbchat.engine._usage import parse_prices, turn_usage_line
from nbchat.jupyter.panel.widget import ChatPanel
from nbchat.store.base import Turn
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import close_shell


def title_reply(title: str = "A Short Title") -> Reply:
    return Reply(title, when=lambda body: "conversation title" in body["messages"][0]["content"])


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path) -> Chat:
    return Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "store")


def footer_lines(panel: ChatPanel) -> list[str]:
    """The usage line under each answer, as the person reads it."""
    html = body(panel.conversation.data["text/html"])
    return [visible(line) for line in re.findall(r"<small>(.*?)</small>", html)]


# ---------------------------------------------------------------- keyboard


def test_enter_in_the_box_sends_and_the_question_joins_the_history(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("Four.", when="2+2"), Reply("Six.", when="3+3"))
    panel = ChatPanel(chat=chat)
    assert panel.history == []

    panel._handle_custom_msg({"event": "submit", "value": "What is 2+2?"}, [])

    assert "Four." in panel.conversation.text and panel.value == ""
    assert panel.history == ["What is 2+2?"]
    panel.value = "And 3+3?"
    panel.submit()
    assert panel.history == ["What is 2+2?", "And 3+3?"]
    assert "Six." in panel.conversation.text

    other = ChatPanel(chat=chat)  # a thread shown anew brings its questions for Up
    assert other.history == ["What is 2+2?", "And 3+3?"]


def test_enter_while_an_answer_streams_does_not_send_a_second_question(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("", tokens=400, delay=0.005, when="long"))
    panel = ChatPanel(chat=chat, background=True)
    panel.value = "a long answer please"
    panel.submit()
    assert panel.is_streaming and panel.streaming  # the browser shows Stop for Send
    other = chat.new_thread()
    with pytest.raises(InputError, match="an answer is streaming; stop it"):
        panel.select(other)  # the answer's thread stays shown
    panel.delete()
    assert panel.status.startswith("‼ an answer is streaming") and panel.confirm == ""

    panel.value = "another"
    panel.submit()

    assert panel.status.startswith("‼ an answer is still streaming")
    assert panel.value == "another"
    panel.stop()
    assert panel.wait(30)
    assert len(chat.store.get(panel.thread_id).turns) == 1


def test_escape_stops_a_background_answer_and_keeps_the_partial_text(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("", tokens=2000, delay=0.005, when="long"))
    panel = ChatPanel(chat=chat, background=True)
    ended = []
    panel.on_answer(lambda p, result: ended.append(result.status))
    panel.value = "a long answer please"
    panel.submit()
    thread = panel.thread_id
    # The kernel is free while it streams: wait for some text from here.
    for _ in range(400):
        if "word" in visible(panel.live.data.get("text/html", "")):
            break
        panel.wait(0.05)
    assert panel.is_streaming

    panel._handle_custom_msg({"event": "stop"}, [])  # what Escape sends

    assert panel.wait(30)
    assert ended == ["interrupted"] and not panel.is_streaming
    assert panel.status == "Stopped; the partial answer is kept."
    assert not panel.streaming
    panel.delete()  # the thread can be deleted again
    assert panel.confirm.startswith(f"Delete thread {thread}")
    (turn,) = chat.store.get(thread).turns
    assert turn.status == "interrupted"
    assert turn.answer.startswith("word0 word1") and not turn.answer.endswith("word1999")
    assert "(interrupted)" in panel.conversation.text


def test_the_browser_poll_is_answered_and_follows_the_store(chat):
    panel = ChatPanel(chat=chat)
    sent = []
    panel.send = lambda content, buffers=None: sent.append(content)  # what reaches the browser
    thread = Chat(base_url=chat.settings.base_url, store=chat.store.path).new_thread()
    panel._handle_custom_msg({"event": "poll"}, [])
    assert sent == [{"event": "polled", "changed": True}] and panel.thread_id == thread
    panel._handle_custom_msg({"event": "poll"}, [])  # nothing new: the browser waits longer
    assert sent[-1] == {"event": "polled", "changed": False}
    before = panel._focus
    panel.focus()
    assert panel._focus == before + 1


# ---------------------------------------------------------------- following the store


def test_threads_made_elsewhere_show_up_on_the_next_poll(chat, scripted_server):
    scripted_server.script(title_reply("Sums And More"), Reply("Four.", when="2+2"))
    panel = ChatPanel(chat=chat)
    assert panel.thread_id is None
    assert panel.sync() is False  # nothing changed: one stat, nothing redrawn

    other = Chat(base_url=scripted_server.url, model="scripted-small", store=chat.store.path)
    thread = other.new_thread()
    other.ask(thread, "What is 2+2?")  # as %chat in a cell, or another kernel
    other.threads()  # the title is written after the answer: wait for it
    panel.poll()

    assert [t["label"] for t in panel.threads] == [f"Sums And More (#{thread})"]
    assert panel.thread_id == thread and "Four." in panel.conversation.text
    assert panel.sync() is False

    other.update_thread_title(thread, "Renamed elsewhere")  # e.g. a title written later
    assert panel.sync() is True
    assert panel.title == "Renamed elsewhere"
    assert [t["label"] for t in panel.threads] == [f"Renamed elsewhere (#{thread})"]


def test_a_turn_added_elsewhere_to_the_shown_thread_is_drawn(chat, scripted_server):
    thread = chat.new_thread()
    chat.append_response(thread, "first question", "first answer", title="Kept")
    panel = ChatPanel(chat=chat)
    second = chat.new_thread()  # a newer thread does not take the panel away
    chat.append_response(thread, "second question", "second answer")

    assert panel.sync() is True
    assert panel.thread_id == thread
    assert "second answer" in panel.conversation.text
    assert [t["id"] for t in panel.threads] == [thread, second]


# ---------------------------------------------------------------- usage


def test_each_answer_shows_its_usage_and_the_header_the_totals(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("Four.", when="2+2"), Reply("Six.", when="3+3"))
    panel = ChatPanel(chat=chat, prices={"scripted-small": [1.0, 2.0]})
    for question in ("What is 2+2?", "And 3+3?"):
        panel.value = question
        panel.submit()

    turns = chat.store.get(panel.thread_id).turns
    usages = [(t.usage["prompt_tokens"], t.usage["completion_tokens"]) for t in turns]
    assert all(p > 0 and c > 0 for p, c in usages)
    lines = footer_lines(panel)
    assert len(lines) == 2
    for line, (p, c), turn in zip(lines, usages, turns, strict=True):
        # a few tokens at a dollar a million: under a cent, in well under a tenth of a second
        assert (p * 1.0 + c * 2.0) / 1e6 < 0.01 and turn.finished - turn.started < 0.1
        assert line == f"scripted-small · {p:,} in · {c:,} out · < $0.01"
        assert "$0.0000" not in line and "0.0 s" not in line
    prompt, completion = sum(p for p, _ in usages), sum(c for _, c in usages)
    assert panel.usage == f"2 answers · {prompt:,} in · {completion:,} out · < $0.01"
    assert "cost" not in panel.gauge  # the cost is in the totals, once
    # the panel's own messages leave the model out of the usage: it has its own line
    assert [m["usage"] for m in panel.messages] == [line.removeprefix("scripted-small · ")
                                                    for line in lines]
    assert panel.gauge["used"] == usages[-1][0] + usages[-1][1]  # the last turn's context


def test_no_usage_line_when_the_endpoint_reports_none(chat, scripted_server, monkeypatch):
    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [1, 2]}')
    scripted_server.script(title_reply(), Reply("Four.", when="2+2", usage=False))
    panel = ChatPanel(chat=chat)
    assert panel.prices == parse_prices({"scripted-small": [1, 2]})
    panel.value = "What is 2+2?"
    panel.submit()

    assert "Four." in panel.conversation.text
    assert footer_lines(panel) == [] and panel.usage == "" and panel.gauge == {}


def test_prices_without_the_model_show_tokens_only(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("Four.", when="2+2"))
    panel = ChatPanel(chat=chat, prices={"another-model": {"input": 1, "output": 1}})
    panel.value = "What is 2+2?"
    panel.submit()
    (line,) = footer_lines(panel)
    assert line.startswith("scripted-small · ") and "$" not in line and "$" not in panel.usage


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "NBCHAT_PRICES is not valid JSON"),
        ("[1, 2]", "NBCHAT_PRICES must map model names to prices"),
        ('{"m": [1]}', "the price of 'm' must be two numbers"),
        ('{"m": [1, -2]}', "the price of 'm' must be two numbers"),
        ('{"m": {"input": 1}}', "the price of 'm' must be two numbers"),
    ],
)
def test_bad_prices_say_what_is_wrong(value, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_prices(value)


# ---------------------------------------------------------------- long threads


def test_a_long_thread_shows_its_last_turns_and_earlier_ones_on_demand(chat):
    thread = chat.new_thread()
    for n in range(45):
        chat.append_response(thread, f"question {n}", f"answer {n}.")
    panel = ChatPanel(chat=chat, page_size=20)

    text = panel.conversation.text
    assert "answer 44." in text and "answer 25." in text and "answer 24." not in text
    assert panel.hidden == 25 and len(panel.messages) == 20
    assert [m["index"] for m in panel.messages] == list(range(25, 45))

    panel.show_earlier()
    assert "answer 5." in panel.conversation.text and "answer 4." not in panel.conversation.text
    assert panel.hidden == 5 and panel.messages[0]["query"] == "question 5"
    panel.show_earlier()
    assert "answer 0." in panel.conversation.text
    assert panel.hidden == 0 and len(panel.messages) == 45


# ---------------------------------------------------------------- the side area


def test_the_side_panel_falls_back_to_the_cell_without_a_kernel(chat, capsys):
    panel = nbchat.panel(side=True, chat=chat)

    assert isinstance(panel, ChatPanel) and panel.area == "cell"
    assert capsys.readouterr().out == (
        "nbchat: the side area needs a Jupyter kernel; the panel is shown here instead.\n"
    )
    data, _ = panel._repr_mimebundle_()  # anywidget gives data and metadata
    assert "application/vnd.jupyter.widget-view+json" in data


def test_a_side_panel_shows_as_a_note_in_a_cell(chat):
    panel = ChatPanel(chat=chat, area="side")
    assert panel._repr_mimebundle_() == {
        "text/plain": "nbchat: the chat panel is open in JupyterLab's right side area."
    }
    assert panel.area == "side"  # the front end's layout for the side area
    with pytest.raises(ValueError, match="area must be one of cell, side"):
        ChatPanel(chat=chat, area="top")


# ---------------------------------------------------------------- the magic


@pytest.fixture
def shell(scripted_server, tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from nbchat.jupyter.magic.magics import load

    monkeypatch.setenv("NBCHAT_BASE_URL", scripted_server.url)
    monkeypatch.setenv("NBCHAT_MODEL", "scripted-small")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ip = InteractiveShell.instance(config=config)
    load(ip)
    yield ip
    close_shell()


def test_panel_side_in_a_terminal_falls_back_with_one_line(shell, capsys):
    shell.run_cell('%config ChatMagics.prices = {"scripted-small": [1, 2]}')
    capsys.readouterr()
    result = shell.run_cell("%chat --panel --side")
    assert result.error_in_exec is None
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "nbchat: the side area needs a Jupyter kernel; the panel is shown here instead."
    )
    assert out[1].startswith("ChatPanel(Chat(")  # the panel itself, as text in a terminal

    shell.run_cell('%config ChatMagics.panel_area = "side"')
    capsys.readouterr()
    shell.run_cell("%chat --panel")
    assert capsys.readouterr().out.startswith("nbchat: the side area needs a Jupyter kernel")


def test_side_goes_with_panel(shell, capsys):
    result = shell.run_cell("%chat --side")
    assert str(result.error_in_exec) == "--side goes with --panel: %chat --panel --side"


def test_bad_prices_in_config_are_one_line(shell, capsys):
    shell.run_cell('%config ChatMagics.prices = {"scripted-small": "cheap"}')
    result = shell.run_cell("%chat --panel")
    assert str(result.error_in_exec).startswith(
        "prices: the price of 'scripted-small' must be two numbers"
    )


def test_the_panel_follows_either_store(location, scripted_server):
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=location)
    panel = ChatPanel(chat=chat)
    assert panel.sync() is False

    other = Chat(base_url=scripted_server.url, model="scripted-small", store=location)
    thread = other.new_thread()
    other.append_response(thread, "made in another kernel", "Seen.", title="Elsewhere")

    assert panel.sync() is True
    assert panel.thread_id == thread and "Seen." in panel.conversation.text
    assert panel.sync() is False


@pytest.mark.timeout(20)  # the server stays silent for 30 s: only the stop can end the answer
def test_stop_ends_a_background_answer_while_the_server_sends_nothing(chat, scripted_server):
    scripted_server.script(
        title_reply(), Reply("", tokens=50, delay=0.3, stall_after=3, stall=30, when="long")
    )
    panel = ChatPanel(chat=chat, background=True)
    panel.value = "a long answer please"
    panel.submit()
    thread = panel.thread_id
    while "word2" not in panel.live.data.get("text/html", ""):  # shown; the server is silent
        panel.wait(0.05)

    panel._handle_custom_msg({"event": "stop"}, [])  # what Escape sends

    assert panel.wait(15)
    assert panel.status == "Stopped; the partial answer is kept."
    (turn,) = chat.store.get(thread).turns
    assert (turn.status, turn.answer) == ("interrupted", "word0 word1 word2 ")
    request = scripted_server.chat_requests[0]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=5)


def test_prices_set_while_the_panel_is_open_apply_at_once(shell, scripted_server, capsys):
    scripted_server.script(Reply("Four.", when="2+2"), Reply("Six.", when="3+3"))
    shell.run_cell("%chat What is 2+2?")
    shell.run_cell("%chat --panel")
    (panel,) = shell.magics_manager.registry["ChatMagics"].panels
    (before,) = footer_lines(panel)
    assert "$" not in before

    shell.run_cell('%config ChatMagics.prices = {"scripted-small": [100000, 200000]}')

    (after,) = footer_lines(panel)
    assert after.startswith(f"{before} · ≈ $")
    assert re.fullmatch(r"≈ \$\d+\.\d\d", after.rsplit(" · ", 1)[1])  # cents, not $0.0000
    assert "$" in panel.usage and "cost" not in panel.gauge
    assert panel.messages[-1]["usage"] == after.removeprefix("scripted-small · ")
    panel.value = "And 3+3?"
    panel.submit()  # the next answers are priced too
    assert all("≈ $" in line for line in footer_lines(panel))

    shell.run_cell('%config ChatMagics.prices = {"scripted-small": "cheap"}')
    assert panel.status.startswith("‼ prices: the price of 'scripted-small' must be two numbers")


def test_the_gauge_shows_the_last_turn_s_context_against_the_model_s_size(tmp_path):
    with ScriptedServer(Reply("Four.", when="2+2"), context_size=4096) as server:
        chat = Chat(base_url=server.url, model="scripted-small", store=tmp_path / "store")
        panel = ChatPanel(chat=chat, prices={"scripted-small": [1, 2]})
        assert panel.gauge == {}  # no thread yet
        panel.value = "What is 2+2?"
        panel.submit()
        usage = chat.store.get(panel.thread_id).turns[-1].usage
        used = usage["prompt_tokens"] + usage["completion_tokens"]
        assert panel.gauge == {"used": used, "size": 4096}  # its cost is in the totals
        assert [r.path for r in server.requests].count("/props") == 1  # asked once a model


def test_cached_prompt_tokens_the_endpoint_reports_show_in_the_gauge(chat, scripted_server):
    scripted_server.script(title_reply(), Reply("Four.", when="2+2", cached_tokens=2))  # of 3
    panel = ChatPanel(chat=chat)
    panel.value = "What is 2+2?"
    panel.submit()
    (turn,) = chat.store.get(panel.thread_id).turns
    assert turn.usage["cache_read_tokens"] == 2
    assert panel.gauge["cached"] == 2


def test_the_browser_s_intents_drive_the_panel_and_bad_ones_say_why(chat):
    first = chat.new_thread()
    chat.append_response(first, "first question", "first answer", title="First")
    second = chat.new_thread()
    chat.append_response(second, "second question", "second answer", title="Second")
    panel = ChatPanel(chat=chat)
    assert panel.thread_id == second

    panel._handle_custom_msg({"event": "select", "value": first}, [])
    assert panel.thread_id == first and panel.title == "First"
    panel._handle_custom_msg({"event": "rename", "value": "Renamed"}, [])
    assert chat.store.get(first).title == "Renamed"
    panel._handle_custom_msg({"event": "delete"}, [])
    assert panel.confirm == f"Delete thread {first}, “Renamed”?"
    panel._handle_custom_msg({"event": "cancel_delete"}, [])
    assert panel.confirm == "" and len(chat.threads()) == 2

    panel._handle_custom_msg({"event": "select", "value": 99}, [])  # gone, or never there
    assert panel.status.startswith("‼ ") and "99" in panel.status and panel.thread_id == first
    panel._handle_custom_msg({"event": "select", "value": True}, [])  # not an id: ignored
    panel._handle_custom_msg({"event": "eval", "value": "x"}, [])  # not an intent: ignored
    assert panel.thread_id == first


def test_reasoning_shows_collapsed_above_the_answer(chat, scripted_server):
    scripted_server.script(
        title_reply(), Reply("Four.", when="2+2", reasoning="Two and two make four.")
    )
    panel = ChatPanel(chat=chat)
    panel.value = "What is 2+2?"
    panel.submit()
    (shown,) = panel.messages
    assert shown["html"].startswith('<details class="nbchat-reasoning"><summary><i>Reasoning')
    assert shown["html"].index("Two and two make four.") < shown["html"].index("<p>Four.</p>")
    assert " open" not in shown["html"].split(">", 1)[0]  # collapsed


def test_usage_lines_round_what_reads_as_noise():
    started = 1_000_000.0
    turn = Turn(query="q", answer="a", model="m", started=started, finished=started + 0.04,
                usage={"prompt_tokens": 10, "completion_tokens": 5})
    prices = parse_prices({"m": [1, 2]})
    assert turn_usage_line(turn, prices) == "m · 10 in · 5 out · < $0.01"
    slow = dataclasses.replace(turn, finished=started + 2.25)
    dear = parse_prices({"m": [1_000_000, 2_000_000]})  # $10 + $10
    assert turn_usage_line(slow, dear) == "m · 10 in · 5 out · 2.2 s · ≈ $20.00"
    assert turn_usage_line(slow, dear, named=False) == "10 in · 5 out · 2.2 s · ≈ $20.00"
    free = parse_prices({"m": [0, 0]})
    assert turn_usage_line(turn, free) == "m · 10 in · 5 out · ≈ $0"
