"""The endpoints beside OpenAI's: Azure OpenAI, Gemini's OpenAI-compatible one, the cache counts
of OpenAI-compatible endpoints, and a thread's provider remembered.

Against the scripted server over loopback; the Gemini stream also as recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

from nbchat import Chat, EndpointMismatch
from nbchat.base.config import resolve
from nbchat.base.errors import ConfigError
from nbchat.base.events import (
    ReplyFinished,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    Usage,
    UsageReported,
)
from nbchat.engine._usage import Price, parse_prices, thread_usage_line
from nbchat.llm import LLMClient
from nbchat.llm.openai import OpenAIProvider
from nbchat.store import Turn
from nbchat.testing import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "hello"}]


# -- Azure OpenAI ---------------------------------------------------------------------


@pytest.fixture
def azure_server():
    with ScriptedServer(models=["dep-1"]) as server:  # the deployment is the model
        yield server


def test_azure_asks_the_deployment_with_the_api_version_and_an_api_key_header(
    azure_server, monkeypatch
):
    scripted_server = azure_server
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key-0123456789")
    monkeypatch.setenv("NBCHAT_API_VERSION", "2025-01-01-preview")
    settings = resolve(base_url=scripted_server.ollama_url, provider="azure", model="dep-1")
    client = LLMClient(settings)
    events = list(client.stream(MESSAGES, model="dep-1"))
    assert events[-1] == ReplyFinished("stop")
    request = scripted_server.chat_requests[-1]
    assert request.path == (
        "/openai/deployments/dep-1/chat/completions?api-version=2025-01-01-preview")
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["api-key"] == "azure-key-0123456789" and "authorization" not in headers
    assert client.list_models() == ["dep-1"]  # Azure lists no deployments


def test_an_entra_id_token_goes_to_azure_as_a_bearer(azure_server, monkeypatch):
    scripted_server = azure_server
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "eyJ0eXAiOiJKV1Qi.token")
    settings = resolve(base_url=scripted_server.ollama_url, provider="azure", model="dep-1")
    list(LLMClient(settings).stream(MESSAGES, model="dep-1"))
    headers = {k.lower(): v for k, v in scripted_server.chat_requests[-1].headers.items()}
    assert headers["authorization"] == "Bearer eyJ0eXAiOiJKV1Qi.token" and "api-key" not in headers


def test_azure_is_guessed_from_its_host_and_needs_its_url(monkeypatch):
    settings = resolve(base_url="https://contoso.openai.azure.com")
    assert (settings.provider, settings.api_version) == ("azure", "2024-10-21")
    monkeypatch.setenv("NBCHAT_PROVIDER", "azure")
    with pytest.raises(ConfigError, match="NBCHAT_BASE_URL=https://RESOURCE.openai.azure.com"):
        resolve()


# -- Gemini's OpenAI-compatible endpoint ----------------------------------------------

# As Gemini's /v1beta/openai/chat/completions streams a tool call: the finish reason
# says "stop", not "tool_calls", and the call has no index.
GEMINI_TOOL_STREAM = (
    b'data: {"choices":[{"delta":{"role":"assistant","tool_calls":[{"function":'
    b'{"arguments":"{\\"city\\":\\"Paris\\"}","name":"get_weather"},"id":"function-call-1",'
    b'"type":"function"}]},"finish_reason":"stop","index":0}],"created":1754000000,'
    b'"model":"gemini-2.5-flash","object":"chat.completion.chunk","usage":{"completion_tokens":'
    b'5,"prompt_tokens":40,"total_tokens":45}}\n\ndata: [DONE]\n\n'
)


def test_geminis_tool_call_finishing_with_stop_is_still_a_call():
    events = list(OpenAIProvider().decode_stream([GEMINI_TOOL_STREAM]))
    assert [e for e in events if type(e) is not UsageReported] == [
        ToolCallDelta(0, "function-call-1", "get_weather", '{"city":"Paris"}'),
        ToolCallRequested(ToolCall("function-call-1", "get_weather", '{"city":"Paris"}')),
        ReplyFinished("stop"),
    ]


def test_a_gemini_tool_call_that_finishes_with_stop_runs_the_tool(scripted_server, tmp_path):
    import nbchat

    @nbchat.tool
    def weather(city: str) -> str:
        """The weather."""
        return "sunny"

    scripted_server.script(
        Reply(tool_calls=[("weather", {"city": "Paris"})], finish_reason="stop", when="Paris"),
        Reply("Sunny.", after_tool="weather"),
    )
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small",
                tools=[weather])  # fmt: skip
    assert chat.ask(chat.new_thread(), "weather in Paris?").text == "Sunny."


def test_a_safety_stop_is_said_in_one_line(scripted_server, tmp_path):
    scripted_server.script(Reply("I", finish_reason="content_filter"))
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    answer = chat.ask(chat.new_thread(), "hm")
    assert answer.status == "incomplete" and "declined to answer" in answer.note


def test_the_gemini_key_is_the_fallback_for_googles_endpoint(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSy-gemini-key-0123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-google-0123")
    settings = resolve(base_url="https://generativelanguage.googleapis.com/v1beta/openai")
    assert (settings.provider, settings.key_source) == ("openai", "GEMINI_API_KEY")


# -- cached tokens on OpenAI-compatible endpoints --------------------------------------


@pytest.mark.parametrize("stream", [True, False])
def test_openai_cached_tokens_are_read(scripted_server, stream):
    scripted_server.script(Reply("Hi.", cached_tokens=1))
    client = LLMClient(resolve(base_url=scripted_server.url, model="scripted-small"))
    if stream:
        usage = [e.usage for e in client.stream(MESSAGES, model="scripted-small")
                 if hasattr(e, "usage")]  # fmt: skip
    else:
        usage = [client.complete(MESSAGES, model="scripted-small").usage]
    assert usage == [Usage(prompt_tokens=1, completion_tokens=1, cache_read_tokens=1)]


def test_cache_prices_default_to_the_input_price_and_are_checked():
    assert Price(1.0, 2.0).cost(1000, 0, cache_read=600) == pytest.approx(0.001)
    assert Price(1.0, 2.0, 0.1, 1.25).cost(1000, 0, 600, 100) == pytest.approx(
        (300 + 60 + 125) / 1e6)  # fmt: skip
    with pytest.raises(ConfigError, match="cache prices"):
        parse_prices({"m": {"input": 1, "output": 2, "cache_read": -1}})
    with pytest.raises(ConfigError, match="unknown keys"):
        parse_prices({"m": {"input": 1, "output": 2, "cached": 1}})


def test_the_thread_line_sums_cache_reads_and_writes():
    turns = [
        Turn("a", usage={"prompt_tokens": 1000, "completion_tokens": 10,
                         "cache_write_tokens": 900}),
        Turn("b", usage={"prompt_tokens": 1100, "completion_tokens": 10,
                         "cache_read_tokens": 900}),
    ]  # fmt: skip
    assert thread_usage_line(turns) == (
        "2 answers · 2,100 in (900 from cache, 900 to cache) · 20 out")


# -- a thread remembers its endpoint ---------------------------------------------------


def test_a_thread_remembers_its_provider_and_refuses_another_in_one_line(
    scripted_server, tmp_path
):
    made = Chat(base_url=scripted_server.anthropic_url, provider="anthropic", store=tmp_path,
                model="scripted-small")  # fmt: skip
    thread = made.new_thread()
    assert made.store.get(thread).settings["endpoint"] == {
        "provider": "anthropic", "base_url": scripted_server.anthropic_url + "/v1"}  # fmt: skip
    other = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    with pytest.raises(EndpointMismatch) as caught:
        other.ask(thread, "hello")
    message = str(caught.value)
    assert message.startswith(f"thread {thread} talks to Anthropic at ")
    assert "%env NBCHAT_PROVIDER=anthropic" in message and "\n" not in message
    assert scripted_server.chat_requests == []  # nothing was sent
    assert other.ask(thread, "hello", model="scripted-small").status == "complete"
    assert other.store.get(thread).settings["endpoint"]["provider"] == "openai"


def test_a_claude_model_on_an_openai_endpoint_is_one_line_to_fix(scripted_server, tmp_path):
    chat = Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    with pytest.raises(EndpointMismatch) as caught:
        chat.new_thread("claude-sonnet-4-5")
    assert str(caught.value) == (
        f"model 'claude-sonnet-4-5' is served by Anthropic, but this session talks to an "
        f"OpenAI-compatible endpoint at {scripted_server.url}; switch with %env "
        f"NBCHAT_PROVIDER=anthropic, %env NBCHAT_BASE_URL=https://api.anthropic.com/v1 and "
        f"%chat --key (or ANTHROPIC_API_KEY), or pick one of %chat --models"
    )
    assert chat.threads() == [] and scripted_server.chat_requests == []


def test_a_gateway_that_lists_the_claude_model_is_fine(tmp_path):
    with ScriptedServer(models=["claude-sonnet-4-5"]) as gateway:  # LiteLLM proxy, say
        chat = Chat(base_url=gateway.url, store=tmp_path)
        thread = chat.new_thread("claude-sonnet-4-5")
        assert chat.ask(thread, "2+2?").status == "complete"


def test_new_with_a_claude_model_in_a_cell_is_one_line(ip, server):
    ip.run_line_magic("env", f"NBCHAT_BASE_URL={server.url}")
    with pytest.raises(UsageError, match="^model 'claude-opus-4-1' is served by Anthropic"):
        ip.run_line_magic("chat", "--new -m claude-opus-4-1")


def test_thinking_and_no_cache_flags_reach_the_anthropic_request(ip, server, tmp_path: Path):
    ip.run_line_magic("env", f"NBCHAT_BASE_URL={server.anthropic_url}")
    ip.run_line_magic("env", "NBCHAT_PROVIDER=anthropic")
    ip.run_line_magic("env", "NBCHAT_MODEL=scripted-small")
    ip.run_line_magic("chat", "--thinking 2048 --no-cache What is 2+2?")
    sent = [r for r in server.chat_requests if r.protocol == "anthropic"][0].body
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "cache_control" not in str(sent)
    with pytest.raises(UsageError, match="thinking is a budget of 1024 tokens or more"):
        ip.run_line_magic("chat", "--thinking 10 again")


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_the_cache_switch_is_not_sent_where_it_means_nothing(scripted_server, provider):
    url = scripted_server.url if provider == "openai" else scripted_server.ollama_url
    client = LLMClient(resolve(base_url=url, provider=provider, model="scripted-small"))
    list(client.stream(MESSAGES, model="scripted-small", options={"prompt_cache": False}))
    assert "prompt_cache" not in str(scripted_server.chat_requests[-1].body)


@pytest.mark.parametrize("provider", ["anthropic", "azure"])
def test_models_in_a_cell_on_each_provider(ip, server, capsys, provider):
    url = server.anthropic_url if provider == "anthropic" else server.ollama_url
    ip.run_line_magic("env", f"NBCHAT_BASE_URL={url}")
    ip.run_line_magic("env", f"NBCHAT_PROVIDER={provider}")
    ip.run_line_magic("env", "NBCHAT_MODEL=scripted-small")
    ip.run_line_magic("chat", "--models")
    shown = capsys.readouterr().out
    assert "scripted-small" in shown
    assert ("scripted-large" in shown) == (provider == "anthropic")  # Azure: the deployment


def test_the_config_examples_run():
    import doctest

    from nbchat.base import config

    assert doctest.testmod(config).attempted and not doctest.testmod(config).failed
