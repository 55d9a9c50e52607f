"""The scripted server through the official `openai` and `ollama` clients.

If these clients accept its streams, tool calls and errors, the fake speaks
the real wire formats, and nbchat's own clients are tested against something
true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ollama
import openai
import pytest

from nbchat.testing import DEFAULT_MODELS, Reply, ScriptedServer, pytest_plugin

MODEL = "nbchat-demo"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
CALLS = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Zürich", "days": 2})]

scripted_server = pytest_plugin.scripted_server


@pytest.fixture
def openai_client(scripted_server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=scripted_server.url, api_key="sk-test", max_retries=0) as client:
        yield client


@pytest.fixture
def ollama_client(scripted_server: ScriptedServer) -> Iterator[ollama.Client]:
    client = ollama.Client(host=scripted_server.ollama_url)
    try:
        yield client
    finally:
        client.close()


def ask(content: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


# -- openai -------------------------------------------------------------------


def test_openai_stream_of_text_with_usage(scripted_server, openai_client):
    scripted_server.script(Reply("Hello, wörld!"))
    stream = openai_client.chat.completions.create(
        model=MODEL,
        messages=ask("hi"),
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        chunks = list(stream)
    assert [(c.choices[0].delta.content, c.choices[0].finish_reason) for c in chunks[:-1]] == [
        ("", None),
        ("Hello, ", None),
        ("wörld!", None),
        (None, "stop"),
    ]
    assert [c.id for c in chunks] == ["chatcmpl-scripted-1"] * 5
    assert chunks[-1].choices == []
    assert chunks[-1].usage == openai.types.CompletionUsage(
        prompt_tokens=1, completion_tokens=2, total_tokens=3
    )


def test_openai_whole_completion(scripted_server, openai_client):
    scripted_server.script(Reply("Hi there"))
    completion = openai_client.chat.completions.create(model=MODEL, messages=ask("one two"))
    assert completion.model_dump(exclude={"created"}, exclude_none=True) == {
        "id": "chatcmpl-scripted-1",
        "object": "chat.completion",
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hi there"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4},
    }


def test_openai_stream_helper_assembles_parallel_tool_calls(scripted_server, openai_client):
    scripted_server.script(Reply("Let me check.", tool_calls=CALLS))
    with openai_client.chat.completions.stream(
        model=MODEL, messages=ask("weather?"), tools=[WEATHER_TOOL]
    ) as stream:
        done = [e.arguments for e in stream if e.type == "tool_calls.function.arguments.done"]
        completion = stream.get_final_completion()
    choice = completion.choices[0]
    calls = [
        (c.id, c.type, c.function.name, c.function.arguments) for c in choice.message.tool_calls
    ]
    assert calls == [
        ("call_1", "function", "get_weather", '{"city":"Paris"}'),
        ("call_2", "function", "get_weather", '{"city":"Zürich","days":2}'),
    ]
    assert done == ['{"city":"Paris"}', '{"city":"Zürich","days":2}']
    assert (choice.message.content, choice.finish_reason) == ("Let me check.", "tool_calls")


def test_openai_deltas_accumulate_into_tool_calls(scripted_server, openai_client):
    scripted_server.script(Reply(tool_calls=CALLS))
    calls: dict[int, dict[str, str]] = {}
    with openai_client.chat.completions.create(
        model=MODEL, messages=ask("weather?"), tools=[WEATHER_TOOL], stream=True
    ) as stream:
        for chunk in stream:
            for call in chunk.choices[0].delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
    assert calls == {
        0: {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        1: {"id": "call_2", "name": "get_weather", "arguments": '{"city":"Zürich","days":2}'},
    }


def test_openai_tool_loop_reaches_the_follow_up_rule(scripted_server, openai_client):
    scripted_server.script(
        Reply("It is 21 C in Paris.", after_tool="get_weather"),
        Reply(tool_calls=CALLS[:1]),
    )
    messages = ask("weather in Paris?")
    first = openai_client.chat.completions.create(
        model=MODEL, messages=messages, tools=[WEATHER_TOOL]
    )
    call = first.choices[0].message.tool_calls[0]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "21 C"},
    ]
    second = openai_client.chat.completions.create(
        model=MODEL, messages=messages, tools=[WEATHER_TOOL]
    )
    assert (first.choices[0].finish_reason, second.choices[0].message.content) == (
        "tool_calls",
        "It is 21 C in Paris.",
    )
    assert scripted_server.chat_requests[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "21 C",
    }


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("reply", "model", "error", "status", "body"),
    [
        (
            Reply(status=429, retry_after=3),
            MODEL,
            openai.RateLimitError,
            429,
            {
                "message": "Rate limit reached for requests.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            },
        ),
        (
            Reply(status=500),
            MODEL,
            openai.InternalServerError,
            500,
            {
                "message": (
                    "The server had an error while processing your request. Sorry about that!"
                ),
                "type": "server_error",
                "param": None,
                "code": "server_error",
            },
        ),
        (
            Reply("unused"),
            "gpt-nope",
            openai.NotFoundError,
            404,
            {
                "message": "The model `gpt-nope` does not exist or you do not have access to it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            },
        ),
    ],
)
def test_openai_errors_map_to_the_client_exceptions(
    scripted_server, openai_client, reply, model, error, status, body, stream
):
    scripted_server.script(reply)
    with pytest.raises(openai.APIStatusError) as caught:
        openai_client.chat.completions.create(model=model, messages=ask("q"), stream=stream)
    assert (type(caught.value), caught.value.status_code, caught.value.body) == (
        error,
        status,
        body,
    )
    assert caught.value.code == body["code"]
    if status == 429:
        assert caught.value.response.headers["retry-after"] == "3"


def test_openai_wrong_key_is_an_authentication_error():
    with (
        ScriptedServer(api_key="sk-right") as server,
        openai.OpenAI(base_url=server.url, api_key="sk-wrong", max_retries=0) as client,
    ):
        with pytest.raises(openai.AuthenticationError) as caught:
            client.models.list()
        assert [m.id for m in client.with_options(api_key="sk-right").models.list()] == list(
            DEFAULT_MODELS
        )
    assert (caught.value.status_code, caught.value.code) == (401, "invalid_api_key")
    assert caught.value.message == "Error code: 401 - Incorrect API key provided."


def test_openai_models_list(openai_client):
    models = openai_client.models.list()
    assert [m.model_dump(exclude_none=True) for m in models] == [
        {"id": name, "object": "model", "created": 1_700_000_000, "owned_by": "nbchat-testing"}
        for name in DEFAULT_MODELS
    ]
    assert openai_client.models.retrieve("scripted-small").id == "scripted-small"


# -- ollama -------------------------------------------------------------------


def test_ollama_stream_of_text_with_counts(scripted_server, ollama_client):
    scripted_server.script(Reply("Hello, wörld!"))
    parts = list(ollama_client.chat(model=MODEL, messages=ask("one two three"), stream=True))
    assert [(p.message.role, p.message.content, p.done) for p in parts] == [
        ("assistant", "Hello, ", False),
        ("assistant", "wörld!", False),
        ("assistant", "", True),
    ]
    final = parts[-1]
    assert (final.done_reason, final.prompt_eval_count, final.eval_count) == ("stop", 3, 2)
    assert (
        final.total_duration
        == final.load_duration + final.prompt_eval_duration + final.eval_duration
    )


def test_ollama_whole_response(scripted_server, ollama_client):
    scripted_server.script(Reply("Whole answer."))
    response = ollama_client.chat(model=MODEL, messages=ask("q"))
    assert response.message.model_dump(exclude_none=True) == {
        "role": "assistant",
        "content": "Whole answer.",
    }
    assert (response.model, response.done, response.done_reason) == (MODEL, True, "stop")


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_tool_calls_and_the_follow_up(scripted_server, ollama_client, stream):
    scripted_server.script(
        Reply("Paris: 21 C.", after_tool="get_weather"),
        Reply("Checking.", tool_calls=CALLS),
    )
    messages = ask("weather?")
    result = ollama_client.chat(model=MODEL, messages=messages, tools=[WEATHER_TOOL], stream=stream)
    parts = list(result) if stream else [result]
    calls = [c for p in parts for c in p.message.tool_calls or []]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        (name, arguments) for name, arguments in CALLS
    ]
    assert "".join(p.message.content or "" for p in parts) == "Checking."
    messages += [
        {"role": "assistant", "content": "Checking.", "tool_calls": calls},
        {"role": "tool", "content": "21 C", "tool_name": "get_weather"},
    ]
    follow_up = ollama_client.chat(model=MODEL, messages=messages)
    assert follow_up.message.content == "Paris: 21 C."


def test_ollama_list(ollama_client):
    listed = ollama_client.list()
    assert [m.model for m in listed.models] == [f"{name}:latest" for name in DEFAULT_MODELS]
    assert {m.details.family for m in listed.models} == {"scripted"}


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_unknown_model_is_a_response_error(ollama_client, stream):
    with pytest.raises(ollama.ResponseError) as caught:
        result = ollama_client.chat(model="llama9", messages=ask("q"), stream=stream)
        if stream:
            list(result)
    assert (caught.value.status_code, caught.value.error) == (
        404,
        'model "llama9" not found, try pulling it first',
    )


@pytest.mark.parametrize("stream", [False, True])
def test_ollama_scripted_status_is_a_response_error(scripted_server, ollama_client, stream):
    scripted_server.script(Reply(status=500, error_message="model crashed"))
    with pytest.raises(ollama.ResponseError) as caught:
        result = ollama_client.chat(model=MODEL, messages=ask("q"), stream=stream)
        if stream:
            list(result)
    assert (caught.value.status_code, caught.value.error) == (500, "model crashed")
