"""The chat engine against the scripted server over loopback: threads, turns, tools, faults."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import nbchat
from nbchat import Chat, ChatHistory, ClientTool, Requirement
from nbchat.base.errors import (
    InputError,
    InvalidToolAnswer,
    NoPendingCall,
    ServerError,
    ThreadNotFound,
    ToolRequirementsNotMet,
)
from nbchat.base.events import (
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallPending,
    ToolCallRequested,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    UsageReported,
)
from nbchat.base.records import PendingCall, Prompt
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.testing import Reply, ScriptedServer

CHOOSE = ("choose", {"question": "Which colour?", "options": ["red", "green"]})


@pytest.fixture
def chat(scripted_server, tmp_path) -> Chat:
    return Chat(base_url=scripted_server.url, store=tmp_path / "store", model="scripted-small")


def without_usage(events):
    return [e for e in events if not isinstance(e, UsageReported)]


def test_ask_streams_saves_and_titles_a_new_thread(chat, scripted_server):
    scripted_server.script(Reply(when="2+2", chunks=["Fo", "ur."]))
    thread = chat.new_thread()
    events = list(chat.iter_ask(thread, "What is 2+2?"))
    finished = events[-1]
    assert isinstance(finished, TurnFinished)
    assert without_usage(events) == [
        TurnStarted(thread, 0, "scripted-small"),
        TextDelta("Fo"),
        TextDelta("ur."),
        TurnFinished(
            thread, 0, "Four.", "complete", "scripted-small", finished.usage, finished.elapsed,
            finish_reason="stop",
        ),
    ]
    assert chat.thread_details(thread) == [("What is 2+2?", "Four.")]
    assert chat.thread_list() == [(thread, "Question About 2+2")]
    info = chat.threads()[0]
    assert (info.id, info.model, info.turns) == (thread, "scripted-small", 1)
    title_request = scripted_server.chat_requests[-1]
    assert "conversation title" in title_request.messages[-1]["content"]


def test_listing_from_another_chat_waits_for_a_title_under_way(
    chat, scripted_server, tmp_path
):
    scripted_server.script(
        Reply(when="conversation title", chunks=["Adding ", "Two Numbers"], delay=0.2)
    )
    thread = chat.new_thread()
    chat.ask(thread, "What is 2+2?")  # returns with the title still streaming
    elsewhere = Chat(base_url=scripted_server.url, store=tmp_path / "other", model="m")
    assert elsewhere.wait_for_titles(0)  # another store has no title under way
    other = Chat(base_url=scripted_server.url, store=tmp_path / "store", model="scripted-small")
    assert other.thread_list() == [(thread, "Adding Two Numbers")]


def test_follow_up_sends_earlier_turns_as_role_messages(chat, scripted_server):
    thread = chat.new_thread(system="Be brief.")
    chat.ask(thread, "What is 2+2?")
    chat.wait_for_titles(10)  # the title request runs beside the next question
    chat.ask(thread, "And 3*3?")
    assert scripted_server.chat_requests[-1].messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2 + 2 = 4."},
        {"role": "user", "content": "And 3*3?"},
    ]
    assert len(chat.thread_details(thread)) == 2


def test_chat_query_streams_with_context_and_saves_nothing(chat, scripted_server):
    thread = chat.new_thread()
    chat.append_response(thread, "Remember 7", "Noted: 7.", title="Numbers")
    chunks = list(chat.chat_query(thread, "What is 7*6?"))
    assert all(type(chunk) is str for chunk in chunks) and len(chunks) > 1
    assert "".join(chunks) == "7 * 6 = 42."  # the chunks combined are the answer, once
    assert scripted_server.chat_requests[-1].messages[:2] == [
        {"role": "user", "content": "Remember 7"},
        {"role": "assistant", "content": "Noted: 7."},
    ]
    assert chat.thread_details(thread) == [("Remember 7", "Noted: 7.")]
    assert chat.thread_list() == [(thread, "Numbers")]


def test_get_thread_title_cleans_the_models_reply(chat, scripted_server):
    thread = chat.new_thread()
    chat.append_response(thread, "How do I sort a dict by value?", "Use sorted(...).")
    scripted_server.script(Reply('"Sorting Dicts By Value."', when="conversation title"))
    assert chat.get_thread_title(thread) == "Sorting Dicts By Value"


def test_get_thread_title_falls_back_to_the_first_words(chat, scripted_server):
    thread = chat.new_thread()
    chat.append_response(thread, "How do I sort a dict by value?", "Use sorted(...).")
    scripted_server.script(Reply(status=400))
    assert chat.get_thread_title(thread) == "Sort a dict by value"


def test_thread_operations_and_errors(chat):
    first, second = chat.new_thread(), chat.new_thread("scripted-large")
    chat.update_thread_title(first, "Plans")
    chat.delete_thread(second)
    assert chat.thread_list() == [(first, "Plans")]
    assert chat.new_thread() == second + 1  # ids are never reused
    with pytest.raises(ThreadNotFound, match="invalid thread id 99"):
        chat.ask(99, "hello")
    with pytest.raises(InputError, match="empty"):
        chat.ask(first, "   ")
    assert chat.list_models() == ["nbchat-demo", "scripted-large", "scripted-small"]


def test_another_users_threads_are_not_found(scripted_server, tmp_path):
    ana = Chat(base_url=scripted_server.url, store=tmp_path, user="ana", model="scripted-small")
    bob = Chat(base_url=scripted_server.url, store=tmp_path, user="bob", model="scripted-small")
    thread = ana.new_thread()
    ana.ask(thread, "my secret plan")
    with pytest.raises(ThreadNotFound):
        bob.ask(thread, "show me")
    assert bob.thread_list() == []
    assert all("secret" not in json.dumps(r.messages) for r in scripted_server.chat_requests[2:])


def test_history_and_ask_with_history_leave_the_thread_alone(chat, scripted_server):
    thread = chat.new_thread(system="Be brief.")
    chat.ask(thread, "What is 2+2?")
    chat.wait_for_titles(10)  # the title request runs beside what follows
    history = chat.history(thread)
    assert history.system == "Be brief." and len(history) == 2
    swapped = ChatHistory(
        [
            {"role": "user", "content": "I like cats"},
            {"role": "assistant", "content": "Cats are great."},
        ]
    )
    answer = chat.ask_with_history("What is 5+5?", swapped)
    assert answer.text == "5 + 5 = 10." and answer.thread_id is None
    assert scripted_server.chat_requests[-1].messages == [
        {"role": "user", "content": "I like cats"},
        {"role": "assistant", "content": "Cats are great."},
        {"role": "user", "content": "What is 5+5?"},
    ]
    assert len(swapped) == 2
    assert chat.thread_details(thread) == [("What is 2+2?", "2 + 2 = 4.")]
    chat.ask_with_history("What is 1+1?", swapped, update=True)
    assert [m.content for m in swapped][-2:] == ["What is 1+1?", "1 + 1 = 2."]


def test_llm_helper_keeps_its_main_history(scripted_server):
    llm = nbchat.LLM("scripted-small", base_url=scripted_server.url, system="Be kind.")
    assert llm.ask("What is 2+2?") == "2 + 2 = 4."
    other = ChatHistory()
    assert llm.ask_with_history("What is 3+3?", other) == "3 + 3 = 6."
    assert [m.content for m in llm.history] == ["What is 2+2?", "2 + 2 = 4."]
    assert len(other) == 0
    llm.ask("What is 4+4?")
    assert scripted_server.chat_requests[-1].messages[:3] == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "2 + 2 = 4."},
    ]


def test_cleanup_policy_applies_before_each_request(scripted_server, tmp_path):
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    thread = chat.new_thread()
    chat.store.update_thread(thread, settings={"history_limit": 2, "strategy": "window"})
    for n in range(3):
        chat.ask(thread, f"What is {n}+1?")
        chat.wait_for_titles(10)
    sent = scripted_server.chat_requests[-1].messages
    assert [m["content"] for m in sent] == ["What is 1+1?", "1 + 1 = 2.", "What is 2+1?"]


def test_kernel_tools_run_over_several_rounds(scripted_server, tmp_path):
    @nbchat.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @nbchat.tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    scripted_server.script(
        Reply("Adding.", when="sum", tool_calls=[("add", {"a": 2, "b": 3})]),
        Reply(tool_calls=[("explode", {}), ("add", {"a": "x"})], after_tool="add", times=1),
        Reply("It is 5.", after_tool="add"),
    )
    chat = Chat(
        base_url=scripted_server.url, store=tmp_path, tools=[add, explode], model="scripted-small"
    )
    thread = chat.new_thread()
    events = without_usage(chat.iter_ask(thread, "sum 2 and 3"))
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.call.name, r.output, r.is_error) for r in results][0] == ("add", "5", False)
    assert results[1].output == "error: RuntimeError: boom" and results[1].is_error
    assert results[2].is_error and "'a' must be an integer" in results[2].output
    assert events[-1].text == "Adding.\n\nIt is 5."
    chat.wait_for_titles(10)
    tool_messages = [m for m in scripted_server.chat_requests[-2].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages][:1] == ["5"]
    assert len(tool_messages) == 3


def test_tool_rounds_are_bounded(scripted_server, tmp_path):
    @nbchat.tool
    def again() -> str:
        """Ask me again."""
        return "again"

    scripted_server.script(
        Reply(tool_calls=[("again", {})], when=lambda b: "tools" in b), Reply("Stopped.")
    )
    chat = Chat(
        base_url=scripted_server.url,
        store=tmp_path,
        tools=[again],
        model="scripted-small",
        max_tool_rounds=3,
    )
    answer = chat.ask(chat.new_thread(), "loop")
    assert answer.text == "Stopped."
    assert "tools" not in scripted_server.chat_requests[3].body
    assert len([r for r in scripted_server.chat_requests if "tools" in r.body]) == 3


def test_client_tool_suspends_then_resumes_with_the_checked_answer(chat, scripted_server):
    scripted_server.script(
        Reply("Let me ask.", when="colour", tool_calls=[CHOOSE]),
        Reply("Green it is.", after_tool="choose"),
    )
    thread = chat.new_thread()
    events = without_usage(chat.iter_ask(thread, "Pick a colour"))
    call = ToolCall("call_1", "choose", json.dumps(CHOOSE[1], separators=(",", ":")))
    assert events[-3:-1] == [
        ToolCallRequested(call),
        ToolCallPending(
            PendingCall(
                thread, 0, "call_1", "choose", CHOOSE[1],
                Prompt("choice", "Which colour?", ("red", "green")),
            )
        ),
    ]
    assert events[-1].status == "suspended"
    [pending] = chat.pending_calls(thread)
    assert (pending.call_id, pending.tool) == ("call_1", "choose")
    with pytest.raises(InvalidToolAnswer, match="'purple' is not one of the options"):
        chat.answer_tool_call(thread, "purple")
    assert chat.pending_calls(thread) == [pending]
    answer = chat.answer_tool_call(thread, "green")
    assert (answer.text, answer.status) == ("Let me ask.\n\nGreen it is.", "complete")
    assert chat.pending_calls(thread) == []
    chat.wait_for_titles(10)
    sent = scripted_server.chat_requests[-2].messages
    assert sent[-1]["role"] == "tool" and "<answer>\ngreen\n</answer>" in sent[-1]["content"]
    assert chat.thread_details(thread) == [("Pick a colour", "Let me ask.\n\nGreen it is.")]
    with pytest.raises(NoPendingCall):
        chat.answer_tool_call(thread, "red")


def test_parallel_client_calls_resume_when_all_are_answered(chat, scripted_server):
    scripted_server.script(
        Reply(when="plan", tool_calls=[CHOOSE, ("confirm", {"question": "Go?"})]),
        Reply("Both answered.", after_tool="choose"),
    )
    thread = chat.new_thread()
    assert chat.ask(thread, "plan it").status == "suspended"
    assert [c.tool for c in chat.pending_calls(thread)] == ["choose", "confirm"]
    with pytest.raises(NoPendingCall, match="say which one"):
        chat.answer_tool_call(thread, "red")
    partial = chat.answer_tool_call(thread, "yes", call_id="call_2")
    assert partial.status == "suspended" and len(scripted_server.chat_requests) == 1
    done = chat.answer_tool_call(thread, "red", call_id="call_1")
    assert done.text == "Both answered."
    tools = [
        m["tool_call_id"] for m in scripted_server.chat_requests[1].messages if m["role"] == "tool"
    ]
    assert tools == ["call_2", "call_1"]


def test_a_pending_call_survives_a_new_process(chat, scripted_server, tmp_path):
    scripted_server.script(
        Reply(when="colour", tool_calls=[CHOOSE]), Reply("Red, then.", after_tool="choose")
    )
    thread = chat.new_thread()
    chat.ask(thread, "Pick a colour")
    script = textwrap.dedent(f"""
        import nbchat
        chat = nbchat.Chat(base_url={scripted_server.url!r}, store={str(tmp_path / "store")!r})
        print(chat.answer_tool_call({thread}, "1").text)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Red, then.\n"
    assert chat.thread_details(thread) == [("Pick a colour", "Red, then.")]


class Delete(ClientTool):
    name = "delete_file"
    description = "Ask the person to confirm deleting a file."
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }

    def call_requirements(self, arguments):
        return [Requirement("files.delete", target=arguments["path"])]


def test_requirements_are_checked_again_when_the_answer_arrives(scripted_server, tmp_path):
    scripted_server.script(Reply(when="clean", tool_calls=[("delete_file", {"path": "a.txt"})]))
    allowed = Chat(
        base_url=scripted_server.url,
        store=tmp_path,
        tools=[Delete()],
        permissions={"files.delete"},
        model="scripted-small",
    )
    thread = allowed.new_thread()
    assert allowed.ask(thread, "clean up").status == "suspended"
    revoked = Chat(
        base_url=scripted_server.url, store=tmp_path, tools=[Delete()], model="scripted-small"
    )
    with pytest.raises(ToolRequirementsNotMet, match="files.delete"):
        revoked.answer_tool_call(thread, "yes")
    assert len(revoked.pending_calls(thread)) == 1


def test_requirements_not_met_before_suspending_are_told_to_the_model(scripted_server, tmp_path):
    scripted_server.script(
        Reply(when="clean", tool_calls=[("delete_file", {"path": "a.txt"})]),
        Reply("I may not.", after_tool="delete_file"),
    )
    chat = Chat(
        base_url=scripted_server.url, store=tmp_path, tools=[Delete()], model="scripted-small"
    )
    answer = chat.ask(chat.new_thread(), "clean up")
    assert answer.text == "I may not."
    tool_message = scripted_server.chat_requests[1].messages[-1]
    assert tool_message["role"] == "tool" and "files.delete" in tool_message["content"]


def test_invalid_client_tool_arguments_go_back_to_the_model(chat, scripted_server):
    scripted_server.script(
        Reply(when="colour", tool_calls=[("choose", '{"question": "Which?"')]),
        Reply("Sorry, let me retry later.", after_tool="choose"),
    )
    answer = chat.ask(chat.new_thread(), "Pick a colour")
    assert answer.status == "complete" and chat.pending_calls() == []
    *_, call, result = scripted_server.chat_requests[1].messages
    # Servers refuse a history with malformed arguments: they go back well-formed,
    # the raw text stays in the error the model reads.
    assert call["tool_calls"][0]["function"]["arguments"] == "{}"
    assert result["content"].startswith("error: the arguments of this choose call were not valid")
    assert """'{"question": "Which?"'""" in result["content"]


def test_schema_violations_in_client_tool_arguments_go_back_to_the_model(chat, scripted_server):
    scripted_server.script(
        Reply(when="colour", tool_calls=[("choose", {"question": "Which?"})]),
        Reply("Sorry, let me retry later.", after_tool="choose"),
    )
    answer = chat.ask(chat.new_thread(), "Pick a colour")
    assert answer.status == "complete" and chat.pending_calls() == []
    told = scripted_server.chat_requests[1].messages[-1]["content"]
    assert told.startswith("error: invalid arguments for tool 'choose'")


def test_a_new_question_while_a_call_waits_tells_the_model_there_was_no_answer(
    chat, scripted_server
):
    scripted_server.script(Reply(when="colour", tool_calls=[CHOOSE]))
    thread = chat.new_thread()
    chat.ask(thread, "Pick a colour")
    chat.ask(thread, "What is 1+1?")
    sent = scripted_server.chat_requests[1].messages
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "name": "choose",
        "content": "The person did not answer this question.",
    }
    assert chat.pending_calls(thread) == []


def test_closing_the_stream_keeps_the_partial_answer_marked_interrupted(chat, scripted_server):
    scripted_server.script(Reply(tokens=400, delay=0.02))
    thread = chat.new_thread()
    stream = chat.iter_ask(thread, "tell me a long story")
    seen = []
    for event in stream:
        if isinstance(event, TextDelta):
            seen.append(event.text)
            if len(seen) == 5:
                break
    stream.close()
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.answer) == ("interrupted", "".join(seen))
    request = scripted_server.chat_requests[0]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=3)
    assert chat.thread_list() == [(thread, "")]


def test_a_failed_request_keeps_the_query_and_can_be_retried(chat, scripted_server):
    scripted_server.script(Reply(tokens=20, cut_after=3, times=1))
    thread = chat.new_thread()
    events = list(chat.iter_ask(thread, "What is 6*7?"))
    failed = events[-1]
    assert isinstance(failed, TurnFailed) and failed.text == "word0 word1 word2 "
    turn = chat.store.get(thread).turns[0]
    assert (turn.query, turn.status) == ("What is 6*7?", "failed")
    assert "incomplete" in turn.error
    answer = chat.retry(thread)
    assert answer.text == "6 * 7 = 42."
    assert chat.thread_details(thread) == [("What is 6*7?", "6 * 7 = 42.")]


def test_ask_raises_the_turns_error_after_saving_the_query(chat, scripted_server):
    scripted_server.script(Reply(status=400, error_message="bad request body"))
    thread = chat.new_thread()
    with pytest.raises(ServerError, match="bad request body"):
        chat.ask(thread, "hello")
    assert [t.status for t in chat.store.get(thread).turns] == ["failed"]
    with pytest.raises(InputError, match="did not fail"):
        chat.append_response(thread, "q", "a") and chat.retry(thread)


def test_the_key_never_reaches_the_store(scripted_server, tmp_path):
    secret = "sk-test-DO-NOT-STORE-9f8e7d"
    chat = Chat(
        base_url=scripted_server.url, store=tmp_path, api_key=secret, model="scripted-small"
    )
    thread = chat.new_thread()
    chat.ask(thread, "What is 2+2?")
    assert scripted_server.chat_requests[0].headers["Authorization"] == f"Bearer {secret}"
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    assert secret not in repr(chat) and secret not in repr(chat.settings)


def test_terminal_front_end_interrupt_keeps_the_partial_answer(scripted_server, tmp_path):
    import os
    import signal
    import time

    scripted_server.script(Reply(tokens=500, delay=0.02))
    env = {
        **os.environ,
        "NBCHAT_BASE_URL": scripted_server.url,
        "NBCHAT_MODEL": "scripted-small",
        "NBCHAT_STORE": str(tmp_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbchat", "ask", "tell me a story"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    scripted_server.wait_for(
        lambda: scripted_server.chat_requests and scripted_server.chat_requests[0].chunks_sent > 5,
        timeout=30,
    )
    interrupted_at = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    request = scripted_server.chat_requests[0]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=5)
    assert time.monotonic() - interrupted_at < 5
    assert proc.returncode == 130, err
    assert "partial answer is kept" in err and "Traceback" not in err
    [turn] = Chat(store=tmp_path).store.get(1).turns
    assert turn.status == "interrupted" and turn.answer.startswith("word0 word1")
    assert out.startswith(turn.answer[:20])


def test_offline_demo_fallback_is_announced_once(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("NBCHAT_")}
    env.update(NBCHAT_STORE=str(tmp_path), NBCHAT_LOCAL_MODEL="off")
    script = textwrap.dedent("""
        import nbchat
        chat = nbchat.Chat()
        thread = chat.new_thread()
        print(chat.ask(thread, "What is 2+2?"))
        print(chat.ask(thread, "What is 3+3?"))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2 + 2 = 4.\n3 + 3 = 6.\n"
    assert done.stderr.count("offline demo model") == 1
    assert "NBCHAT_BASE_URL" in done.stderr


def test_server_requests_are_one_connection_for_a_whole_thread(chat, scripted_server):
    thread = chat.new_thread()
    for q in ("What is 1+1?", "What is 2+2?", "What is 3+3?"):
        chat.ask(thread, q)
        chat.wait_for_titles(10)  # a title request running beside a turn takes a second one
    assert len({r.connection for r in scripted_server.requests}) == 1


def test_a_second_scripted_server_is_independent():
    with ScriptedServer(Reply("one")) as first, ScriptedServer(Reply("two")) as second:
        assert first.url != second.url


class _CountedText(str):
    """A chunk that counts the concatenations it takes part in (each one copies the text)."""

    concatenations = 0

    def __add__(self, other: str) -> str:
        _CountedText.concatenations += 1
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        _CountedText.concatenations += 1
        return str.__add__(other, self)


def test_an_answer_collects_its_chunks_without_copying_the_text_so_far():
    chunks = [_CountedText(f"word{i} ") for i in range(2000)]
    answer = nbchat.Answer.streaming(
        iter([TurnStarted(1, 0, "m"), *map(TextDelta, chunks), *map(ReasoningDelta, chunks)])
    )
    _CountedText.concatenations = 0
    for _ in answer:
        pass
    assert _CountedText.concatenations == 0
    assert answer.text == answer.reasoning == "".join(chunks)
    assert answer == nbchat.Answer(
        "".join(chunks), 1, 0, "interrupted", "m", reasoning="".join(chunks)
    )


@pytest.mark.timeout(15)  # the server stays silent for 30 s: only the stop can end the turn
def test_a_stop_from_another_thread_ends_the_turn_while_the_server_is_silent(
    chat, scripted_server
):
    import threading

    scripted_server.script(Reply(tokens=20, stall_after=3, stall=30))
    thread = chat.new_thread()
    answer = chat.iter_ask(thread, "tell me a story")
    events = []
    for event in answer:
        events.append(event)
        if event == TextDelta("word2 "):  # the server is silent from here on
            threading.Timer(0.2, answer.stop).start()
    seen = [e.text for e in events if isinstance(e, TextDelta)]
    assert seen == ["word0 ", "word1 ", "word2 "]
    assert isinstance(events[-1], TurnFinished) and events[-1].status == "interrupted"
    assert (answer.status, answer.text) == ("interrupted", "word0 word1 word2 ")
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.answer) == ("interrupted", "word0 word1 word2 ")
    request = scripted_server.chat_requests[0]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=5)
    with pytest.raises(nbchat.TurnInterrupted):
        answer.result()


def _title_request(server: ScriptedServer):
    [request] = [r for r in server.chat_requests if "conversation title" in json.dumps(r.body)]
    return request


@pytest.mark.timeout(40)
def test_a_title_reply_that_never_ends_is_cut_at_its_size_bound(chat, scripted_server):
    scripted_server.script(
        Reply("Endless Title Words ", repeat_bytes=50_000_000, repeat_seconds=30,
              when="conversation title"),
        Reply("Use sorted(...).", when="sort a dict"),
    )  # fmt: skip
    thread = chat.new_thread()
    chat.ask(thread, "How do I sort a dict by value?")
    assert chat.wait_for_titles()
    assert chat.thread_list() == [(thread, "Sort a dict by value")]  # from the question
    request = _title_request(scripted_server)
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=10)
    assert request.completed is False


@pytest.mark.timeout(12)  # listing once waited 15 s for a title under way
def test_a_slow_title_reply_neither_holds_up_listing_nor_lasts(chat, scripted_server):
    scripted_server.script(
        Reply("Slow ", delay=0.05, repeat_bytes=10**9, repeat_seconds=60,
              when="conversation title"),
        Reply("Use sorted(...).", when="sort a dict"),
    )  # fmt: skip
    thread = chat.new_thread()
    chat.ask(thread, "How do I sort a dict by value?")
    assert chat.thread_list() == [(thread, "")]
    assert not chat.wait_for_titles(0)  # listing returned with the title still under way
    assert chat.wait_for_titles()
    assert chat.thread_list() == [(thread, "Sort a dict by value")]
    request = _title_request(scripted_server)
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=10)
    assert request.chunks_sent * len("Slow ") < 2000  # cut by time, before the size bound


def stopped_once_asked(chat, server, thread):
    """The answer to "hello", stopped from another thread once the server has the request."""
    import threading

    answer = chat.iter_ask(thread, "hello")

    def stop() -> None:
        server.wait_for(lambda: server.chat_requests, timeout=10)
        answer.stop()

    threading.Thread(target=stop).start()
    return answer


@pytest.mark.timeout(15)  # the server holds its answer for 30 s: only the stop can end the turn
def test_a_stop_ends_the_turn_while_the_server_has_not_answered_yet(chat, scripted_server):
    scripted_server.script(Reply("Too late.", hold=30))
    thread = chat.new_thread()
    answer = stopped_once_asked(chat, scripted_server, thread)
    events = list(answer)
    assert [type(e) for e in events] == [TurnStarted, TurnFinished]
    assert (events[-1].status, answer.status, answer.text) == ("interrupted", "interrupted", "")
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.answer) == ("interrupted", "")


@pytest.mark.timeout(20)
def test_a_stop_during_a_retry_wait_sends_nothing_more(chat, scripted_server):
    import time

    scripted_server.script(Reply(status=503, retry_after=1.5), Reply("Too late."))
    answer = stopped_once_asked(chat, scripted_server, chat.new_thread())
    assert [type(e) for e in answer] == [TurnStarted, TurnFinished]
    assert answer.status == "interrupted"
    time.sleep(3)  # past the Retry-After the sending thread was waiting out
    assert len(scripted_server.chat_requests) == 1  # the request was not sent again


def test_closing_an_answer_being_iterated_ends_the_turn(chat, scripted_server):
    scripted_server.script(Reply("", tokens=50, delay=0.01, when="long"))
    thread = chat.new_thread()
    answer = chat.iter_ask(thread, "a long one")
    events = iter(answer)
    seen = [next(events) for _ in range(4)]  # started, then some words
    answer.close()
    assert isinstance(seen[0], TurnStarted)
    turn = chat.store.get(thread).turns[0]
    assert turn.status == "interrupted"
    assert turn.answer == "".join(e.text for e in seen if isinstance(e, TextDelta))


# -- titles on the answers people get ----------------------------------------------


def is_title_request(body) -> bool:
    return body["messages"][0]["content"] == TITLE_PROMPT


def test_a_first_answer_cut_at_the_token_limit_still_titles_the_thread(chat, scripted_server):
    scripted_server.script(
        Reply("Sorting Dicts By Value", when=is_title_request),
        Reply("Use sorted with a key", finish_reason="length"),
    )
    thread = chat.new_thread()
    assert chat.ask(thread, "How do I sort a dict by value?").status == "incomplete"
    assert chat.thread_list() == [(thread, "Sorting Dicts By Value")]


def test_a_title_stream_the_server_cut_short_is_asked_once_more(chat, scripted_server):
    scripted_server.script(
        Reply("Sorting Dicts", when=is_title_request, times=1, no_finish=True),
        Reply("Sorting Dicts By Value", when=is_title_request),
    )
    thread = chat.new_thread()
    chat.append_response(thread, "How do I sort a dict by value?", "Use sorted(...).")
    assert chat.get_thread_title(thread) == "Sorting Dicts By Value"


def test_a_reply_that_names_nothing_is_not_a_title(chat, scripted_server):
    scripted_server.script(Reply("3 to 5", when=is_title_request))
    thread = chat.new_thread()
    chat.append_response(thread, "What is the capital of Scotland?", "Edinburgh.")
    assert chat.get_thread_title(thread) == "Capital of Scotland"


def test_a_small_model_is_not_asked_for_a_title(tmp_path):
    """Its titles read worse than the question, and they would queue behind its answers."""
    with ScriptedServer(Reply("Edinburgh."), context_size=8192, template_tools=False) as server:
        chat = Chat(base_url=server.url, store=tmp_path / "store", model="scripted-small")
        thread = chat.new_thread()
        chat.ask(thread, "What is the capital of Scotland?")
        assert chat.thread_list() == [(thread, "Capital of Scotland")]
        assert not any(is_title_request(r.body) for r in server.chat_requests)
