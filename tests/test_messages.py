"""Message records: what a turn holds, and their dicts for the wire and the store."""

from __future__ import annotations

import pytest

from nbchat import ChatHistory, InputError, Message
from nbchat.base.events import ToolCall
from nbchat.base.messages import to_message, wire_messages

SIGNED = {"type": "thinking", "thinking": "weather first", "signature": "sig-1"}


def test_an_assistant_reply_keeps_its_signed_reasoning_through_the_store_form():
    call = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    reply = Message("assistant", "", tool_calls=(call,), reasoning_blocks=(SIGNED,))
    stored = reply.to_dict()
    assert stored["reasoning_blocks"] == [SIGNED]
    assert Message.from_dict(stored) == reply
    assert "sig-1" not in repr(reply)  # opaque payload, not shown


def test_a_history_never_keeps_signed_reasoning():
    reply = Message("assistant", "Sunny.", reasoning_blocks=(SIGNED,))
    assert to_message(reply).reasoning_blocks == ()
    history = ChatHistory([{"role": "user", "content": "Weather?"}, reply.to_dict()])
    assert "reasoning_blocks" not in history.messages[1]
    assert ChatHistory.from_json(history.to_json()).messages == history.messages


def test_reasoning_belongs_to_assistant_replies_only():
    with pytest.raises(InputError, match="reasoning_blocks belong to assistant replies"):
        Message("user", "hi", reasoning_blocks=(SIGNED,))
    with pytest.raises(InputError, match="reasoning_blocks belong to assistant replies"):
        Message("assistant", "hi", reasoning_blocks=("not a dict",))  # type: ignore[arg-type]


def test_wire_messages_put_the_system_prompt_first_and_only_when_there_is_one():
    question = Message("user", "What is 2+2?")
    assert wire_messages("Be brief.", [question]) == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
    ]
    assert wire_messages(None, [question]) == wire_messages("", [question]) == [question.to_dict()]
