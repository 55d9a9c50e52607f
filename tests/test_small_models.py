"""Tools on servers that cannot take them, as llama.cpp's server running a small model.

The scripted server plays llama-server: ``GET /props`` marks it as one, and
``template_tools=False`` says its chat template drops tools, as SmolLM2's does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nbchat
from nbchat import Chat
from nbchat.base.config import Settings
from nbchat.base.errors import InputError
from nbchat.base.events import ToolCallRequested
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.llm import LLMClient
from nbchat.testing import Reply, ScriptedServer

seen: list[str] = []


@nbchat.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    seen.append(city)
    return "Sunny, 21 °C"


def asked(server: ScriptedServer) -> list:
    return [r for r in server.chat_requests if r.messages[0].get("content") != TITLE_PROMPT]


@pytest.fixture
def llama() -> ScriptedServer:
    with ScriptedServer(context_size=8192, template_tools=False) as server:
        yield server


def make_chat(server: ScriptedServer, tmp_path: Path, **kwargs) -> Chat:
    return Chat(base_url=server.url, store=tmp_path / "store", model="scripted-small", **kwargs)


def test_a_named_tool_on_llama_cpp_is_asked_through_the_schema_and_runs(llama, tmp_path):
    seen.clear()
    llama.script(
        Reply('{"city": "Paris"}', when="weather in Paris", times=1),
        Reply("It is sunny in Paris.", when="answered"),
    )
    chat = make_chat(llama, tmp_path, tools=[get_weather])
    answer = chat.ask(chat.new_thread(), "What is the weather in Paris?",
                      options={"tool_choice": "get_weather"})  # fmt: skip
    assert seen == ["Paris"]
    assert answer.status == "complete" and answer.text == "It is sunny in Paris."
    first, second = asked(llama)
    # The server ignores a named tool_choice: the tool's schema is the reply's grammar instead.
    assert "tools" not in first.body and "tool_choice" not in first.body
    schema = get_weather.schema()["function"]["parameters"]
    assert first.body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "get_weather", "schema": schema},
    }  # fmt: skip
    assert "get_weather" in first.messages[0]["content"]  # the system prompt names the tool
    # A template without tools shows a tool result under a role the model never saw:
    # the round goes back as plain turns.
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1]["content"] == 'get_weather({"city": "Paris"})'
    assert second.messages[2]["content"].startswith("get_weather answered: Sunny, 21 °C")
    assert not any(m["role"] == "tool" for r in asked(llama) for m in r.messages)


def test_a_cut_off_grammar_reply_is_not_run(llama, tmp_path):
    seen.clear()
    llama.script(Reply('{"city": "Par', finish_reason="length"))
    chat = make_chat(llama, tmp_path, tools=[get_weather])
    answer = chat.iter_ask(chat.new_thread(), "Weather in Paris?",
                           options={"tool_choice": "get_weather"})  # fmt: skip
    events = list(answer)
    assert seen == [] and not any(isinstance(e, ToolCallRequested) for e in events)
    assert answer.status == "incomplete"


def test_a_whole_reply_through_the_schema_is_a_call(llama):
    llama.script(Reply('{"city": "Oslo"}'))
    client = LLMClient(Settings(base_url=llama.url, provider="openai", model="scripted-small"))
    reply = client.complete(
        [{"role": "user", "content": "Weather in Oslo?"}], model="scripted-small",
        tools=[get_weather.schema()],
        options={"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
    )  # fmt: skip
    assert reply.text == "" and reply.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Oslo"})
    ]


def test_other_servers_get_the_named_tool_choice_as_it_is(scripted_server, tmp_path):
    scripted_server.script(Reply(tool_calls=[("get_weather", {"city": "Rome"})], times=1),
                           Reply("Sunny."))  # fmt: skip
    chat = make_chat(scripted_server, tmp_path, tools=[get_weather])
    chat.ask(chat.new_thread(), "Weather in Rome?", options={"tool_choice": "get_weather"})
    first = asked(scripted_server)[0]
    assert first.body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "response_format" not in first.body
    assert any(m["role"] == "tool" for m in asked(scripted_server)[1].messages)


def test_a_tool_choice_naming_no_offered_tool_is_refused_before_anything_is_saved(
    scripted_server, tmp_path
):
    chat = make_chat(scripted_server, tmp_path, tools=[get_weather])
    thread = chat.new_thread()
    with pytest.raises(InputError) as caught:
        chat.ask(thread, "Weather?", options={"tool_choice": "get_wether"})
    assert str(caught.value) == (
        "tool_choice names 'get_wether', which is not offered in this turn (offered: "
        "ask_user, choose, confirm, get_weather); name one of those, or leave --tool-choice out"
    )
    assert chat.store.get(thread).turns == [] and scripted_server.chat_requests == []


def test_a_model_whose_template_has_no_tools_gets_no_built_in_tools(llama, tmp_path):
    """Recognised by what the server reports, whatever name it is served under."""
    llama.script(Reply("Blue."))
    chat = make_chat(llama, tmp_path)
    chat.ask(chat.new_thread(), "Name one color.")
    assert "tools" not in asked(llama)[0].body


def test_a_model_whose_template_takes_tools_keeps_them(tmp_path):
    with ScriptedServer(Reply("Blue."), context_size=8192, template_tools=True) as server:
        chat = make_chat(server, tmp_path)
        chat.ask(chat.new_thread(), "Name one color.")
        names = [t["function"]["name"] for t in asked(server)[0].body["tools"]]
        assert names == ["ask_user", "choose", "confirm"]


def test_agent_on_a_model_without_tools_says_so_in_one_line(llama, run, monkeypatch):
    monkeypatch.setenv("NBCHAT_BASE_URL", llama.url)  # before the first %chat makes the Chat
    ran = run("%chat --agent What is the median price in df?")
    assert str(ran.error) == (
        "the model scripted-small cannot use tools (its chat template has none), so --agent "
        "cannot look at the notebook or run code: connect a model that can (%env "
        "NBCHAT_BASE_URL=… then %chat --key, or NBCHAT_LOCAL_MODEL=a larger .gguf), or ask "
        "without --agent"
    )
    assert llama.chat_requests == []
    llama.script(Reply("Ask me anything."))
    assert run("%chat Hello").error is None  # without --agent it answers
