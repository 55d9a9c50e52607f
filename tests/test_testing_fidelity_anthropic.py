"""The scripted server through the official `anthropic` client.

If Anthropic's own SDK accepts the server's streams, messages, tool use,
thinking, cache usage and errors, nbchat's Anthropic decoder is tested
against something true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from nbchat.testing import DEFAULT_MODELS, Reply, ScriptedServer, pytest_plugin

MODEL = "nbchat-demo"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}

scripted_server = pytest_plugin.scripted_server


@pytest.fixture
def client(scripted_server: ScriptedServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=scripted_server.anthropic_url, api_key="sk-ant-test", max_retries=0
    ) as sdk:
        yield sdk


def ask(content: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


def test_a_streamed_text_answer_accumulates_with_its_usage(scripted_server, client):
    scripted_server.script(Reply("Hello, wörld!"))
    with client.messages.stream(model=MODEL, max_tokens=100, messages=ask("hi")) as stream:
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert texts == ["Hello, ", "wörld!"]
    assert message.content[0].type == "text" and message.content[0].text == "Hello, wörld!"
    assert message.stop_reason == "end_turn"
    assert message.id == "msg_scripted-1"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (1, 2)


def test_the_raw_events_include_a_ping_and_end_with_message_stop(scripted_server, client):
    scripted_server.script(Reply("One two"))
    events = list(client.messages.create(model=MODEL, max_tokens=10, messages=ask("hi"),
                                         stream=True))  # fmt: skip
    assert [e.type for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop",
    ]  # fmt: skip


def test_a_whole_message(scripted_server, client):
    scripted_server.script(Reply("Whole."))
    message = client.messages.create(model=MODEL, max_tokens=10, messages=ask("hi"))
    assert [(b.type, b.text) for b in message.content] == [("text", "Whole.")]
    assert message.stop_reason == "end_turn" and message.role == "assistant"


@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_blocks_and_the_follow_up(scripted_server, client, stream):
    scripted_server.script(
        Reply(tool_calls=[("get_weather", {"city": "Zürich"})], when="weather"),
        Reply("Sunny in Zürich.", after_tool="get_weather"),
    )
    kwargs: dict[str, Any] = dict(model=MODEL, max_tokens=100, tools=[WEATHER_TOOL])
    messages = ask("weather in Zürich?")
    if stream:
        with client.messages.stream(messages=messages, **kwargs) as s:
            first = s.get_final_message()
    else:
        first = client.messages.create(messages=messages, **kwargs)
    assert first.stop_reason == "tool_use"
    (use,) = first.content
    assert (use.type, use.name, use.input) == ("tool_use", "get_weather", {"city": "Zürich"})
    follow_up = [
        *messages,
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
    ]  # fmt: skip
    second = client.messages.create(messages=follow_up, **kwargs)
    assert second.content[0].text == "Sunny in Zürich."


def test_thinking_streams_with_its_signature_and_goes_back_in_the_loop(scripted_server, client):
    scripted_server.script(
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})], reasoning="Ask the tool.",
              when="weather"),
        Reply("Cold.", after_tool="get_weather"),
    )  # fmt: skip
    kwargs: dict[str, Any] = dict(
        model=MODEL, max_tokens=3000, tools=[WEATHER_TOOL],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )  # fmt: skip
    with client.messages.stream(messages=ask("weather in Oslo?"), **kwargs) as s:
        first = s.get_final_message()
    thinking, use = first.content
    assert (thinking.type, thinking.thinking) == ("thinking", "Ask the tool.")
    assert thinking.signature
    result = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use.id, "content": "-5"}]}  # fmt: skip
    kept = {"role": "assistant", "content": [b.model_dump() for b in first.content]}
    second = client.messages.create(messages=[*ask("weather in Oslo?"), kept, result], **kwargs)
    assert second.content[0].text == "Cold."
    dropped = {"role": "assistant", "content": [use.model_dump()]}
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        client.messages.create(messages=[*ask("weather in Oslo?"), dropped, result], **kwargs)


def test_redacted_thinking_is_a_block_of_its_own(scripted_server, client):
    scripted_server.script(Reply("Fine.", redacted_thinking="EmwKAhgBEgy3va3pzix"))
    message = client.messages.create(model=MODEL, max_tokens=10, messages=ask("hi"))
    assert [b.type for b in message.content] == ["redacted_thinking", "text"]
    assert message.content[0].data == "EmwKAhgBEgy3va3pzix"


def test_cache_breakpoints_write_then_read_the_prefix(scripted_server, client):
    system = [{"type": "text", "text": "You are terse. " * 50,
               "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    first = client.messages.create(model=MODEL, max_tokens=10, system=system, messages=ask("a"))
    second = client.messages.create(model=MODEL, max_tokens=10, system=system, messages=ask("b"))
    assert (first.usage.cache_creation_input_tokens, first.usage.cache_read_input_tokens) == (
        150, 0)  # fmt: skip
    assert (second.usage.cache_creation_input_tokens, second.usage.cache_read_input_tokens) == (
        0, 150)  # fmt: skip
    assert second.usage.input_tokens == 1


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (400, anthropic.BadRequestError),
        (401, anthropic.AuthenticationError),
        (404, anthropic.NotFoundError),
        (429, anthropic.RateLimitError),
        (529, anthropic.InternalServerError),
    ],
)
def test_errors_come_in_anthropics_shape(scripted_server, client, status, error):
    scripted_server.script(Reply(status=status))
    with pytest.raises(error) as caught:
        client.messages.create(model=MODEL, max_tokens=10, messages=ask("hi"))
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    if status == 529:
        assert body["error"] == {"type": "overloaded_error", "message": "Overloaded"}


def test_an_error_event_mid_stream_is_raised_by_the_sdk(scripted_server, client):
    scripted_server.script(Reply("one two three", error_after=1))
    stream = client.messages.stream(model=MODEL, max_tokens=10, messages=ask("hi"))
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"), stream as s:
        list(s.text_stream)


def test_a_request_without_max_tokens_is_refused_as_the_api_does(scripted_server):
    sdk = anthropic.Anthropic(base_url=scripted_server.anthropic_url, api_key="k", max_retries=0)
    with sdk, pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        sdk.post("/v1/messages", cast_to=object, body={"model": MODEL, "messages": ask("hi")})


def test_the_models_list(client):
    page = client.models.list()
    assert [m.id for m in page.data] == list(DEFAULT_MODELS)
    assert all(m.type == "model" for m in page.data)


def test_a_wrong_key_is_an_authentication_error():
    with ScriptedServer(api_key="sk-ant-right") as server:
        wrong = anthropic.Anthropic(base_url=server.anthropic_url, api_key="sk-ant-wrong",
                                    max_retries=0)  # fmt: skip
        with wrong, pytest.raises(anthropic.AuthenticationError):
            wrong.messages.create(model=MODEL, max_tokens=10, messages=ask("hi"))
        right = anthropic.Anthropic(base_url=server.anthropic_url, api_key="sk-ant-right",
                                    max_retries=0)  # fmt: skip
        with right:
            assert right.messages.create(model=MODEL, max_tokens=10, messages=ask("hi")).content


def test_a_system_message_is_taken_right_after_a_user_turn_only(scripted_server, client):
    """As Claude Code sends its MCP servers' instructions: a mid-conversation system message."""
    scripted_server.script(Reply("Fine."))
    note = {"role": "system", "content": "Tools follow these rules."}
    message = client.messages.create(model=MODEL, max_tokens=10, messages=[*ask("hi"), note])
    assert message.content[0].text == "Fine."
    assert scripted_server.chat_requests[-1].messages[-1] == note
    with pytest.raises(anthropic.BadRequestError, match="top-level `system` parameter"):
        client.messages.create(model=MODEL, max_tokens=10, messages=[note, *ask("hi")])
    answered = [*ask("hi"), {"role": "assistant", "content": "Hello."}, note]
    with pytest.raises(anthropic.BadRequestError, match="must immediately follow a `user`"):
        client.messages.create(model=MODEL, max_tokens=10, messages=answered)
