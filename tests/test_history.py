"""nbchat.engine.history: Message, ChatHistory and the cleanup strategies."""

from __future__ import annotations

import doctest
import json

import pytest

import nbchat.engine.history
from nbchat.base.config import ENV_HISTORY_LIMIT
from nbchat.base.errors import ConfigError, InputError
from nbchat.base.events import ToolCall
from nbchat.engine.history import (
    ChatHistory,
    ClearStrategy,
    Message,
    WindowStrategy,
    split_turns,
)

U = "user"
A = "assistant"


@pytest.fixture(autouse=True)
def _no_limit_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_HISTORY_LIMIT, raising=False)


def call(id_: str, name: str = "f", arguments: str = "{}") -> ToolCall:
    return ToolCall(id=id_, name=name, arguments=arguments)


def tool_turn(question: str, call_id: str, answer: str) -> list[Message]:
    """A user question, a tool call, its result and the final answer: one turn."""
    return [
        Message(U, question),
        Message(A, tool_calls=(call(call_id),)),
        Message("tool", "out", tool_call_id=call_id),
        Message(A, answer),
    ]


def contents(history: ChatHistory) -> list[str]:
    return [m.content for m in history]


# Message ---------------------------------------------------------------------


def test_message_to_dict_in_openai_format() -> None:
    calls = (call("c1", "add", '{"a": 1}'),)
    assert [
        Message(U, "hi").to_dict(),
        Message(A, tool_calls=calls).to_dict(),
        Message("tool", "2", tool_call_id="c1", name="add").to_dict(),
    ] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "content": "2", "tool_call_id": "c1", "name": "add"},
    ]


def test_message_from_dict_accepts_openai_shapes() -> None:
    data = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
        ],
    }
    assert Message.from_dict(data) == Message(A, "", tool_calls=(call("c1", "add", '{"a": 1}'),))
    assert Message.from_dict({"role": "tool", "content": "2", "tool_call_id": "c1"}) == Message(
        "tool", "2", tool_call_id="c1"
    )


def test_message_round_trips_through_dict() -> None:
    messages = [
        Message(U, "q"),
        Message(A, "let me see", tool_calls=(call("c1"), call("c2", "g"))),
        Message("tool", "r", tool_call_id="c1", name="f"),
    ]
    assert [Message.from_dict(m.to_dict()) for m in messages] == messages


def test_message_tool_calls_become_a_tuple() -> None:
    assert Message(A, tool_calls=[call("c1")]).tool_calls == (call("c1"),)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"role": "system", "content": "x"},
            "the system prompt is not a message; set ChatHistory.system",
        ),
        ({"role": "bot"}, "unknown message role 'bot'; use one of: user, assistant, tool"),
        ({"role": "user", "content": 3}, "user message content must be a string, got int"),
        (
            {"role": "tool", "content": "x"},
            "a tool message needs the tool_call_id of the call it answers",
        ),
        (
            {"role": "user", "tool_calls": (ToolCall("c", "f"),)},
            "only assistant messages have tool_calls",
        ),
        (
            {"role": "assistant", "tool_calls": ("f",)},
            "tool_calls must hold ToolCall objects, got 'f'",
        ),
        ({"role": "user", "name": "f"}, "tool_call_id and name belong to tool messages, not user"),
        (
            {"role": "tool", "tool_call_id": "c", "name": 1},
            "a tool message's name must be a string",
        ),
    ],
)
def test_message_rejects_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(InputError) as info:
        Message(**kwargs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("hi", "a message must be a dict in OpenAI format, got 'hi'"),
        ({"content": "hi"}, "a message needs a role (user, assistant, tool)"),
        ({"role": "system", "content": "be kind"}, "the system prompt is not a message"),
        ({"role": "user", "content": None}, "user message content must be a string"),
        ({"role": "user", "content": [{"type": "text"}]}, "user message content must be"),
        ({"role": "assistant", "tool_calls": ["f"]}, "a tool call must look like {'id': ..."),
    ],
)
def test_message_from_dict_rejects_bad_input(data: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        Message.from_dict(data)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


# Adding messages -------------------------------------------------------------


def test_add_methods_build_the_conversation() -> None:
    history = ChatHistory(system="Be brief.")
    history.chat_as_user("hi")
    history.chat_as_llm("hello")
    history.add_question_answer("2+2?", "4")
    history.add_tool_call([call("c1", "add", '{"a": 2}')], content="checking")
    history.add_tool_result("c1", "4", name="add")
    history.append({"role": "assistant", "content": "done"})
    history.extend([Message(U, "bye"), {"role": "assistant", "content": "ciao"}])
    assert history.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [call("c1", "add", '{"a": 2}').to_dict()],
        },
        {"role": "tool", "content": "4", "tool_call_id": "c1", "name": "add"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "bye"},
        {"role": "assistant", "content": "ciao"},
    ]
    assert len(history) == 9


def test_constructor_takes_messages_and_dicts() -> None:
    history = ChatHistory([Message(U, "q"), {"role": "assistant", "content": "a"}])
    assert list(history) == [Message(U, "q"), Message(A, "a")]
    assert history.system is None
    assert history.limit is None
    assert history.strategy == ClearStrategy()


def test_no_system_or_empty_system_is_not_sent() -> None:
    history = ChatHistory([Message(U, "q")])
    assert history.messages == [{"role": "user", "content": "q"}]
    history.system = ""
    assert history.messages == [{"role": "user", "content": "q"}]


def test_extend_adds_nothing_when_one_message_is_bad() -> None:
    history = ChatHistory([Message(U, "q")])
    with pytest.raises(InputError):
        history.extend([Message(A, "a"), {"role": "bot", "content": "x"}])
    assert list(history) == [Message(U, "q")]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda h: h.append(42), "a message must be a Message or an OpenAI-format dict, got 42"),
        (
            lambda h: h.chat_as_user(None),
            "user message content must be a string, got NoneType",
        ),
        (
            lambda h: h.chat_as_llm(b"x"),
            "assistant message content must be a string, got bytes",
        ),
        (lambda h: h.add_tool_call([]), "add_tool_call needs at least one ToolCall"),
        (lambda h: h.add_tool_result("", "x"), "a tool message needs the tool_call_id"),
        (
            lambda h: ChatHistory([{"role": "system", "content": "x"}]),
            "the system prompt is not a message",
        ),
        (lambda h: setattr(h, "system", 3), "the system prompt must be a string or None, got 3"),
    ],
)
def test_bad_input_raises_input_error(action, message: str) -> None:
    history = ChatHistory()
    with pytest.raises(InputError) as info:
        action(history)
    assert str(info.value).startswith(message)
    assert len(history) == 0


# Sequence protocol -----------------------------------------------------------


def test_len_iter_getitem_and_slices() -> None:
    history = ChatHistory(system="s", limit=10, strategy="window")
    history.add_question_answer("q1", "a1")
    history.add_question_answer("q2", "a2")
    assert len(history) == 4
    assert list(history) == [Message(U, "q1"), Message(A, "a1"), Message(U, "q2"), Message(A, "a2")]
    assert (history[0], history[-1]) == (Message(U, "q1"), Message(A, "a2"))
    tail = history[2:]
    assert tail == ChatHistory(
        [Message(U, "q2"), Message(A, "a2")], system="s", limit=10, strategy="window"
    )
    tail.chat_as_user("q3")
    assert len(history) == 4
    with pytest.raises(IndexError):
        history[4]


def test_equality_covers_messages_system_limit_and_strategy() -> None:
    base = ChatHistory([Message(U, "q")], system="s", limit=3)
    assert base == ChatHistory([{"role": "user", "content": "q"}], system="s", limit=3)
    assert base != ChatHistory([Message(U, "other")], system="s", limit=3)
    assert base != ChatHistory([Message(U, "q")], system="t", limit=3)
    assert base != ChatHistory([Message(U, "q")], system="s", limit=4)
    assert base != ChatHistory([Message(U, "q")], system="s", limit=3, strategy="window")
    assert base != [{"role": "user", "content": "q"}]


def test_repr_is_short_and_counts() -> None:
    history = ChatHistory(system="a very long secret-ish prompt", limit=6, strategy="window")
    history.add_question_answer("q", "a")
    assert (
        repr(history)
        == "<ChatHistory: 2 messages in 1 turns, system prompt, limit=6, strategy='window'>"
    )
    assert (
        repr(ChatHistory()) == "<ChatHistory: 0 messages in 0 turns, limit=None, strategy='clear'>"
    )


def test_clear_removes_messages_only() -> None:
    history = ChatHistory([Message(U, "q")], system="s", limit=5, strategy="window")
    history.clear()
    assert history == ChatHistory(system="s", limit=5, strategy="window")


# Turns -----------------------------------------------------------------------


def test_turns_start_at_each_user_message() -> None:
    greeting = Message(A, "Hello, ask me anything.")
    history = ChatHistory(
        [greeting, *tool_turn("q1", "c1", "a1"), Message(U, "q2"), Message(A, "a2")]
    )
    assert history.turns() == [
        [greeting],
        tool_turn("q1", "c1", "a1"),
        [Message(U, "q2"), Message(A, "a2")],
    ]
    assert ChatHistory().turns() == []


def test_turns_keep_a_user_message_between_call_and_result_in_the_call_turn() -> None:
    messages = [
        Message(U, "q1"),
        Message(A, tool_calls=(call("c1"),)),
        Message(U, "meanwhile"),
        Message("tool", "out", tool_call_id="c1"),
        Message(U, "q2"),
    ]
    assert split_turns(messages) == [messages[:4], messages[4:]]


def test_turns_split_after_a_call_that_never_got_a_result() -> None:
    messages = [Message(U, "q1"), Message(A, tool_calls=(call("c1"),)), Message(U, "q2")]
    assert split_turns(messages) == [messages[:2], messages[2:]]


# Cleanup: clear --------------------------------------------------------------


def test_clear_strategy_empties_when_the_limit_is_reached() -> None:
    history = ChatHistory(system="s", limit=3)
    history.chat_as_user("q1", clean=True)
    history.chat_as_llm("a1", clean=True)
    assert contents(history) == ["q1", "a1"]
    history.chat_as_user("q2", clean=True)  # 3 messages: reached (>=)
    assert contents(history) == []
    assert history.system == "s"


def test_add_question_answer_cleans_once_after_adding_both() -> None:
    history = ChatHistory(limit=4)
    history.add_question_answer("q1", "a1", clean=True)
    assert contents(history) == ["q1", "a1"]
    history.add_question_answer("q2", "a2", clean=True)
    assert contents(history) == []


def test_nothing_is_cleaned_without_clean() -> None:
    history = ChatHistory([Message(U, "q")] * 5, limit=2)
    history.chat_as_user("q")
    history.chat_as_llm("a")
    history.add_question_answer("q", "a")
    assert len(history) == 9
    history.clean()
    assert len(history) == 0


@pytest.mark.parametrize("limit", [None, 0])
def test_no_limit_means_no_cleanup(limit: int | None) -> None:
    history = ChatHistory(limit=limit)
    for i in range(50):
        history.chat_as_user(str(i), clean=True)
    assert len(history) == 50


def test_strategies_keep_everything_for_limit_zero() -> None:
    messages = [Message(U, "q"), Message(A, "a")]
    assert [ClearStrategy().apply(messages, 0), WindowStrategy().apply(messages, 0)] == [
        messages
    ] * 2


# Cleanup: window -------------------------------------------------------------


def test_window_drops_oldest_whole_turns() -> None:
    history = ChatHistory(limit=4, strategy="window")
    history.add_question_answer("q1", "a1")
    history.add_question_answer("q2", "a2")
    history.add_question_answer("q3", "a3", clean=True)
    assert contents(history) == ["q2", "a2", "q3", "a3"]
    history.chat_as_user("q4", clean=True)  # 5 > 4: the q2 turn goes
    assert contents(history) == ["q3", "a3", "q4"]


def test_window_never_separates_a_tool_call_from_its_result() -> None:
    history = ChatHistory(limit=5, strategy="window")
    history.extend(tool_turn("q1", "c1", "a1"))
    history.extend(tool_turn("q2", "c2", "a2"))
    history.chat_as_user("q3", clean=True)
    assert list(history) == [*tool_turn("q2", "c2", "a2"), Message(U, "q3")]


def test_window_keeps_an_oversized_last_turn_whole() -> None:
    history = ChatHistory(limit=3, strategy="window")
    history.add_question_answer("q1", "a1")
    history.extend(tool_turn("q2", "c2", "a2"))
    history.clean()
    assert list(history) == tool_turn("q2", "c2", "a2")


def test_window_keeps_a_history_at_the_limit() -> None:
    history = ChatHistory(limit=4, strategy="window")
    history.add_question_answer("q1", "a1")
    history.add_question_answer("q2", "a2", clean=True)
    assert contents(history) == ["q1", "a1", "q2", "a2"]


def test_custom_strategy_object() -> None:
    class KeepLast:
        def apply(self, messages: list[Message], limit: int) -> list[Message]:
            return messages[-limit:] if len(messages) > limit else messages

    history = ChatHistory(limit=2, strategy=KeepLast())
    history.add_question_answer("q1", "a1")
    history.chat_as_user("q2", clean=True)
    assert contents(history) == ["a1", "q2"]
    assert repr(history) == "<ChatHistory: 2 messages in 2 turns, limit=2, strategy='KeepLast'>"
    with pytest.raises(InputError) as info:
        history.to_dict()
    assert str(info.value) == (
        "a custom cleanup strategy (KeepLast) cannot be saved; "
        "set strategy to one of: clear, window first"
    )


def test_strategy_is_settable_by_name_or_object() -> None:
    history = ChatHistory()
    history.strategy = "window"
    assert history.strategy == WindowStrategy()
    history.strategy = ClearStrategy()
    assert history.strategy == ClearStrategy()


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        ("fifo", "unknown cleanup strategy 'fifo'; use one of: clear, window"),
        (
            len,
            "a cleanup strategy must be one of clear, window or an object with apply(messages, "
            "limit), got <built-in function len>",
        ),
    ],
)
def test_bad_strategy(strategy: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        ChatHistory(strategy=strategy)  # type: ignore[arg-type]
    assert str(info.value).startswith(message)


# Limit and the environment ---------------------------------------------------


def test_limit_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HISTORY_LIMIT, " 6 ")
    assert [ChatHistory().limit, ChatHistory(limit=None).limit, ChatHistory(limit=2).limit] == [
        6,
        None,
        2,
    ]
    assert ChatHistory.from_dict({"messages": []}).limit == 6
    monkeypatch.setenv(ENV_HISTORY_LIMIT, "")
    assert ChatHistory().limit is None


def test_bad_limit_in_the_environment_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HISTORY_LIMIT, "ten")
    with pytest.raises(ConfigError) as info:
        ChatHistory()
    assert str(info.value) == (
        "NBCHAT_HISTORY_LIMIT must be a whole number of messages, got 'ten'; unset it for no limit"
    )
    assert ChatHistory(limit=3).limit == 3  # an explicit limit never reads the variable


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        (-1, "limit must be 0 or more (0 or None: no cleanup), got -1"),
        ("5", "limit must be a whole number of messages or None, got '5'"),
        (2.5, "limit must be a whole number of messages or None, got 2.5"),
        (True, "limit must be a whole number of messages or None, got True"),
    ],
)
def test_bad_limit(limit: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        ChatHistory(limit=limit)  # type: ignore[arg-type]
    assert str(info.value) == message
    history = ChatHistory(limit=4)
    with pytest.raises(InputError):
        history.limit = limit  # type: ignore[assignment]
    assert history.limit == 4


# Copy and serialisation ------------------------------------------------------


def test_copy_is_independent() -> None:
    original = ChatHistory([Message(U, "q")], system="s", limit=3)
    copy = original.copy()
    assert copy == original and copy is not original
    copy.chat_as_llm("a")
    copy.system = "t"
    copy.limit = 9
    copy.strategy = "window"
    copy.clear()
    assert original == ChatHistory([Message(U, "q")], system="s", limit=3)


def test_to_dict_layout() -> None:
    history = ChatHistory([Message(U, "q")], system="s", limit=8, strategy="window")
    assert history.to_dict() == {
        "system": "s",
        "limit": 8,
        "strategy": "window",
        "messages": [{"role": "user", "content": "q"}],
    }


def test_json_round_trip() -> None:
    history = ChatHistory(system="Sé bref.", limit=0, strategy="window")
    history.extend(tool_turn("q1", "c1", "a1 ✓"))
    history.add_tool_call([call("c2", "g", '{"x": [1, 2]}')])
    history.add_tool_result("c2", "pending?", name="g")
    text = history.to_json()
    assert json.loads(text) == history.to_dict()
    assert ChatHistory.from_json(text) == history
    assert ChatHistory.from_dict(history.to_dict()) == history
    assert ChatHistory.from_json(ChatHistory().to_json()) == ChatHistory()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "not a saved ChatHistory (invalid JSON): "),
        ("[]", "a saved ChatHistory must be a dict, got list"),
        ('{"strategy": "lru"}', "unknown cleanup strategy 'lru'; use one of: clear, window"),
        ('{"messages": [{"role": "x"}]}', "unknown message role 'x'"),
    ],
)
def test_from_json_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        ChatHistory.from_json(text)
    assert str(info.value).startswith(message)


# Notebook display ------------------------------------------------------------


def test_markdown_display() -> None:
    history = ChatHistory(system="Be brief.\nUse SI units.")
    history.chat_as_user("Weather in Paris?")
    history.add_tool_call(
        [call("c1", "get_weather", '{"city": "Paris", "days": 1}')], content="Checking."
    )
    history.add_tool_result("c1", "18 C\nsunny", name="get_weather")
    history.chat_as_llm("It is **18 °C**.")
    history.chat_as_user("Thanks")
    history.add_tool_call([call("c2", "echo", "raw `text`")])
    history.add_tool_result("c2", "")
    assert history.to_markdown().split("\n") == [
        "**System**",
        "",
        "> Be brief.",
        "> Use SI units.",
        "",
        "**You**",
        "",
        "Weather in Paris?",
        "",
        "**Assistant**",
        "",
        "Checking.",
        "",
        'Tool call: `get_weather(city="Paris", days=1)`',
        "",
        "**Tool result** `get_weather`",
        "",
        "> 18 C",
        "> sunny",
        "",
        "**Assistant**",
        "",
        "It is **18 °C**.",
        "",
        "---",
        "",
        "**You**",
        "",
        "Thanks",
        "",
        "**Assistant**",
        "",
        "Tool call: ``echo(raw `text`)``",
        "",
        "**Tool result**",
        "",
        "*(empty)*",
        "",
    ]


def test_markdown_display_of_an_empty_history() -> None:
    assert ChatHistory().to_markdown() == "*No messages yet.*\n"


def test_markdown_display_shortens_long_contents() -> None:
    history = ChatHistory()
    history.chat_as_llm("word " * 500)
    history.add_tool_call([call("c1", "f", json.dumps({"text": "x" * 200}))])
    history.add_tool_result("c1", "\n".join(f"row {i}" for i in range(100)))
    long_text = "word " * 500
    assert history.to_markdown().split("\n\n") == [
        "**Assistant**",
        "<details><summary>Long text: 1 line, 2,500 characters</summary>",
        long_text,
        "</details>",
        "**Assistant**",
        'Tool call: `f(text="' + "x" * 73 + "…)`",
        "**Tool result**",
        "> row 0\n> row 1\n> row 2\n> row 3\n> row 4\n> … (660 more characters)\n",
    ]


# Module docstring ------------------------------------------------------------


def test_module_docstring_example_runs() -> None:
    results = doctest.testmod(nbchat.engine.history, optionflags=doctest.ELLIPSIS)
    assert (results.failed, results.attempted > 0) == (0, True)
