"""The pure stream decoders, fed the same body split at every byte offset."""

from __future__ import annotations

import json

import pytest

from nbchat.base.errors import MalformedStream, StreamCutOff
from nbchat.base.events import (
    ReplyFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    Usage,
    UsageReported,
)
from nbchat.llm._sse import LineDecoder, SSEDecoder
from nbchat.llm.ollama import OllamaProvider
from nbchat.llm.openai import OpenAIProvider

SSE_BODY = (
    ": keep-alive comment\n\n"
    'data: {"a": "héllo 🌍"}\n\n'
    "event: message\r\n"
    'data: {"b":\r\n'
    "data: 1}\r\n\r\n"
    "data: [DONE]\r\r"
).encode()


def _splits(body: bytes):
    for i in range(len(body) + 1):
        for j in range(i, len(body) + 1, 7):
            yield [body[:i], body[i:j], body[j:]]


def test_sse_decoder_gives_the_same_events_whatever_the_split():
    expected = ['{"a": "héllo 🌍"}', '{"b":\n1}', "[DONE]"]
    for parts in _splits(SSE_BODY):
        decoder = SSEDecoder()
        events = [e for part in parts for e in decoder.feed(part)] + decoder.close()
        assert events == expected, parts


def test_line_decoder_keeps_multibyte_characters_across_splits():
    body = '{"x": "ü"}\n\n{"y": "日本"}\n{"z": 1}'.encode()
    for parts in _splits(body):
        decoder = LineDecoder()
        lines = [line for part in parts for line in decoder.feed(part)] + decoder.close()
        assert lines == ['{"x": "ü"}', '{"y": "日本"}', '{"z": 1}']


def _sse(*objects: object) -> bytes:
    return b"".join(
        b"data: " + (o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n\n"
        for o in objects
    )


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_openai_stream_assembles_tool_calls_by_index():
    body = _sse(
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Let me check."}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "b",
                        "type": "function",
                        "function": {"name": "two", "arguments": ""},
                    }
                ]
            }
        ),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "a",
                        "type": "function",
                        "function": {"name": "one", "arguments": '{"x"'},
                    }
                ]
            }
        ),
        _chunk(
            {
                "tool_calls": [
                    {"index": 0, "function": {"arguments": ": 1}"}},
                    {"index": 1, "function": {"arguments": "{}"}},
                ]
            }
        ),
        _chunk({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        b"[DONE]",
    )
    events = list(OpenAIProvider().decode_stream([body[:37], body[37:]]))
    assert events == [
        TextDelta("Let me check."),
        ToolCallDelta(0, "a", "one", '{"x"'),  # each piece passed on as it comes, by index
        ToolCallDelta(0, "a", "one", ": 1}"),
        ToolCallDelta(1, "b", "two", "{}"),
        ToolCallRequested(ToolCall("a", "one", '{"x": 1}')),
        ToolCallRequested(ToolCall("b", "two", "{}")),
        UsageReported(Usage(3, 4)),
        ReplyFinished("tool_calls"),
    ]


def test_openai_stream_without_done_after_a_finish_reason_is_complete():
    body = _sse(_chunk({"content": "Hi"}), _chunk({}, "stop"))
    assert list(OpenAIProvider().decode_stream([body])) == [TextDelta("Hi"), ReplyFinished("stop")]


def test_openai_stream_cut_before_its_end_is_an_error_not_a_short_answer():
    body = _sse(_chunk({"content": "Hi"}))
    with pytest.raises(StreamCutOff, match="incomplete"):
        list(OpenAIProvider().decode_stream([body]))


def test_openai_stream_with_a_non_json_chunk_is_malformed():
    with pytest.raises(MalformedStream, match="not (a )?JSON"):
        list(OpenAIProvider().decode_stream([b"data: {oops\n\n"]))


def test_ollama_stream_decodes_text_tools_and_usage():
    lines = [
        {"message": {"role": "assistant", "content": "Hel"}, "done": False},
        {
            "message": {
                "role": "assistant",
                "content": "lo",
                "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
            },
            "done": False,
        },
        {
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 5,
            "eval_count": 2,
        },
    ]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert list(OllamaProvider().decode_stream([body[:10], body[10:]])) == [
        TextDelta("Hel"),
        TextDelta("lo"),
        ToolCallRequested(ToolCall("call_1", "f", '{"a": 1}')),
        UsageReported(Usage(5, 2)),
        ReplyFinished("stop"),
    ]


def test_ollama_stream_cut_before_done_is_an_error():
    body = b'{"message": {"role": "assistant", "content": "Hel"}, "done": false}\n'
    with pytest.raises(StreamCutOff):
        list(OllamaProvider().decode_stream([body]))


def test_ollama_body_converts_openai_tool_messages():
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    body = OllamaProvider().chat_body(messages, "m", None, stream=True)
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "content": "42", "tool_name": "f"},
    ]
