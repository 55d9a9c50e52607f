"""Administrator policy: hub-set variables that arguments and %config cannot override."""

from __future__ import annotations

import pytest

from nbchat import Chat
from nbchat.base.config import (
    ENV_ALLOWED_MODELS,
    ENV_DISABLE_LOCAL_MODEL,
    ENV_FORCE_BASE_URL,
    ENV_FORCE_MODEL,
    ENV_MAX_APPROVAL,
    resolve,
)
from nbchat.base.errors import ModelNotAllowed
from nbchat.base.policy import Policy
from nbchat.llm.discovery import _local as _local_server
from nbchat.testing import Reply, ScriptedServer


def test_names_are_the_documented_ones() -> None:
    assert (ENV_ALLOWED_MODELS, ENV_FORCE_BASE_URL, ENV_FORCE_MODEL) == (
        "NBCHAT_ALLOWED_MODELS",
        "NBCHAT_FORCE_BASE_URL",
        "NBCHAT_FORCE_MODEL",
    )
    assert (ENV_DISABLE_LOCAL_MODEL, ENV_MAX_APPROVAL) == (
        "NBCHAT_DISABLE_LOCAL_MODEL",
        "NBCHAT_MAX_APPROVAL",
    )


def test_no_variables_no_policy() -> None:
    assert Policy.from_env() == Policy()
    assert Policy().model("anything") == "anything"
    assert Policy().models(["a", "b"]) == ["a", "b"]


def test_allowed_models_filter_listings_and_refuse_others(
    scripted_server: ScriptedServer, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_ALLOWED_MODELS, " scripted-large , nbchat-demo")
    chat = Chat(base_url=scripted_server.url, store=tmp_path)
    assert chat.list_models() == ["nbchat-demo", "scripted-large"]
    with pytest.raises(ModelNotAllowed) as caught:
        Chat(base_url=scripted_server.url, store=tmp_path, model="scripted-small")
    assert str(caught.value) == (
        "model 'scripted-small' is not allowed here; the administrator allows scripted-large, "
        "nbchat-demo (NBCHAT_ALLOWED_MODELS); pick one with -m MODEL"
    )
    assert caught.value.model == "scripted-small"
    scripted_server.script(Reply("fine"))
    thread = chat.new_thread("scripted-large")
    assert chat.ask(thread, "hi").text == "fine"
    with pytest.raises(ModelNotAllowed):
        chat.ask(thread, "and now?", model="scripted-small")
    with pytest.raises(ModelNotAllowed):
        chat.new_thread("scripted-small")
    assert chat.thread_details(thread) == [("hi", "fine")]  # the refused question was not saved
    assert [tid for tid, _ in chat.thread_list()] == [thread]  # no thread was started
    assert {r.model for r in scripted_server.chat_requests} == {"scripted-large"}  # titles too


def test_forced_endpoint_and_model_beat_arguments(
    scripted_server: ScriptedServer, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_FORCE_BASE_URL, scripted_server.url)
    monkeypatch.setenv(ENV_FORCE_MODEL, "scripted-large")
    with ScriptedServer() as elsewhere:
        chat = Chat(base_url=elsewhere.url, store=tmp_path, model="scripted-small")
        assert (chat.settings.base_url, chat.settings.model) == (
            scripted_server.url,
            "scripted-large",
        )
        scripted_server.script(Reply("forced"))
        thread = chat.new_thread("scripted-small")
        assert chat.store.get(thread).model == "scripted-large"
        assert chat.ask(thread, "hi", model="nbchat-demo").text == "forced"
        assert elsewhere.requests == []
    assert {r.model for r in scripted_server.chat_requests} == {"scripted-large"}
    assert chat.list_models() == ["scripted-large"]


def test_disable_local_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_LOCAL_MODEL", "/somewhere/model.gguf")  # would be tried
    monkeypatch.setenv(ENV_DISABLE_LOCAL_MODEL, "yes")
    assert Policy.from_env().disable_local_model
    assert _local_server() is None
    assert resolve(base_url="http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"
