"""Compaction: a 200-turn thread against a small window sends a summary, made once, kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from nbchat import Chat
from nbchat.engine._compaction import SETTING, SUMMARY_REQUEST, Summary
from nbchat.testing import Reply, ScriptedServer
from provider_helpers import PROVIDERS, base_url
from shell_helpers import asked

CONTEXT = 2000
SUMMARY = "The person counted turns; the assistant confirmed each number. Nothing is open."


def is_summary_request(request) -> bool:
    return SUMMARY_REQUEST in json.dumps(request.messages[-1].get("content"))


def questions(server: ScriptedServer) -> list:
    return [r for r in asked(server) if not is_summary_request(r)]


def summaries(server: ScriptedServer) -> list:
    return [r for r in asked(server) if is_summary_request(r)]


@pytest.fixture
def server():
    with ScriptedServer(context_size=CONTEXT) as started:
        started.script(Reply(SUMMARY, when=SUMMARY_REQUEST), Reply("Noted."))
        yield started


def long_thread(chat: Chat, turns: int = 200) -> int:
    thread = chat.new_thread(system="You count.")
    for n in range(turns):
        chat.append_response(thread, f"Turn {n}: please remember the number {n * 7}.",
                             f"Remembered: {n * 7}. " + "Fine. " * 5)  # fmt: skip
    return thread


def make_chat(server: ScriptedServer, tmp_path, **kwargs) -> Chat:
    store = kwargs.pop("store", tmp_path / "store")
    return Chat(base_url=server.url, model="scripted-small", store=store,
                builtin_tools=False, window="summarize", **kwargs)  # fmt: skip


def test_a_long_thread_sends_a_summary_made_once_and_keeps_every_turn(server, tmp_path,
                                                                      location):  # fmt: skip
    chat = make_chat(server, tmp_path, store=location)
    thread = long_thread(chat)
    first = chat.ask(thread, "What was the first number?")
    assert first.text == "Noted."
    made = len(summaries(server))
    assert made >= 1  # the 200 turns do not fit one summary request of this window
    summary = Summary.from_dict(chat.store.get(thread).settings[SETTING])
    assert summary is not None and summary.text == SUMMARY and 0 < summary.covers < 200
    sent = questions(server)[-1]
    assert SUMMARY in sent.messages[0]["content"]  # in the system prompt, in its block
    assert "Turn 0:" not in json.dumps(sent.messages)  # the covered turns are not repeated
    for _ in range(3):
        assert chat.ask(thread, "And the next one?").text == "Noted."
    assert len(summaries(server)) == made  # reused: no request for the summary again
    assert all(r.status == 200 for r in asked(server))  # every request fitted the window
    stored = chat.store.get(thread)
    assert len(stored.turns) == 204  # the store keeps every turn
    assert stored.turns[0].query == "Turn 0: please remember the number 0."
    assert [q for q, _ in chat.thread_details(thread)][:200] == [
        f"Turn {n}: please remember the number {n * 7}." for n in range(200)
    ]


def test_without_summarize_the_oldest_turns_are_dropped_as_before(server, tmp_path):
    chat = make_chat(server, tmp_path)
    chat.window = "drop"
    thread = long_thread(chat, 120)
    chat.ask(thread, "What was the first number?")
    assert summaries(server) == [] and SETTING not in (chat.store.get(thread).settings or {})


def test_a_store_reopened_in_another_process_reuses_the_summary(server, tmp_path, location):
    chat = make_chat(server, tmp_path, store=location)
    thread = long_thread(chat)
    chat.ask(thread, "What was the first number?")
    made = len(summaries(server))
    store = location
    script = textwrap.dedent(f"""
        from nbchat import Chat
        chat = Chat(base_url={server.url!r}, model="scripted-small", store={store!r},
                    user={chat.user!r}, builtin_tools=False, window="summarize")
        print(chat.ask({thread}, "Anything else?").text)
    """)  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120, check=True)  # fmt: skip
    assert done.stdout.strip() == "Noted."
    assert len(summaries(server)) == made
    assert SUMMARY in questions(server)[-1].messages[0]["content"]


def test_a_summary_is_made_again_when_the_turns_it_covers_change(server, tmp_path):
    chat = make_chat(server, tmp_path)
    thread = long_thread(chat)
    chat.ask(thread, "Go on")
    made = len(summaries(server))
    chat.store.update_turn(thread, 3, answer="Changed.", messages=[
        {"role": "assistant", "content": "Changed."}])  # fmt: skip
    chat.ask(thread, "Go on")
    assert len(summaries(server)) > made


def test_a_cut_or_failed_summary_is_not_used(server, tmp_path):
    server.reset()
    server.script(Reply("A summary that ran out of", when=SUMMARY_REQUEST, finish_reason="length"),
                  Reply("Noted."))  # fmt: skip
    chat = make_chat(server, tmp_path)
    thread = long_thread(chat)
    answer = chat.ask(thread, "What was the first number?")
    assert answer.text == "Noted."
    assert SETTING not in (chat.store.get(thread).settings or {})
    sent = questions(server)[-1]
    assert "A summary that ran out" not in json.dumps(sent.messages)  # dropped oldest instead
    assert "Turn 0:" not in json.dumps(sent.messages) and sent.status == 200


def test_a_summary_that_calls_a_tool_is_not_used(server, tmp_path):
    server.reset()
    server.script(Reply(tool_calls=[("lookup", "{}")], when=SUMMARY_REQUEST), Reply("Noted."))
    chat = make_chat(server, tmp_path)
    thread = long_thread(chat)
    chat.ask(thread, "Hi")
    assert SETTING not in (chat.store.get(thread).settings or {})


def test_compact_on_demand_makes_it_before_the_question(server, tmp_path):
    chat = make_chat(server, tmp_path)
    chat.window = None  # on demand works whatever the window setting
    thread = long_thread(chat)
    summary = chat.compact(thread)
    assert summary is not None and summary.text == SUMMARY
    made = len(summaries(server))
    assert chat.compact(thread) == summary and len(summaries(server)) == made  # reused
    chat.update_thread_settings(thread, window="summarize")
    chat.ask(thread, "Now?")
    assert len(summaries(server)) == made


def test_a_short_thread_has_nothing_to_compact(server, tmp_path):
    chat = make_chat(server, tmp_path)
    thread = long_thread(chat, 3)
    assert chat.compact(thread) is None and summaries(server) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_preview_shows_the_summary_and_equals_what_is_sent(server, tmp_path, provider,
                                                               monkeypatch):  # fmt: skip
    monkeypatch.setenv("NBCHAT_CONTEXT_SIZE", str(CONTEXT))  # Anthropic's window is not asked
    chat = Chat(base_url=base_url(server, provider), provider=provider, model="scripted-small",
                store=tmp_path / "store", builtin_tools=False, window="summarize")
    thread = long_thread(chat)
    needs = chat.preview(thread, "Next?")
    assert needs.needs_summary and summaries(server) == []  # the preview makes no summary
    chat.compact(thread)
    preview = chat.preview(thread, "Next?")
    before = len(asked(server))
    chat.ask(thread, "Next?")
    sent = asked(server)[before:]
    assert len(sent) == 1  # a current summary adds no request
    assert preview.content == sent[0].raw
    sources = [p.source for p in preview.parts]
    assert sources[:2] == ["system prompt", "summary of earlier turns"]
    assert preview.summary_of == tuple(range(len(preview.summary_of))) and preview.summary_of
    assert not set(preview.left_out) & set(preview.summary_of)


def test_the_bundled_model_gets_drop_oldest(server, tmp_path, monkeypatch):
    monkeypatch.setenv("NBCHAT_TOOLLESS_MODELS", "")
    chat = make_chat(server, tmp_path)
    chat._is_small = lambda model: True  # what the bundled local model is
    thread = long_thread(chat)
    assert chat.compact(thread) is None
    chat.ask(thread, "Hi")
    assert summaries(server) == []
