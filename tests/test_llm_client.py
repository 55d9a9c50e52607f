"""The LLM client over real loopback HTTP against the scripted server."""

from __future__ import annotations

import pytest

from nbchat.base.config import Settings, resolve
from nbchat.base.errors import (
    AuthenticationError,
    LLMConnectError,
    LLMTimeout,
    MalformedStream,
    ModelNotFound,
    RateLimited,
    ServerError,
    StreamCutOff,
)
from nbchat.base.events import (
    ReplyFinished,
    TextDelta,
    ToolCallRequested,
    Usage,
    UsageReported,
)
from nbchat.llm import LLMClient, Reply
from nbchat.testing import Reply as Script
from nbchat.testing import ScriptedServer
from provider_helpers import PROVIDERS, base_url

MESSAGES = [{"role": "user", "content": "hello"}]


def client_for(server: ScriptedServer, provider: str = "openai", **changes) -> LLMClient:
    url = base_url(server, provider)
    settings = Settings(base_url=url, provider=provider, model="scripted-small")
    return LLMClient(settings.with_(**changes)) if changes else LLMClient(settings)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_text_arrives_in_order_with_usage_and_finish(scripted_server, provider):
    scripted_server.script(Script(chunks=["Hel", "lo ", "wörld"]))
    events = list(client_for(scripted_server, provider).stream(MESSAGES, model="scripted-small"))
    text = [e for e in events if isinstance(e, TextDelta)]
    assert text == [TextDelta("Hel"), TextDelta("lo "), TextDelta("wörld")]
    assert isinstance(events[-1], ReplyFinished)
    usage = [e for e in events if isinstance(e, UsageReported)]
    assert len(usage) == 1 and usage[0].usage.completion_tokens is not None
    assert scripted_server.chat_requests[-1].messages == MESSAGES


@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_tool_calls_are_assembled(scripted_server, provider):
    scripted_server.script(
        Script("Checking.", tool_calls=[("weather", {"city": "Oslo"}), ("time", {"tz": "UTC"})])
    )
    events = list(client_for(scripted_server, provider).stream(MESSAGES, model="scripted-small"))
    calls = [e.call for e in events if isinstance(e, ToolCallRequested)]
    assert [(c.name, c.arguments.replace(" ", "")) for c in calls] == [
        ("weather", '{"city":"Oslo"}'),
        ("time", '{"tz":"UTC"}'),
    ]
    assert len({c.id for c in calls}) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_non_streamed_reply(scripted_server, provider):
    scripted_server.script(Script("All at once.", tool_calls=[("f", {"a": 1})]))
    reply = client_for(scripted_server, provider).complete(MESSAGES, model="scripted-small")
    assert reply.text == "All at once."
    assert [(c.name, c.arguments.replace(" ", "")) for c in reply.tool_calls] == [("f", '{"a":1}')]
    assert isinstance(reply, Reply) and isinstance(reply.usage, Usage)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_models_are_listed(scripted_server, provider):
    models = client_for(scripted_server, provider).list_models()
    assert [m.split(":")[0] for m in models] == ["nbchat-demo", "scripted-large", "scripted-small"]


def test_tools_are_sent_and_the_key_only_as_bearer(scripted_server):
    scripted_server.script(Script("ok"))
    client = client_for(scripted_server, api_key="sk-secret-123")
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    list(client.stream(MESSAGES, model="scripted-small", tools=[tool]))
    request = scripted_server.chat_requests[-1]
    assert request.headers["Authorization"] == "Bearer sk-secret-123"
    assert request.body["tools"] == [tool]
    assert "sk-secret" not in repr(client) and "sk-secret" not in repr(client.settings)


def test_one_connection_is_reused_across_requests(scripted_server):
    client = client_for(scripted_server)
    for _ in range(3):
        list(client.stream(MESSAGES, model="scripted-small"))
    assert len({r.connection for r in scripted_server.chat_requests}) == 1


def test_closing_a_stream_early_closes_the_connection(scripted_server):
    scripted_server.script(Script(tokens=200, delay=0.05))
    stream = client_for(scripted_server).stream(MESSAGES, model="scripted-small")
    for event in stream:
        if isinstance(event, TextDelta):
            break
    stream.close()
    request = scripted_server.chat_requests[-1]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=3)
    assert not request.completed


def test_retries_server_errors_before_the_first_byte(scripted_server):
    scripted_server.script(Script(status=500, times=2), Script("third time lucky"))
    client = client_for(scripted_server, max_retries=3)
    text = "".join(
        e.text for e in client.stream(MESSAGES, model="scripted-small") if isinstance(e, TextDelta)
    )
    assert text == "third time lucky"
    assert [r.status for r in scripted_server.chat_requests] == [500, 500, 200]


def test_honours_retry_after_then_gives_up_with_rate_limited(scripted_server):
    scripted_server.script(Script(status=429, retry_after=0.05, times=1), Script("ok"))
    client = client_for(scripted_server, max_retries=1)
    assert (
        "".join(
            e.text
            for e in client.stream(MESSAGES, model="scripted-small")
            if isinstance(e, TextDelta)
        )
        == "ok"
    )
    scripted_server.reset()
    scripted_server.script(Script(status=429, retry_after=60))
    with pytest.raises(RateLimited, match="rate limiting") as caught:
        list(client.stream(MESSAGES, model="scripted-small"))
    assert caught.value.retry_after == 60


def test_no_retry_once_the_answer_has_started(scripted_server):
    scripted_server.script(Script(tokens=50, cut_after=5, times=1), Script("should not be asked"))
    with pytest.raises(StreamCutOff, match="incomplete"):
        list(client_for(scripted_server).stream(MESSAGES, model="scripted-small"))
    assert len(scripted_server.chat_requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cut_stream_is_an_error_never_a_short_answer(scripted_server, provider):
    scripted_server.script(Script(tokens=50, cut_after=5))
    with pytest.raises(StreamCutOff):
        list(client_for(scripted_server, provider).stream(MESSAGES, model="scripted-small"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_malformed_stream_is_reported(scripted_server, provider):
    scripted_server.script(Script(tokens=10, malformed_after=3))
    with pytest.raises(MalformedStream, match="not (a )?JSON"):
        list(client_for(scripted_server, provider).stream(MESSAGES, model="scripted-small"))


def test_a_stalled_stream_times_out(scripted_server):
    scripted_server.script(Script(tokens=10, stall_after=2, stall=5))
    client = client_for(scripted_server, read_timeout=0.3)
    with pytest.raises(LLMTimeout, match="stopped sending"):
        list(client.stream(MESSAGES, model="scripted-small"))


def test_missing_key_names_the_variable_and_never_the_key():
    with ScriptedServer(api_key="right-key") as server:
        with pytest.raises(AuthenticationError, match="NBCHAT_API_KEY") as missing:
            client_for(server).list_models()
        assert "needs an API key" in str(missing.value)
        with pytest.raises(AuthenticationError, match="refused the API key") as wrong:
            client_for(server, api_key="wrong-key-456").list_models()
    assert "wrong-key-456" not in str(wrong.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unknown_model_lists_what_is_offered(scripted_server, provider):
    with pytest.raises(ModelNotFound) as caught:
        list(client_for(scripted_server, provider).stream(MESSAGES, model="gpt-9"))
    assert "'gpt-9'" in str(caught.value) and "scripted-small" in str(caught.value)
    assert [m.split(":")[0] for m in caught.value.available] == [
        "nbchat-demo",
        "scripted-large",
        "scripted-small",
    ]


def test_server_error_after_retries_names_the_status(scripted_server):
    scripted_server.script(Script(status=503))
    with pytest.raises(ServerError, match="HTTP 503") as caught:
        list(client_for(scripted_server, max_retries=1).stream(MESSAGES, model="scripted-small"))
    assert caught.value.status == 503
    assert len(scripted_server.chat_requests) == 2


def test_nothing_listening_names_the_url():
    with ScriptedServer() as server:
        url = server.url
    settings = Settings(base_url=url, model="m", max_retries=1, retry_budget=1.0)
    with pytest.raises(LLMConnectError, match="cannot connect") as caught:
        LLMClient(settings).list_models()
    assert url in str(caught.value)


def test_default_model_prefers_configured_then_listed(scripted_server):
    assert client_for(scripted_server).default_model() == "scripted-small"
    unset = LLMClient(Settings(base_url=scripted_server.url))
    assert unset.default_model() == "nbchat-demo"


def test_explicit_settings_beat_the_environment(monkeypatch):
    monkeypatch.setenv("NBCHAT_BASE_URL", "http://127.0.0.1:11434")
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai-var")
    settings = resolve(model="x")
    assert (settings.provider, settings.model, settings.api_key) == (
        "ollama",
        "x",
        "from-openai-var",
    )
    assert settings.key_source == "OPENAI_API_KEY"
    assert resolve(base_url="http://h/v1", provider="openai").provider == "openai"


@pytest.mark.timeout(15)  # the server stays silent for 30 s: only the stop can end the stream
def test_a_stop_from_another_thread_ends_a_silent_stream_and_closes_it(scripted_server):
    import threading

    from nbchat.llm._stop import StopSignal

    scripted_server.script(Script("a b c d", stall_after=2, stall=30))
    stop = StopSignal()
    events = []
    for event in client_for(scripted_server).stream(MESSAGES, model="scripted-small", stop=stop):
        events.append(event)
        if event == TextDelta("b "):  # the server is silent from here on
            threading.Timer(0.2, stop.set).start()
    assert events == [TextDelta("a "), TextDelta("b ")]  # no ReplyFinished: it was stopped
    request = scripted_server.chat_requests[0]
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=5)
