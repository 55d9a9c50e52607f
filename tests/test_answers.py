"""Client-tool answers that can be trusted with side effects: exactly once, never lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nbchat import AlreadyAnswered, Chat, NoPendingCall, StoreCorrupt, StreamCutOff
from nbchat.base.events import ToolCallAbandoned, TurnFinished
from nbchat.base.records import PendingCall, Prompt
from nbchat.testing import Reply, ScriptedServer

CHOOSE = ("choose", {"question": "Which colour?", "options": ["red", "green"]})
SRC = str(Path(__file__).resolve().parents[1] / "src")

# Waits for the go file, then answers the thread's pending call with its value.
ANSWERER = r"""
import os, sys, time
from nbchat import AlreadyAnswered, Chat
url, store, go, value = sys.argv[1:5]
chat = Chat(base_url=url, store=store, user="ana")
chat.pending_calls(1)  # warm: imports and the first read are done before the race
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    answer = chat.answer_tool_call(1, value)
    print("won", answer.text, flush=True)
except AlreadyAnswered as error:
    print("lost", error, flush=True)
"""


def suspended_thread(server: ScriptedServer, store: Path) -> Chat:
    chat = Chat(base_url=server.url, store=store, user="ana", model="scripted-small")
    thread = chat.new_thread()
    assert chat.ask(thread, "Pick a colour").status == "suspended"
    return chat


def resumed_requests(server: ScriptedServer) -> list[Any]:
    """Requests that carried an answer to the choose call back to the model."""
    return [
        r for r in server.chat_requests
        if r.messages[-1].get("role") == "tool" and r.messages[-1].get("name") == "choose"
    ]


@pytest.mark.parametrize("round_", range(4))
def test_racing_answers_from_real_processes_resume_the_turn_once(
    scripted_server: ScriptedServer, tmp_path: Path, round_: int
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Done.", after_tool="choose", delay=0.01),
        Reply("A title", when="title"),
    )
    chat = suspended_thread(scripted_server, tmp_path / "store")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ANSWERER, scripted_server.url, str(tmp_path / "store"),
             str(go), value],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for value in ("red", "green", "red")
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    go.touch()
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outcomes.append(out.split()[0])
    assert sorted(outcomes) == ["lost", "lost", "won"]
    assert len(resumed_requests(scripted_server)) == 1  # the model heard one answer
    [turn] = chat.store.get(1).turns
    assert turn.status == "complete" and [a.call_id for a in turn.answered] == ["call_1"]
    tool_messages = [m for m in turn.messages if m["role"] == "tool"]
    assert len(tool_messages) == 1


def test_a_second_answer_in_the_same_process_says_already_answered(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Green it is.", after_tool="choose"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    other = Chat(base_url=scripted_server.url, store=tmp_path, user="ana")
    first = chat.iter_answer_tool_call(1, "green")  # claimed, not yet resumed
    with pytest.raises(AlreadyAnswered, match=r"already answered: 'Which colour\?'.*\(green\)"):
        other.answer_tool_call(1, "red")
    assert first.result().text == "Let me ask.\n\nGreen it is."
    assert len(resumed_requests(scripted_server)) == 1
    with pytest.raises(AlreadyAnswered):
        other.answer_tool_call(1, "red", call_id="call_1")


def test_a_failed_resume_keeps_the_answer_and_retry_resends_it(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Green is a fine", after_tool="choose", cut_after=2, times=1),
        Reply("Green it is.", after_tool="choose"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    with pytest.raises(StreamCutOff):
        chat.answer_tool_call(1, "green")
    [turn] = chat.store.get(1).turns
    assert turn.status == "failed" and [a.answer for a in turn.answered] == ["green"]
    answer = chat.retry(1)
    assert (answer.text, answer.status) == ("Let me ask.\n\nGreen it is.", "complete")
    resumed = resumed_requests(scripted_server)
    assert len(resumed) == 2 and resumed[0].messages == resumed[1].messages
    assert "<answer>\ngreen\n</answer>" in resumed[1].messages[-1]["content"]
    asks = [r for r in scripted_server.chat_requests if r.messages[-1]["role"] == "user"]
    assert [r.messages[-1]["content"] for r in asks if "title" not in str(r.messages)] == [
        "Pick a colour"
    ]  # the question was not asked again, so the model did not ask the person again


def damage_pending(path: Path, damage: Any) -> bytes:
    data = json.loads(path.read_text())
    entry = data["turns"]["1"]["pending"]
    damage(entry)
    path.write_text(json.dumps(data))
    return path.read_bytes()


def _not_an_object(pending: list[Any]) -> None:
    pending[0] = "call_1"


def _no_call(pending: list[Any]) -> None:
    del pending[0]["call"]


def _no_arguments(pending: list[Any]) -> None:
    del pending[0]["arguments"]


def _options_removed(pending: list[Any]) -> None:
    del pending[0]["arguments"]["options"]


@pytest.mark.parametrize(
    "damage", [_not_an_object, _no_call, _no_arguments, _options_removed]
)
def test_a_damaged_pending_record_is_reported_kept_and_does_not_block_other_threads(
    scripted_server: ScriptedServer, tmp_path: Path, damage: Any
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Green it is.", after_tool="choose"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    healthy = chat.new_thread()
    assert chat.ask(healthy, "Another colour").status == "suspended"
    path = Path(chat.store.location(1))
    before = damage_pending(path, damage)
    unreadable = damage is not _options_removed  # else only the arguments break the schema
    for call in (
        lambda: chat.answer_tool_call(1, "green"),
        lambda: chat.pending_calls(1),
        *((lambda: chat.history(1), lambda: chat.ask(1, "Hello?")) if unreadable else ()),
    ):
        with pytest.raises(StoreCorrupt, match=str(path)):
            call()
    assert path.read_bytes() == before  # left untouched
    assert [c.thread_id for c in chat.pending_calls()] == [healthy]
    assert chat.answer_tool_call(healthy, "green").status == "complete"


def test_a_new_question_says_which_waiting_call_it_closed(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Fine.", when="never mind"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    [waiting] = chat.pending_calls(1)
    events = list(chat.iter_ask(1, "never mind"))
    assert events[0] == ToolCallAbandoned(waiting)
    assert isinstance(events[-1], TurnFinished) and events[-1].text == "Fine."
    with pytest.raises(NoPendingCall):
        chat.answer_tool_call(1, "red")


def test_records_read_back_are_typed() -> None:
    call = PendingCall(2, 0, "c", "choose", {"question": "Q?", "options": ["a"]},
                       Prompt("choice", "Q?", ("a",)))
    assert PendingCall.from_dict(2, 0, call.to_dict()) == call
    assert call.question == "Q? (one of: a)"
    assert Prompt.from_dict({"kind": "text", "question": "x", "hint": 1}).extra == {"hint": 1}


def test_show_and_export_tell_what_the_person_answered(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    from nbchat.jupyter.cell._views import thread_markdown, thread_notebook

    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Green it is.", after_tool="choose"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    chat.answer_tool_call(1, "2")  # the option's number: the answer is the option
    expected = "Let me ask.\n\n> *Which colour?* → **green**\n\nGreen it is."
    assert expected in thread_markdown(chat.store.get(1))
    assert thread_notebook(chat.store.get(1))["cells"][2]["source"] == expected


def test_a_closed_call_is_sent_back_once_with_its_text(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Fine.", when="never mind"),
    )
    chat = suspended_thread(scripted_server, tmp_path)
    chat.ask(1, "never mind")
    sent = [r for r in scripted_server.chat_requests if r.messages[-1]["content"] == "never mind"]
    assert [m["role"] for m in sent[0].messages] == ["user", "assistant", "tool", "user"]
    assert sent[0].messages[1]["content"] == "Let me ask."
    assert sent[0].messages[2]["content"] == "The person did not answer this question."
