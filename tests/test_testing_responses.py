"""The scripted server's Responses API through the official `openai` client.

If OpenAI's own SDK accepts the server's response objects, named events,
function calls and usage, the coding agents that speak this wire (Codex) are
tested against something true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from nbchat.testing import Reply, ScriptedServer, pytest_plugin

MODEL = "nbchat-demo"
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TEXT_EVENTS = [
    "response.output_item.added", "response.content_part.added",
    "response.output_text.delta", "response.output_text.delta",
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
]  # fmt: skip

scripted_server = pytest_plugin.scripted_server


@pytest.fixture
def client(scripted_server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=scripted_server.url, api_key="sk-test", max_retries=0) as sdk:
        yield sdk


def test_a_whole_text_response(scripted_server, client):
    scripted_server.script(Reply("Hello, wörld!"))
    response = client.responses.create(model=MODEL, input="hi", instructions="Be brief.")
    assert response.output_text == "Hello, wörld!"
    assert (response.status, response.object, response.id) == ("completed", "response",
                                                                "resp_scripted-1")  # fmt: skip
    (message,) = response.output
    assert (message.type, message.role, message.status) == ("message", "assistant", "completed")
    assert [(part.type, part.text) for part in message.content] == [
        ("output_text", "Hello, wörld!")]  # fmt: skip
    assert response.instructions == "Be brief."
    (request,) = scripted_server.requests
    assert (request.method, request.path, request.protocol) == ("POST", "/v1/responses",
                                                                "responses")  # fmt: skip
    assert request.messages == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]  # fmt: skip


def test_a_streamed_text_response_has_every_event_numbered_in_order(scripted_server, client):
    scripted_server.script(Reply("Hello, wörld!"))
    with client.responses.stream(model=MODEL, input="hi") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", *TEXT_EVENTS, "response.completed"]  # fmt: skip
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.delta for e in events if e.type == "response.output_text.delta"] == [
        "Hello, ", "wörld!"]  # fmt: skip
    created, completed = events[0], events[-1]
    assert (created.response.status, created.response.output) == ("in_progress", [])
    assert completed.response.status == "completed" and completed.response.usage is not None
    assert final.output_text == "Hello, wörld!"
    assert scripted_server.requests[0].body["stream"] is True


def test_the_wire_names_each_event_and_repeats_it_in_the_data(scripted_server):
    scripted_server.script(Reply("One"))
    with openai.OpenAI(base_url=scripted_server.url, api_key="k", max_retries=0) as sdk:
        raw = sdk.responses.with_raw_response.create(model=MODEL, input="hi", stream=True)
        text = raw.http_response.read().decode()
    assert raw.http_response.headers["content-type"].startswith("text/event-stream")
    blocks = [b.split("\n") for b in text.strip().split("\n\n")]
    names = [lines[0].removeprefix("event: ") for lines in blocks]
    assert all(f'"type":"{name}"' in lines[1] for name, lines in zip(names, blocks, strict=True))
    assert "[DONE]" not in text  # the Responses API ends with response.completed alone


@pytest.mark.parametrize("stream", [False, True])
def test_a_function_call_and_its_output_going_back(scripted_server, client, stream):
    scripted_server.script(
        Reply(tool_calls=[("get_weather", {"city": "Zürich"})], when="weather"),
        Reply("Sunny in Zürich.", after_tool="get_weather"),
    )
    asked: list[Any] = [{"role": "user", "content": "weather in Zürich?"}]
    if stream:
        with client.responses.stream(model=MODEL, input=asked, tools=[WEATHER_TOOL]) as s:
            events = list(s)
            first = s.get_final_response()
        deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
        assert [e.type for e in events] == [
            "response.created", "response.in_progress", "response.output_item.added",
            *["response.function_call_arguments.delta"] * len(deltas),
            "response.function_call_arguments.done", "response.output_item.done",
            "response.completed",
        ]  # fmt: skip
        assert len(deltas) > 1 and "".join(deltas) == '{"city":"Zürich"}'
    else:
        first = client.responses.create(model=MODEL, input=asked, tools=[WEATHER_TOOL])
    (call,) = first.output
    assert (call.type, call.name, call.call_id) == ("function_call", "get_weather", "call_1")
    assert call.arguments == '{"city":"Zürich"}'
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    back = [*asked, call.model_dump(exclude_none=True), output]
    second = client.responses.create(model=MODEL, input=back, tools=[WEATHER_TOOL])
    assert second.output_text == "Sunny in Zürich."
    assert scripted_server.requests[-1].messages[-2:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]  # fmt: skip


def test_a_call_into_a_namespace_names_the_namespace(scripted_server, client):
    scripted_server.script(Reply(tool_calls=[("mcp__demo__add", {"a": 2, "b": 3})]))
    space: Any = {
        "type": "namespace",
        "name": "mcp__demo",
        "description": "Demo tools.",
        "tools": [{"type": "function", "name": "add", "parameters": {"type": "object"}}],
    }
    response = client.responses.create(model=MODEL, input="add", tools=[space])
    (call,) = response.output
    assert (call.namespace, call.name) == ("mcp__demo", "add")


def test_when_matches_the_last_user_text_of_the_input_items(scripted_server, client):
    scripted_server.script(Reply("Four.", when="2+2"), Reply("Other."))
    question = [{"type": "input_text", "text": "What is 2+2?"}]
    items: Any = [{"role": "developer", "content": "Be exact."},
                  {"role": "user", "content": question}]  # fmt: skip
    assert client.responses.create(model=MODEL, input=items).output_text == "Four."
    assert client.responses.create(model=MODEL, input="What is 3+3?").output_text == "Other."


def test_usage_counts_input_output_and_cached_tokens(scripted_server, client):
    scripted_server.script(Reply("one two three", cached_tokens=2))
    usage = client.responses.create(model=MODEL, input="four words in here").usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (4, 3, 7)
    assert usage.input_tokens_details.cached_tokens == 2
    assert usage.output_tokens_details.reasoning_tokens == 0


def test_a_length_finish_is_an_incomplete_response(scripted_server, client):
    scripted_server.script(Reply("cut", finish_reason="length"))
    with client.responses.stream(model=MODEL, input="hi", max_output_tokens=16) as stream:
        last = list(stream)[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert last.response.max_output_tokens == 16


def test_an_error_mid_stream_is_a_failed_response(scripted_server, client):
    scripted_server.script(Reply("one two three", error_after=1))
    with client.responses.stream(model=MODEL, input="hi") as stream:
        events = list(stream)
    assert [e.type for e in events][-2:] == ["response.output_text.delta", "response.failed"]
    assert events[-1].response.error is not None
    assert events[-1].response.error.code == "server_error"


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(status=429), openai.RateLimitError),
        (Reply(status=500), openai.InternalServerError),
    ],
)
def test_errors_come_in_openais_shape(scripted_server, client, reply, error):
    scripted_server.script(reply)
    with pytest.raises(error):
        client.responses.create(model=MODEL, input="hi")


def test_an_unknown_model_and_an_unknown_previous_response_are_refused(client):
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.responses.create(model="gpt-nope", input="hi")
    with pytest.raises(openai.BadRequestError, match="Previous response with id 'resp_x'"):
        client.responses.create(model=MODEL, input="hi", previous_response_id="resp_x")
