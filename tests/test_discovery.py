"""Finding an endpoint when none is configured: the LLM client's job, not the settings'."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

import nbchat
from nbchat.base.config import resolve
from nbchat.base.errors import LLMConnectError
from nbchat.llm import LLMClient, discovery
from nbchat.testing import ScriptedServer, demo_server


@pytest.fixture(autouse=True)
def _nothing_configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NBCHAT_LOCAL_MODEL", "off")  # no Ollama here either: the demo model
    discovery.reset_fallback_endpoint()
    yield
    discovery.reset_fallback_endpoint()


def test_resolving_settings_finds_nothing_and_starts_nothing() -> None:
    code = textwrap.dedent("""
        import threading
        from nbchat.base.config import resolve
        settings = resolve()
        print(repr(settings.base_url), settings.origin, threading.active_count())
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert (done.stdout, done.stderr) == ("'' configured 1\n", "")


def test_the_client_finds_the_demo_model_when_nothing_is_configured() -> None:
    llm = nbchat.LLM()
    assert llm.ask("What is 2+2?") == "2 + 2 = 4."
    assert (llm.settings.origin, llm.settings.base_url) == ("demo", demo_server().url)


def test_a_dead_fallback_server_is_found_again_on_the_next_question(tmp_path) -> None:
    chat = nbchat.Chat(store=tmp_path)
    thread = chat.new_thread()
    assert chat.ask(thread, "What is 2+2?").text == "2 + 2 = 4."
    first = demo_server()
    first_url = first.url
    first.stop()  # as if the shared server had died
    assert chat.ask(thread, "What is 3+3?").text == "3 + 3 = 6."
    assert demo_server() is not first and demo_server().is_running
    assert chat.llm.settings.base_url == demo_server().url != first_url


def test_the_demo_model_asked_for_by_name_is_restarted_too(monkeypatch) -> None:
    monkeypatch.setenv("NBCHAT_BASE_URL", "demo")
    llm = nbchat.LLM()
    assert llm.ask("What is 2+2?") == "2 + 2 = 4."
    demo_server().stop()
    assert llm.ask("What is 3+3?") == "3 + 3 = 6."


def test_a_configured_endpoint_that_dies_is_not_replaced() -> None:
    with ScriptedServer() as server:
        url = server.url
        llm = nbchat.LLM(base_url=url, model="scripted-small")
        llm.ask("hello")
    with pytest.raises(LLMConnectError, match=url):
        llm.ask("again")
    assert llm.llm.settings.base_url == url
    assert resolve(base_url=url).origin == "configured"


def test_requests_under_way_when_the_server_dies_all_follow_the_new_one() -> None:
    # A title is asked in a thread of its own, beside the next question: both
    # fail against the dead server, one looks again, the other must follow it.
    client = LLMClient(resolve())
    dead = demo_server()
    dead.stop()
    messages = [{"role": "user", "content": "What is 2+2?"}]
    answers: list[object] = []

    def ask() -> None:
        try:
            answers.append(client.complete(messages, model="nbchat-demo").text)
        except LLMConnectError as exc:
            answers.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == ["2 + 2 = 4."] * 4
    assert client.settings.base_url == demo_server().url


def test_every_fallback_is_one_entry_of_one_table_and_the_local_and_demo_ones_have_names():
    assert discovery.DISCOVERED == ("ollama", "local", "demo")
    assert [f.name for f in discovery.FALLBACKS] == [None, "local", "demo"]
    for fallback in discovery.FALLBACKS:  # each note names where the answer comes from
        note = fallback.note.format(url="http://127.0.0.1:1", model="m")
        assert note.startswith("no endpoint configured, so ")


def test_the_local_model_asked_for_by_name_where_it_cannot_start_is_one_line(monkeypatch):
    from nbchat.base.config import resolve
    from nbchat.base.errors import ConfigError

    monkeypatch.setenv("NBCHAT_LOCAL_MODEL", "off")
    with pytest.raises(ConfigError, match="cannot start here") as caught:
        discovery.locate(resolve(base_url="local"))
    assert "\n" not in str(caught.value) and "nbchat[local]" in str(caught.value)
