"""Anthropic's Messages API: the request nbchat builds, the stream it reads, whole turns on it.

The pure parts (request building, stream decoding at every byte offset)
directly; the client and the engine against the scripted server speaking
Anthropic over loopback, whose request log shows what went over the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nbchat
from nbchat import Chat
from nbchat.base.config import Settings, resolve
from nbchat.base.errors import ServerError, StreamCutOff
from nbchat.base.events import (
    ReasoningBlock,
    ReasoningDelta,
    ReplyFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    Usage,
    UsageReported,
)
from nbchat.engine._usage import parse_prices, turn_usage_line
from nbchat.llm import LLMClient
from nbchat.llm.anthropic import DEFAULT_MAX_TOKENS, AnthropicProvider
from nbchat.testing import Reply, ScriptedServer

EPHEMERAL = {"type": "ephemeral"}
TOOL = {"type": "function", "function": {"name": "add", "description": "Add.",
                                         "parameters": {"type": "object"}}}  # fmt: skip
MESSAGES = [{"role": "user", "content": "hello"}]


def client_for(server: ScriptedServer, **changes: Any) -> LLMClient:
    settings = Settings(base_url=server.anthropic_url, provider="anthropic", model="scripted-small")
    return LLMClient(settings.with_(**changes))


def chat_for(server: ScriptedServer, store: Path, **kwargs: Any) -> Chat:
    return Chat(base_url=server.anthropic_url, provider="anthropic", store=store,
                model="scripted-small", **kwargs)  # fmt: skip


def body(messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return AnthropicProvider().chat_body(messages, "claude", [TOOL], True, options)


# -- the request ----------------------------------------------------------------------


def test_system_tools_results_and_the_required_max_tokens_in_anthropics_shape():
    sent = body([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": "", "tool_calls": [
            ToolCall("c1", "add", '{"a": 2}').to_dict(), ToolCall("c2", "add", "{}").to_dict()]},
        {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "5"},
        {"role": "tool", "tool_call_id": "c2", "name": "add", "content": ""},
    ], prompt_cache=False)  # fmt: skip
    assert sent == {
        "model": "claude",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 2}},
                {"type": "tool_use", "id": "c2", "name": "add", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "5"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "(no output)"}]},
        ],
        "tools": [{"name": "add", "description": "Add.", "input_schema": {"type": "object"}}],
        "stream": True,
        "max_tokens": DEFAULT_MAX_TOKENS,
    }  # fmt: skip


def test_options_are_mapped_and_the_rest_pass_through():
    sent = body(MESSAGES, max_tokens=300, stop="END", tool_choice="required", top_k=5,
                temperature=0.2)  # fmt: skip
    assert (sent["max_tokens"], sent["stop_sequences"]) == (300, ["END"])
    assert (sent["tool_choice"], sent["top_k"], sent["temperature"]) == ({"type": "any"}, 5, 0.2)
    named = body(MESSAGES, tool_choice={"type": "function", "function": {"name": "add"}})
    assert named["tool_choice"] == {"type": "tool", "name": "add"}


def test_a_thinking_budget_is_sent_with_room_for_the_answer_above_it():
    sent = body(MESSAGES, thinking=2048)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent["max_tokens"] == 2048 + DEFAULT_MAX_TOKENS
    assert body(MESSAGES, thinking=2048, max_tokens=5000)["max_tokens"] == 5000


def test_breakpoints_on_the_system_the_tools_the_last_earlier_turn_and_the_newest_result():
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "", "tool_calls": [ToolCall("c1", "add").to_dict()]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]
    sent = body(history)
    marked = [
        (where, block["cache_control"])
        for where, blocks in [("system", sent["system"]), ("tools", sent["tools"])]
        + [(f"message {i}", m["content"]) for i, m in enumerate(sent["messages"])]
        for block in blocks
        if "cache_control" in block
    ]
    assert marked == [("system", EPHEMERAL), ("tools", EPHEMERAL), ("message 1", EPHEMERAL),
                      ("message 4", EPHEMERAL)]  # fmt: skip
    off = body(history, prompt_cache=False)
    assert "cache_control" not in json.dumps(off)


def test_images_travel_as_image_blocks():
    item = {"name": "fig", "kind": "figure", "text": "a plot",
            "image": {"mime": "image/png", "data": "iVBORw0KGgo="}}  # fmt: skip
    parts = [{"type": "text", "text": "see"},
             {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}}]
    sent = body([{"role": "user", "content": parts, "context": [item]}], prompt_cache=False)
    images = [b["source"] for b in sent["messages"][0]["content"] if b["type"] == "image"]
    assert images == [
        {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
        {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    ]


def test_thinking_goes_back_only_within_the_tool_loop_of_the_question():
    block = {"type": "thinking", "thinking": "hm", "signature": "sig"}
    call = ToolCall("c1", "add").to_dict()
    earlier = {"role": "assistant", "content": "", "tool_calls": [call],
               "reasoning_blocks": [block]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c1", "content": "5"}
    now = body([{"role": "user", "content": "q"}, earlier, result], prompt_cache=False)
    assert now["messages"][1]["content"][0] == block
    later = body([{"role": "user", "content": "q"}, earlier, result,
                  {"role": "assistant", "content": "5."}, {"role": "user", "content": "next"}],
                 prompt_cache=False)  # fmt: skip
    assert all(b["type"] != "thinking" for m in later["messages"] for b in m["content"])


# -- the stream -----------------------------------------------------------------------


STREAM = (
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    '"message","role":"assistant","content":[],"model":"claude","stop_reason":null,'
    '"usage":{"input_tokens":3,"cache_creation_input_tokens":40,"cache_read_input_tokens":900,'
    '"output_tokens":1}}}\n\n'
    'event: ping\ndata: {"type": "ping"}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    '"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"thinking_delta","thinking":"Zürich, so…"}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    '"delta":{"type":"signature_delta","signature":"c2ln"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
    '"content_block":{"type":"text","text":""}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
    '"delta":{"type":"text_delta","text":"Grüezi "}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
    'event: content_block_start\ndata: {"type":"content_block_start","index":2,'
    '"content_block":{"type":"tool_use","id":"toolu_1","name":"add","input":{}}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":2,'
    '"delta":{"type":"input_json_delta","partial_json":"{\\"a\\": "}}\n\n'
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":2,'
    '"delta":{"type":"input_json_delta","partial_json":"2}"}}\n\n'
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":2}\n\n'
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use",'
    '"stop_sequence":null},"usage":{"output_tokens":17}}\n\n'
    'event: message_stop\ndata: {"type":"message_stop"}\n\n'
).encode()
EVENTS = [
    ReasoningDelta("Zürich, so…"),
    ReasoningBlock({"type": "thinking", "thinking": "Zürich, so…", "signature": "c2ln"}),
    TextDelta("Grüezi "),
    ToolCallDelta(2, "toolu_1", "add", '{"a": '),
    ToolCallDelta(2, "toolu_1", "add", "2}"),
    ToolCallRequested(ToolCall("toolu_1", "add", '{"a": 2}')),
    UsageReported(Usage(943, 17, cache_read_tokens=900, cache_write_tokens=40)),
    ReplyFinished("tool_calls"),
]


def test_the_stream_decodes_the_same_split_at_every_byte():
    provider = AnthropicProvider()
    assert list(provider.decode_stream([STREAM])) == EVENTS
    for cut in range(1, len(STREAM)):
        assert list(provider.decode_stream([STREAM[:cut], STREAM[cut:]])) == EVENTS, cut


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
     ("tool_use", "tool_calls"), ("refusal", "refusal"), ("pause_turn", "pause_turn")],
)  # fmt: skip
def test_stop_reasons_in_the_engines_words(stop_reason, finish):
    stream = STREAM.replace(b'"stop_reason":"tool_use"', f'"stop_reason":"{stop_reason}"'.encode())
    assert list(AnthropicProvider().decode_stream([stream]))[-1] == ReplyFinished(finish)


def test_a_stream_cut_before_the_stop_reason_is_cut_off():
    with pytest.raises(StreamCutOff):
        list(AnthropicProvider().decode_stream([STREAM[: STREAM.index(b"event: message_delta")]]))


# -- the client -----------------------------------------------------------------------


def test_the_key_goes_as_x_api_key_with_the_version_never_as_a_bearer(scripted_server):
    client = client_for(scripted_server, api_key="sk-ant-secret-123456")
    list(client.stream(MESSAGES, model="scripted-small"))
    headers = {k.lower(): v for k, v in scripted_server.chat_requests[-1].headers.items()}
    assert headers["x-api-key"] == "sk-ant-secret-123456"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


def test_anthropic_api_key_is_the_fallback_and_the_url_is_guessed(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-1234")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-this-one")
    monkeypatch.setenv("NBCHAT_BASE_URL", "https://api.anthropic.com")
    settings = resolve()
    assert (settings.provider, settings.base_url) == ("anthropic", "https://api.anthropic.com/v1")
    assert (settings.api_key, settings.key_source) == ("sk-ant-from-env-1234", "ANTHROPIC_API_KEY")
    monkeypatch.delenv("NBCHAT_BASE_URL")
    monkeypatch.setenv("NBCHAT_PROVIDER", "anthropic")
    assert resolve().base_url == "https://api.anthropic.com/v1"


def test_a_key_the_endpoint_echoes_never_reaches_the_error(scripted_server):
    key = "sk-ant-api03-planted-key-0123456789"
    scripted_server.script(Reply(status=401, error_message=f"invalid x-api-key: {key}"))
    with pytest.raises(nbchat.AuthenticationError) as caught:
        list(client_for(scripted_server, api_key=key).stream(MESSAGES, model="scripted-small"))
    assert key not in str(caught.value) and key not in repr(vars(caught.value))


def test_key_headers_quoted_back_are_redacted_whoever_sent_them():
    from nbchat.llm._http import redact

    assert redact("got x-api-key: sk-other-0123456789 and api-key: 0123456789abcdef") == (
        "got x-api-key: [redacted] and api-key: [redacted]")  # fmt: skip


def test_overloaded_529_is_retried_like_a_rate_limit(scripted_server):
    scripted_server.script(Reply(status=529, times=2), Reply("Back."))
    events = list(client_for(scripted_server, retry_budget=5.0).stream(MESSAGES,
                                                                        model="scripted-small"))
    assert [e for e in events if type(e) is not UsageReported] == [
        TextDelta("Back."), ReplyFinished("stop")]  # fmt: skip
    assert [r.status for r in scripted_server.chat_requests] == [529, 529, 200]


def test_overloaded_past_the_retries_says_so_in_one_line(scripted_server):
    scripted_server.script(Reply(status=529))
    with pytest.raises(ServerError) as caught:
        list(client_for(scripted_server, max_retries=1).stream(MESSAGES, model="scripted-small"))
    assert "is overloaded (HTTP 529: Overloaded (overloaded_error)); wait a moment" in str(
        caught.value)  # fmt: skip
    assert len(scripted_server.chat_requests) == 2


def test_an_error_event_mid_stream_fails_with_its_message(scripted_server):
    scripted_server.script(Reply("one two three", error_after=1))
    with pytest.raises(ServerError, match=r"mid-stream: Overloaded \(overloaded_error\)"):
        list(client_for(scripted_server).stream(MESSAGES, model="scripted-small"))


def test_a_cut_stream_is_cut_off(scripted_server):
    scripted_server.script(Reply("one two three", cut_after=2))
    with pytest.raises(StreamCutOff):
        list(client_for(scripted_server).stream(MESSAGES, model="scripted-small"))


def test_the_models_come_from_v1_models(scripted_server):
    assert client_for(scripted_server).list_models() == [
        "nbchat-demo", "scripted-large", "scripted-small"]  # fmt: skip
    request = scripted_server.requests[-1]
    assert (request.path, request.protocol) == ("/v1/models?limit=1000", "anthropic")


def test_a_whole_reply_keeps_thinking_apart(scripted_server):
    scripted_server.script(Reply("Four.", reasoning="Two and two."))
    reply = client_for(scripted_server).complete(MESSAGES, model="scripted-small")
    assert (reply.text, reply.reasoning, reply.finish_reason) == ("Four.", "Two and two.", "stop")
    assert reply.extra["reasoning_blocks"][0]["thinking"] == "Two and two."


# -- whole turns ----------------------------------------------------------------------


@nbchat.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_thinking_stays_with_the_tool_loop_and_is_never_the_answer(scripted_server, tmp_path):
    scripted_server.script(
        Reply(tool_calls=[("add", {"a": 2, "b": 3})], reasoning="Use the tool.", when="sum"),
        Reply("It is 5.", after_tool="add", reasoning="Say it."),
    )
    chat = chat_for(scripted_server, tmp_path, tools=[add])
    thread = chat.new_thread()
    answer = chat.ask(thread, "sum of 2 and 3?", options={"thinking": 1024})
    assert (answer.text, answer.reasoning) == ("It is 5.", "Use the tool.Say it.")
    second = scripted_server.chat_requests[1]
    assert second.status == 200  # the fake refuses a loop whose thinking came back changed
    kept = second.body["messages"][1]["content"][0]
    assert (kept["type"], kept["thinking"]) == ("thinking", "Use the tool.")
    turn = chat.store.get(thread).turns[0]
    assert turn.messages[0]["reasoning_blocks"] == [kept]
    assert "Use the tool." not in turn.answer
    chat.ask(thread, "and now?", options={"thinking": 1024})
    later = scripted_server.chat_requests[-1].body["messages"]
    assert not [b for m in later for b in m["content"] if b["type"] == "thinking"]


def test_a_client_tool_answered_later_sends_the_thinking_back_unchanged(scripted_server, tmp_path):
    scripted_server.script(
        Reply(tool_calls=[("confirm", {"question": "Go on?"})], reasoning="Ask first.",
              when="delete"),
        Reply("Done.", after_tool="confirm"),
    )  # fmt: skip
    chat = chat_for(scripted_server, tmp_path)
    thread = chat.new_thread()
    assert chat.ask(thread, "delete it", options={"thinking": 1024}).status == "suspended"
    answer = Chat(base_url=scripted_server.anthropic_url, provider="anthropic",
                  store=tmp_path).answer_tool_call(thread, True)  # a new process, in effect
    assert answer.text == "Done." and scripted_server.chat_requests[-1].status == 200


def test_a_refusal_is_said_in_one_line(scripted_server, tmp_path):
    scripted_server.script(Reply("I can't", finish_reason="refusal"))
    chat = chat_for(scripted_server, tmp_path)
    answer = chat.ask(chat.new_thread(), "something bad")
    assert (answer.status, answer.finish_reason) == ("incomplete", "refusal")
    assert answer.note == (
        "the model declined to answer this (refusal); rephrase the question or ask another")


def test_the_turn_records_cache_reads_and_writes_and_prices_them(scripted_server, tmp_path):
    chat = chat_for(scripted_server, tmp_path)
    thread = chat.new_thread(system="You answer briefly. " * 100)
    chat.ask(thread, "one")
    chat.ask(thread, "two")
    first, second = chat.store.get(thread).turns
    assert first.usage["cache_read_tokens"] == 0 and first.usage["cache_write_tokens"] > 300
    assert second.usage["cache_read_tokens"] >= first.usage["cache_write_tokens"]
    prices = parse_prices({"scripted-small": {"input": 3, "output": 15, "cache_read": 0.3,
                                              "cache_write": 3.75}})  # fmt: skip
    line = turn_usage_line(second, prices)
    assert f"({second.usage['cache_read_tokens']:,} from cache" in line
    price = prices["scripted-small"]
    read, write = second.usage["cache_read_tokens"], second.usage.get("cache_write_tokens", 0)
    fresh = second.usage["prompt_tokens"] - read - write
    cost = (fresh * 3 + read * 0.3 + write * 3.75 + second.usage["completion_tokens"] * 15) / 1e6
    assert price.cost(second.usage["prompt_tokens"], second.usage["completion_tokens"], read,
                      write) == pytest.approx(cost)  # fmt: skip


def test_a_long_threads_next_question_is_read_from_the_cache(scripted_server, tmp_path):
    chat = chat_for(scripted_server, tmp_path)
    thread = chat.new_thread(system="You are a careful analyst.")
    chat.update_thread_title(thread, "Long")
    for i in range(50):
        chat.append_response(thread, f"question {i} " + "word " * 40, f"answer {i} " * 40)
    chat.ask(thread, "First new question?")
    chat.ask(thread, "Second new question?")
    usage = chat.store.get(thread).turns[-1].usage
    assert usage["cache_read_tokens"] / usage["prompt_tokens"] >= 0.9


def test_the_cache_can_be_switched_off(scripted_server, tmp_path):
    chat = chat_for(scripted_server, tmp_path, options={"prompt_cache": False})
    thread = chat.new_thread(system="Be brief.")
    chat.ask(thread, "one")
    assert "cache_control" not in json.dumps(scripted_server.chat_requests[-1].body)
