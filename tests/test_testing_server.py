"""The scripted server over real loopback HTTP, driven with bare httpx."""

from __future__ import annotations

import ast
import doctest
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import pytest

import nbchat
from nbchat.testing import (
    RecordedRequest,
    Reply,
    ScriptedServer,
    _demo,
    _server,
    demo_server,
    load_script,
    pytest_plugin,
)

MODEL = "nbchat-demo"

# The plugin's fixture under test, usable here even where the entry point is not installed.
scripted_server = pytest_plugin.scripted_server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def openai_body(*messages: dict[str, Any], stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": list(messages), "stream": stream, **extra}


def parse_sse(text: str) -> list[Any]:
    """The data of each SSE event: a dict, or the string "[DONE]"."""
    events = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block.removeprefix("data: ")
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


def openai_stream(client: httpx.Client, server: ScriptedServer, *messages: Any, **extra: Any):
    response = client.post(f"{server.url}/chat/completions", json=openai_body(*messages, **extra))
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def openai_deltas(events: list[Any]) -> list[dict[str, Any]]:
    return [e["choices"][0]["delta"] for e in events if isinstance(e, dict) and e["choices"]]


def streamed_text(client: httpx.Client, server: ScriptedServer, *messages: Any) -> str:
    deltas = openai_deltas(openai_stream(client, server, *messages))
    return "".join(d.get("content") or "" for d in deltas)


def ollama_chat(client: httpx.Client, server: ScriptedServer, *messages: Any, **extra: Any):
    body = {"model": MODEL, "messages": list(messages), **extra}
    return client.post(f"{server.ollama_url}/api/chat", json=body)


def ollama_lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


# -- rules --------------------------------------------------------------------


def test_first_matching_rule_answers_each_form_of_when(scripted_server, client):
    scripted_server.script(
        Reply("by substring", when="WEATHER"),
        Reply("by regex", when=re.compile(r"\bcode \d+")),
        Reply("by callable", when=lambda body: body.get("temperature") == 0.5),
        Reply("fallback"),
    )
    asked = [
        streamed_text(client, scripted_server, user("How is the weather?")),
        streamed_text(client, scripted_server, user("error code 42 again")),
        streamed_text(client, scripted_server, user("code x, weather")),
        streamed_text(client, scripted_server, user("anything")),
    ]
    response = client.post(
        f"{scripted_server.url}/chat/completions",
        json=openai_body(user("hot?"), stream=False, temperature=0.5),
    )
    asked.append(response.json()["choices"][0]["message"]["content"])
    assert asked == ["by substring", "by regex", "by substring", "fallback", "by callable"]


def test_when_looks_at_the_last_message_whatever_its_role(scripted_server, client):
    scripted_server.script(Reply("saw the tool result", when="sunny"), Reply("other"))
    call = {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    messages = [
        user("sunny or not?"),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_9", "content": "cloudy"},
    ]
    assert streamed_text(client, scripted_server, *messages) == "other"
    messages[-1] = {**messages[-1], "content": "Sunny, 21 C"}
    assert streamed_text(client, scripted_server, *messages) == "saw the tool result"


def test_after_tool_finds_the_tool_name_in_both_protocols(scripted_server, client):
    scripted_server.script(
        Reply("time answer", after_tool="clock"),
        Reply("weather answer", after_tool="weather"),
        Reply("no tool"),
    )
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
    ]
    history = [user("weather and time?"), {"role": "assistant", "tool_calls": calls}]
    by_id = [{"role": "tool", "tool_call_id": "call_2", "content": "12:00"}]
    ollama_named = [{"role": "tool", "tool_name": "weather", "content": "rain"}]
    ollama_in_order = [{"role": "tool", "content": "rain"}, {"role": "tool", "content": "noon"}]
    answers = [
        streamed_text(client, scripted_server, *history, *by_id),
        ollama_chat(client, scripted_server, *history, *ollama_named, stream=False),
        ollama_chat(client, scripted_server, *history, *ollama_in_order, stream=False),
        ollama_chat(client, scripted_server, *history, ollama_in_order[0], stream=False),
        streamed_text(client, scripted_server, user("no tool here")),
    ]
    answers[1:4] = [r.json()["message"]["content"] for r in answers[1:4]]
    assert answers == [
        "time answer",
        "weather answer",
        "time answer",
        "weather answer",
        "no tool",
    ]


def test_times_limits_a_rule_then_the_next_one_answers(scripted_server, client):
    scripted_server.script(Reply(status=500, times=2), Reply("recovered"))
    url = f"{scripted_server.url}/chat/completions"
    responses = [client.post(url, json=openai_body(user("hi"), stream=False)) for _ in range(3)]
    assert [r.status_code for r in responses] == [500, 500, 200]
    assert responses[2].json()["choices"][0]["message"]["content"] == "recovered"


def test_reset_forgets_rules_log_and_ids(scripted_server, client):
    scripted_server.script(Reply("scripted", tool_calls=[("f", {})]))
    first = openai_stream(client, scripted_server, user("2+2"))
    scripted_server.reset()
    assert scripted_server.requests == []
    again = openai_stream(client, scripted_server, user("2+2"))
    assert (first[0]["id"], again[0]["id"]) == ("chatcmpl-scripted-1", "chatcmpl-scripted-1")
    assert "".join(d.get("content") or "" for d in openai_deltas(again)) == "2 + 2 = 4."


def test_script_rejects_what_is_not_a_reply(scripted_server):
    with pytest.raises(TypeError, match="script\\(\\) takes Reply objects, not str"):
        scripted_server.script("hello")


# -- streaming shapes ---------------------------------------------------------


def test_openai_stream_is_the_whole_expected_event_list(scripted_server, client):
    scripted_server.script(Reply("Hello world"))
    events = openai_stream(
        client, scripted_server, user("hi there"), stream_options={"include_usage": True}
    )
    created = {e.pop("created") for e in events[:-1]}
    assert len(created) == 1 and isinstance(created.pop(), int)
    head = {"id": "chatcmpl-scripted-1", "object": "chat.completion.chunk", "model": MODEL}

    def chunk(delta, finish=None):
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice], "usage": None}

    usage = {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    assert events == [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hello "}),
        chunk({"content": "world"}),
        chunk({}, "stop"),
        {**head, "choices": [], "usage": usage},
        "[DONE]",
    ]


def test_usage_chunk_only_when_asked_and_allowed(scripted_server, client):
    scripted_server.script(Reply("a", when="quiet", usage=False), Reply("a"))
    asked = {"stream_options": {"include_usage": True}}
    plain = openai_stream(client, scripted_server, user("hi"))
    quiet = openai_stream(client, scripted_server, user("quiet"), **asked)
    assert [("usage" in e) for e in plain[:-1]] == [False, False, False]
    assert [e["choices"] == [] for e in quiet[:-1]] == [False, False, False]


def test_chunks_chunk_size_and_word_splitting(scripted_server, client):
    scripted_server.script(
        Reply(chunks=["Hel", "lo, ", "wörld"], when="explicit"),
        Reply("abcdefg", chunk_size=3, when="sized"),
        Reply("Two words\n\nthen  more", when="words"),
    )

    def contents(question):
        return [
            d["content"]
            for d in openai_deltas(openai_stream(client, scripted_server, user(question)))[1:-1]
        ]

    assert contents("explicit") == ["Hel", "lo, ", "wörld"]
    assert contents("sized") == ["abc", "def", "g"]
    assert contents("words") == ["Two ", "words\n\n", "then  ", "more"]


def test_tokens_makes_a_long_markdown_answer(scripted_server, client):
    scripted_server.script(Reply(tokens=120))
    deltas = openai_deltas(openai_stream(client, scripted_server, user("long")))[1:-1]
    text = "".join(d["content"] for d in deltas)
    paragraphs = text.split("\n\n")
    assert len(deltas) == 120
    assert [len(p.split(" ")) for p in paragraphs] == [50, 50, 20]
    assert text.split() == [f"word{i}" for i in range(120)]


def test_twenty_thousand_chunks_arrive_in_order(scripted_server, client):
    scripted_server.script(Reply(tokens=20_000))
    deltas = openai_deltas(openai_stream(client, scripted_server, user("x")))[1:-1]
    assert [d["content"].strip() for d in deltas] == [f"word{i}" for i in range(20_000)]
    assert scripted_server.chat_requests[0].chunks_sent == 20_000


def test_tool_call_deltas_then_ids_continue_per_server(scripted_server, client):
    scripted_server.script(
        Reply("Checking.", tool_calls=[("get_weather", {"city": "Paris"}), ("clock", '{"tz": ')])
    )
    events = openai_stream(client, scripted_server, user("weather?"))
    again = openai_stream(client, scripted_server, user("weather?"))

    def start(index, call_id, name):
        function = {"name": name, "arguments": ""}
        return {
            "tool_calls": [
                {"index": index, "id": call_id, "type": "function", "function": function}
            ]
        }

    def args(index, piece):
        return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}

    assert openai_deltas(events) == [
        {"role": "assistant", "content": ""},
        {"content": "Checking."},
        start(0, "call_1", "get_weather"),
        args(0, '{"city":'),
        args(0, '"Paris"}'),
        start(1, "call_2", "clock"),
        args(1, '{"t'),
        args(1, 'z":'),
        args(1, " "),
        {},
    ]
    assert events[-2]["choices"][0]["finish_reason"] == "tool_calls"
    ids = [c["id"] for d in openai_deltas(again) for c in d.get("tool_calls", []) if "id" in c]
    assert ids == ["call_3", "call_4"]


def test_openai_non_stream_is_a_whole_completion(scripted_server, client):
    scripted_server.script(Reply(tool_calls=[("lookup", {"q": "é"})], finish_reason="length"))
    response = client.post(
        f"{scripted_server.url}/chat/completions", json=openai_body(user("a b c"), stream=False)
    )
    body = response.json()
    assert isinstance(body.pop("created"), int)
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"q":"é"}'},
    }
    assert body == {
        "id": "chatcmpl-scripted-1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [call],
                },
                "logprobs": None,
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def test_ollama_stream_lines_and_final_counts(scripted_server, client):
    scripted_server.script(Reply("Hi you", tool_calls=[("f", {"x": 1}), ("g", "not json")]))
    lines = ollama_lines(ollama_chat(client, scripted_server, user("one two three")))
    created = {line.pop("created_at") for line in lines}
    assert len(created) == 1 and created.pop().endswith("Z")

    def line(message, **fields):
        return {"model": MODEL, "message": {"role": "assistant", **message}, **fields}

    calls = [
        {"function": {"name": "f", "arguments": {"x": 1}}},
        {"function": {"name": "g", "arguments": "not json"}},
    ]
    assert lines == [
        line({"content": "Hi "}, done=False),
        line({"content": "you"}, done=False),
        line({"content": "", "tool_calls": calls}, done=False),
        line(
            {"content": ""},
            done=True,
            done_reason="stop",
            total_duration=5_300_000,
            load_duration=1_000_000,
            prompt_eval_count=3,
            prompt_eval_duration=300_000,
            eval_count=4,
            eval_duration=4_000_000,
        ),
    ]


def test_ollama_non_stream_when_stream_false(scripted_server, client):
    scripted_server.script(Reply("Whole answer", usage=False))
    body = ollama_chat(client, scripted_server, user("q"), stream=False).json()
    assert body.pop("created_at").endswith("Z")
    assert body == {
        "model": MODEL,
        "message": {"role": "assistant", "content": "Whole answer"},
        "done": True,
        "done_reason": "stop",
    }


# -- faults -------------------------------------------------------------------


def test_status_fault_with_retry_after_in_both_protocols(scripted_server, client):
    scripted_server.script(Reply(status=429, retry_after=2, times=2), Reply(status=503))
    openai = client.post(f"{scripted_server.url}/chat/completions", json=openai_body(user("q")))
    ollama = ollama_chat(client, scripted_server, user("q"))
    custom = ollama_chat(client, scripted_server, user("q"))
    assert (openai.status_code, openai.headers["retry-after"]) == (429, "2")
    assert openai.json() == {
        "error": {
            "message": "Rate limit reached for requests.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    assert (ollama.status_code, ollama.json()) == (429, {"error": "too many requests"})
    assert (custom.status_code, custom.json()) == (503, {"error": "service unavailable"})


def test_error_message_overrides_the_default(scripted_server, client):
    scripted_server.script(Reply(status=500, error_message="boom"))
    response = client.post(f"{scripted_server.url}/chat/completions", json=openai_body(user("q")))
    assert response.json()["error"] == {
        "message": "boom",
        "type": "server_error",
        "param": None,
        "code": "server_error",
    }


def test_cut_after_drops_the_connection_mid_stream(scripted_server, client):
    scripted_server.script(Reply("one two three four", cut_after=2))
    received = []
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        client.stream(
            "POST", f"{scripted_server.url}/chat/completions", json=openai_body(user("q"))
        ) as response,
    ):
        for line in response.iter_lines():
            received.append(line)
    events = parse_sse("\n".join(received) + "\n")
    assert [d.get("content") for d in openai_deltas(events)] == ["", "one ", "two "]
    [record] = scripted_server.chat_requests
    assert (record.chunks_sent, record.completed, record.disconnected) == (2, False, False)


def test_cut_after_in_a_whole_response(scripted_server, client):
    scripted_server.script(Reply("never whole", cut_after=0))
    with pytest.raises(httpx.RemoteProtocolError):
        ollama_chat(client, scripted_server, user("q"), stream=False)


def test_malformed_after_sends_a_line_that_is_not_json(scripted_server, client):
    scripted_server.script(Reply("a b c", malformed_after=1))
    response = ollama_chat(client, scripted_server, user("q"))
    lines = response.text.splitlines()
    assert json.loads(lines[0])["message"]["content"] == "a "
    assert len(lines) == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[1])
    assert scripted_server.chat_requests[0].completed is True


def test_stall_after_holds_the_stream_until_the_client_gives_up(scripted_server):
    scripted_server.script(Reply("a b c", stall_after=1, stall=30))
    received = []
    url = f"{scripted_server.ollama_url}/api/chat"
    with (
        httpx.Client(timeout=httpx.Timeout(5, read=0.3)) as client,
        pytest.raises(httpx.ReadTimeout),
        client.stream("POST", url, json=openai_body(user("q"))) as response,
    ):
        received.extend(response.iter_lines())
    [record] = scripted_server.chat_requests
    assert [json.loads(line)["message"]["content"] for line in received] == ["a "]
    assert scripted_server.wait_for(lambda: record.disconnected) is True
    assert (record.chunks_sent, record.completed) == (1, False)


def test_repeat_bytes_streams_on_until_its_bound_or_the_client_hangs_up(scripted_server, client):
    scripted_server.script(
        Reply("a b ", repeat_bytes=200_000, times=1),
        Reply("x ", repeat_bytes=10**12, repeat_seconds=60),  # endless, for a test
    )
    url = f"{scripted_server.url}/chat/completions"
    text = client.post(url, json=openai_body(user("q"))).text
    events = parse_sse(text)
    content = "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events if isinstance(e, dict) and e["choices"]
    )  # fmt: skip
    assert len(text) > 200_000 and events[-1] == "[DONE]"
    assert content.startswith("a b a b a b ") and set(content.split()) == {"a", "b"}
    with client.stream("POST", url, json=openai_body(user("q"))) as response:
        for _ in response.iter_bytes():
            break  # hang up
    endless = scripted_server.chat_requests[1]
    assert scripted_server.wait_for(lambda: endless.disconnected, timeout=10)
    assert endless.completed is False


def test_stop_interrupts_a_stall():
    server = ScriptedServer(Reply("a b", stall_after=1, stall=60)).start()
    errors: list[Exception] = []

    def consume():
        try:
            with httpx.Client(timeout=30) as client:
                client.post(f"{server.url}/chat/completions", json=openai_body(user("q")))
        except httpx.HTTPError as exc:
            errors.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    server.wait_for(lambda: server.chat_requests and server.chat_requests[0].chunks_sent == 1)
    server.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert [type(e) for e in errors] == [httpx.RemoteProtocolError]
    assert server.chat_requests[0].disconnected is False


def test_disconnect_is_noticed_within_one_chunk_interval(scripted_server, client):
    scripted_server.script(Reply(tokens=10, delay=3.0))
    url = f"{scripted_server.url}/chat/completions"
    with client.stream("POST", url, json=openai_body(user("q"))) as response:
        lines = response.iter_lines()
        first = [next(lines) for _ in range(4)]  # role chunk, blank, first word, blank
    assert "word0" in first[2]
    [record] = scripted_server.chat_requests
    assert scripted_server.wait_for(lambda: record.disconnected, timeout=2.0) is True
    assert (record.chunks_sent, record.completed) == (1, False)


def test_one_client_connection_serves_several_requests(scripted_server, client):
    client.post(
        f"{scripted_server.url}/chat/completions", json=openai_body(user("a"), stream=False)
    )
    with client.stream(
        "POST", f"{scripted_server.ollama_url}/api/chat", json=openai_body(user("b"))
    ) as r:
        r.read()
    client.get(f"{scripted_server.url}/models")
    records = scripted_server.requests
    assert [r.path for r in records] == ["/v1/chat/completions", "/api/chat", "/v1/models"]
    assert len({r.connection for r in records}) == 1
    assert all(r.completed and not r.disconnected for r in records)


# -- protocol edges -------------------------------------------------------------


def test_api_key_is_enforced_on_every_request(client):
    with ScriptedServer(api_key="sk-test") as server:
        missing = client.get(f"{server.url}/models")
        wrong = client.post(
            f"{server.ollama_url}/api/chat",
            json=openai_body(user("q")),
            headers={"Authorization": "Bearer nope"},
        )
        right = client.get(f"{server.url}/models", headers={"Authorization": "Bearer sk-test"})
        assert "sk-test" not in repr(server)
    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert missing.json() == {
        "error": {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    assert wrong.json() == {"error": "unauthorized"}


def test_unknown_model_bad_json_and_unknown_path(scripted_server, client):
    openai = client.post(
        f"{scripted_server.url}/chat/completions", json={**openai_body(user("q")), "model": "gpt-x"}
    )
    ollama = client.post(
        f"{scripted_server.ollama_url}/api/chat", json={**openai_body(user("q")), "model": "llama9"}
    )
    tagged = ollama_chat(
        client, scripted_server, user("q"), stream=False, model="nbchat-demo:latest"
    )
    bad = client.post(f"{scripted_server.url}/chat/completions", content=b"{nope")
    nowhere = client.get(f"{scripted_server.url}/nowhere")
    assert (openai.status_code, openai.json()) == (
        404,
        {
            "error": {
                "message": "The model `gpt-x` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
    )
    assert (ollama.status_code, ollama.json()) == (
        404,
        {"error": 'model "llama9" not found, try pulling it first'},
    )
    assert tagged.status_code == 200
    assert (bad.status_code, bad.json()["error"]["type"]) == (400, "invalid_request_error")
    assert nowhere.status_code == 404
    assert scripted_server.requests[3].body is None


def test_model_lists_and_version(client):
    with ScriptedServer(models=("small", "big:7b")) as server:
        openai = client.get(f"{server.url}/models").json()
        one = client.get(f"{server.url}/models/small").json()
        tags = client.get(f"{server.ollama_url}/api/tags").json()
        version = client.get(f"{server.ollama_url}/api/version").json()
        root = client.get(server.ollama_url)
    entry = {"object": "model", "created": 1_700_000_000, "owned_by": "nbchat-testing"}
    assert openai == {
        "object": "list",
        "data": [{"id": "small", **entry}, {"id": "big:7b", **entry}],
    }
    assert one == {"id": "small", **entry}
    assert [(m["name"], m["model"]) for m in tags["models"]] == [
        ("small:latest", "small:latest"),
        ("big:7b", "big:7b"),
    ]
    assert version == {"version": "0.12.6"}
    assert (root.status_code, root.text) == (200, "Ollama is running")


def test_recorded_request_fields(scripted_server, client):
    client.post(
        f"{scripted_server.ollama_url}/api/chat?x=1",
        json={"model": MODEL, "messages": [user("hello")], "stream": False},
        headers={"X-Probe": "yes"},
    )
    [record] = scripted_server.chat_requests
    assert isinstance(record, RecordedRequest)
    assert record.connection[0] == "127.0.0.1"
    assert (record.method, record.path, record.protocol, record.model) == (
        "POST",
        "/api/chat?x=1",
        "ollama",
        MODEL,
    )
    assert (record.messages, record.headers["X-Probe"], record.status) == (
        [user("hello")],
        "yes",
        200,
    )


def test_a_failing_when_callable_is_a_500_naming_the_error(scripted_server, client):
    scripted_server.script(Reply("never", when=lambda body: 1 / 0))
    response = ollama_chat(client, scripted_server, user("q"), stream=False)
    assert (response.status_code, response.json()) == (
        500,
        {"error": "scripted server failed: ZeroDivisionError('division by zero')"},
    )


def test_the_server_uses_only_the_standard_library_and_itself():
    package = Path(_server.__file__).parent
    imported = set()
    # mcp_server.py and acp_agent.py are programs of their own, built on the SDKs they test.
    for path in set(package.glob("*.py")) - {package / "mcp_server.py", package / "acp_agent.py"}:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                assert node.level in (0, 1), f"{path.name} imports from outside nbchat.testing"
                if node.level == 0:
                    imported.add(node.module.split(".")[0])
    assert imported - sys.stdlib_module_names == {"pytest"}  # pytest_plugin.py only


def test_wait_for_raises_timeout_error(scripted_server):
    with pytest.raises(TimeoutError, match="condition not met within 0.05 s"):
        scripted_server.wait_for(lambda: scripted_server.requests, timeout=0.05)


# -- default answers ------------------------------------------------------------


def test_default_answers_arithmetic_title_and_echo(scripted_server, client):
    title_request = [
        {"role": "system", "content": "Write a short conversation title."},
        user("How do I reverse a list in Python?"),
    ]
    answers = [
        streamed_text(client, scripted_server, user("What is 2+2?")),
        streamed_text(client, scripted_server, user("hm, 12 * 7")),
        streamed_text(client, scripted_server, *title_request),
        streamed_text(client, scripted_server, user("Why is the sky blue?")),
        ollama_chat(client, scripted_server, user("(3 + 4) * 2"), stream=False).json()["message"][
            "content"
        ],
    ]
    assert answers == [
        "2 + 2 = 4.",
        "12 * 7 = 84.",
        "Reverse List Python",
        'You asked: "Why is the sky blue?". I am **nbchat\'s offline demo model**: I can do '
        "simple arithmetic and suggest titles, and otherwise echo your question; connect a real "
        "model for real answers.",
        "(3 + 4) * 2 = 14.",
    ]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("1/3", "1 / 3 = 0.3333333333."),
        ("0.1 + 0.2", "0.1 + 0.2 = 0.3."),
        ("-3 + 5", "-3 + 5 = 2."),
        ("2^10", "2 ^ 10 = 1024."),
        ("5 / 0", "5 / 0 has no value: division by zero is undefined."),
        ("on 2024-01-05", None),
        ("Python 3.12", None),
        ("2 ** 200", None),
        ("(1 + 2", None),
    ],
)
def test_arithmetic_parser(text, answer):
    assert _demo.arithmetic_answer(text) == answer


@pytest.mark.parametrize(
    ("question", "title"),
    [
        ("What is the capital of France?", "Question About Capital France"),
        (
            "Explain decorators, generators and context managers in Python",
            "Decorators Generators Context Managers Python",
        ),
        ("what is it?", "A Quick Friendly Chat"),
    ],
)
def test_titles_have_three_to_five_title_case_words(question, title):
    assert _demo.title_for(question) == title


def test_docstring_examples_run():
    for module in (_demo, _server):
        assert doctest.testmod(module).failed == 0


# -- script files, CLI, fixture, demo singleton ------------------------------------


def test_reply_json_round_trip():
    reply = Reply(
        "text",
        when=re.compile("a+b", re.IGNORECASE),
        after_tool="t",
        times=2,
        tool_calls=[("f", {"a": [1]}), ("g", "{raw")],
        chunk_size=2,
        delay=0.5,
        status=429,
        retry_after=1.5,
        error_message="slow down",
        cut_after=1,
        malformed_after=2,
        stall_after=3,
        stall=4.0,
        hold=0.5,
        repeat_bytes=5,
        repeat_seconds=6.0,
        usage=False,
        finish_reason="length",
    )
    data = json.loads(json.dumps(reply.to_dict()))
    assert data["when"] == {"regex": "a+b", "flags": re.IGNORECASE.value}
    assert Reply.from_dict(data) == reply
    assert Reply.from_dict(Reply(chunks=["a"]).to_dict()).to_dict() == {"chunks": ["a"]}
    assert Reply().to_dict() == {}


def test_reply_refuses_what_it_cannot_be():
    with pytest.raises(TypeError, match="callable cannot be written as JSON"):
        Reply(when=lambda body: True).to_dict()
    with pytest.raises(ValueError, match="unknown Reply field\\(s\\) \\['colour'\\]"):
        Reply.from_dict({"colour": "red"})
    with pytest.raises(ValueError, match="one of text, chunks or tokens"):
        Reply("text", tokens=3)
    with pytest.raises(ValueError, match="status must be an HTTP error status"):
        Reply(status=200)
    with pytest.raises(TypeError, match="a tool call is a \\(name, arguments\\) pair"):
        Reply(tool_calls=["f"])


def test_load_script_reads_both_file_forms(tmp_path):
    replies = [Reply("a", when="x"), Reply(status=500, times=1)]
    as_list = tmp_path / "list.json"
    as_object = tmp_path / "object.json"
    wrong = tmp_path / "wrong.json"
    as_list.write_text(json.dumps([r.to_dict() for r in replies]))
    as_object.write_text(json.dumps({"replies": [r.to_dict() for r in replies]}))
    wrong.write_text(json.dumps({"rules": []}))
    assert load_script(as_list) == load_script(as_object) == replies
    with pytest.raises(ValueError, match="wrong.json: a script is a JSON list of replies"):
        load_script(wrong)


def test_command_line_serves_a_script_until_terminated(tmp_path, client):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([Reply("from the file", when="file").to_dict()]))
    src = str(Path(nbchat.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "nbchat.testing", "--script", str(script), "--api-key", "k"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        try:
            openai_url = process.stdout.readline().strip()
            ollama_url = process.stdout.readline().strip()
            response = client.post(
                f"{ollama_url}/api/chat",
                json=openai_body(user("from a file?"), stream=False),
                headers={"Authorization": "Bearer k"},
            )
        finally:
            process.terminate()
        assert process.wait(timeout=10) == 0
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", openai_url)
    assert openai_url == f"{ollama_url}/v1"
    assert response.json()["message"]["content"] == "from the file"


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig):
    [entry] = [e for e in entry_points(group="pytest11") if e.name == "nbchat"]
    assert entry.value == "nbchat.testing.pytest_plugin"
    assert pytestconfig.pluginmanager.get_plugin("nbchat") is pytest_plugin


def test_the_fixture_yields_a_running_server(scripted_server, client):
    assert scripted_server.is_running
    assert client.get(f"{scripted_server.url}/models").status_code == 200


def test_stop_closes_idle_keep_alive_connections(client):
    server = ScriptedServer().start()
    url = f"{server.url}/models"
    client.get(url)
    server.stop()
    assert not server.is_running
    with pytest.raises(httpx.TransportError):
        client.get(url)


def test_demo_server_is_one_running_singleton(client):
    server = demo_server()
    assert demo_server() is server
    response = client.post(
        f"{server.url}/chat/completions", json=openai_body(user("3*3"), stream=False)
    )
    assert response.json()["choices"][0]["message"]["content"] == "3 * 3 = 9."
