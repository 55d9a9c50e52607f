"""Endpoints connected once: the connections file, settings that use it, models across them."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from nbchat import Chat
from nbchat.base import connections
from nbchat.base.config import resolve
from nbchat.base.connections import Choice, Connection, config_path, load, update
from nbchat.base.errors import ConfigError
from nbchat.base.keys import key_store
from nbchat.llm.routed import RoutedClient
from nbchat.testing import Reply, ScriptedServer


def connect(name: str, url: str, key: str | None = None, *, models: tuple[str, ...] = (),
            provider: str = "openai", chat: str | None = None) -> None:  # fmt: skip
    if key is not None:
        key_store().set(name, key)
    with update() as box:
        box[0] = box[0].with_endpoint(Connection(name, provider, url, "compatible", models))
        if chat is not None:
            box[0] = connections.Connections(box[0].endpoints, Choice(name, chat))


@pytest.fixture
def two() -> tuple[ScriptedServer, ScriptedServer]:
    with ScriptedServer(models=["alpha-1"], api_key="sk-alpha") as a, \
         ScriptedServer(models=["beta-1"], api_key="sk-beta") as b:  # fmt: skip
        connect("alpha", a.url, "sk-alpha", models=("alpha-1",), chat="alpha-1")
        connect("beta", b.url, "sk-beta", models=("beta-1",))
        yield a, b


def test_the_file_holds_no_key_and_reads_back(two: tuple[ScriptedServer, ScriptedServer]) -> None:
    text = config_path().read_text()
    assert "sk-alpha" not in text and "sk-beta" not in text
    found = load()
    assert list(found.endpoints) == ["alpha", "beta"]
    assert found.chat == Choice("alpha", "alpha-1")
    assert json.loads(text)["endpoints"]["beta"]["models"] == ["beta-1"]


def test_settings_use_the_chosen_endpoint_and_its_kept_key(
    two: tuple[ScriptedServer, ScriptedServer],
) -> None:
    settings = resolve()
    assert (settings.base_url, settings.model, settings.connection) == (two[0].url, "alpha-1",
                                                                        "alpha")  # fmt: skip
    assert settings.api_key == "sk-alpha"
    assert "sk-alpha" not in repr(settings) and "keys.json" in settings.key_source
    beta = resolve(model="beta-1")
    assert (beta.base_url, beta.api_key, beta.connection) == (two[1].url, "sk-beta", "beta")


def test_environment_variables_win(two: tuple[ScriptedServer, ScriptedServer],
                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("NBCHAT_API_KEY", "sk-from-env")
    assert resolve().api_key == "sk-from-env"
    monkeypatch.setenv("NBCHAT_BASE_URL", two[1].url)
    settings = resolve()
    assert (settings.base_url, settings.connection) == (two[1].url, "beta")
    monkeypatch.delenv("NBCHAT_API_KEY")
    assert resolve().api_key == "sk-beta"  # the kept key of the endpoint at that URL


def test_a_chat_answers_with_each_endpoints_models(
    two: tuple[ScriptedServer, ScriptedServer],
) -> None:
    a, b = two
    a.script(Reply("from alpha"))
    b.script(Reply("from beta"))
    chat = Chat()
    assert isinstance(chat.llm, RoutedClient)
    assert chat.list_models() == ["alpha-1", "beta-1"]
    groups = chat.llm.endpoint_models()
    assert [(g.endpoint, g.models) for g in groups] == [("alpha", ("alpha-1",)),
                                                         ("beta", ("beta-1",))]  # fmt: skip
    first = chat.new_thread()
    assert chat.ask(first, "Hi?").text == "from alpha"
    second = chat.new_thread("beta-1")
    assert chat.ask(second, "Hi?").text == "from beta"
    assert [r.model for r in b.chat_requests] == ["beta-1"]


def test_one_endpoint_that_cannot_list_leaves_the_others(
    two: tuple[ScriptedServer, ScriptedServer],
) -> None:
    key_store().set("beta", "sk-wrong")
    groups = Chat().llm.endpoint_models()  # type: ignore[attr-defined]
    assert groups[0].models == ("alpha-1",)
    assert groups[1].models == () and groups[1].error
    assert "sk-wrong" not in groups[1].error
    assert Chat().list_models() == ["alpha-1"]


def test_a_damaged_file_is_one_line_and_left_alone() -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"endpoints": {"x": ')
    with pytest.raises(ConfigError, match="not valid JSON") as caught:
        resolve()
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError), update() as box:
        box[0] = box[0]
    assert path.read_text() == '{"endpoints": {"x": '


@pytest.mark.parametrize("bad", [
    '{"endpoints": {"bad name": {"base_url": "http://x"}}}',
    '{"endpoints": {"x": {"provider": "telnet", "base_url": "http://x"}}}',
    '{"endpoints": {"x": {"provider": "openai"}}}',
    '{"endpoints": {"x": {"base_url": "http://x", "models": "gpt"}}}',
    '{"endpoints": [], "chat": {}}',
    '[1, 2]',
])  # fmt: skip
def test_malformed_entries_name_the_thing(bad: str) -> None:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bad)
    with pytest.raises(ConfigError) as caught:
        load()
    assert str(path) in str(caught.value) or "name" in str(caught.value)


def _add_many(prefix: str, config: str, count: int) -> None:
    os.environ["NBCHAT_CONFIG"] = config
    for n in range(count):
        with update() as box:
            box[0] = box[0].with_endpoint(Connection(f"{prefix}{n}", "openai", f"http://h/{n}"))


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    config = str(tmp_path / "connections.json")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_many, args=(p, config, 25)) for p in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0]
    names = set(load(Path(config)).endpoints)
    assert names == {f"{p}{n}" for p in "ab" for n in range(25)}


def test_a_model_is_found_by_family() -> None:
    connect("work", "https://api.anthropic.com/v1", provider="anthropic")
    connect("oa", "https://api.openai.com/v1")
    found = connections.load()
    assert connections.endpoint_for_model(found, "claude-sonnet-4-5").name == "work"
    assert connections.endpoint_for_model(found, "gpt-4o").name == "oa"
    assert connections.endpoint_for_model(found, "llama3") is None


def test_the_panel_picker_groups_models_by_endpoint(
    two: tuple[ScriptedServer, ScriptedServer],
) -> None:
    from nbchat.jupyter.panel.widget import ChatPanel

    panel = ChatPanel(chat=Chat())
    assert [(g["endpoint"], g["models"]) for g in panel.model_groups] == [
        ("alpha", ["alpha-1"]), ("beta", ["beta-1"])]
    assert panel.models == ["alpha-1", "beta-1"] and panel.model == "alpha-1"
    panel._handle_custom_msg({"event": "connect_elsewhere"}, [])
    assert "python -m nbchat keys set" in panel.status_text


def test_a_provided_endpoint_takes_the_servers_token_over_environment_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("JPY_PARENT_PID", "4243")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-own-0123456789")
    announced = {"proxy": "http://127.0.0.1:1/nbchat/provided", "token": "tok-of-the-server",
                 "endpoints": {"course": {"provider": "openai",
                                          "base_url": "https://api.openai.com/v1"}}}  # fmt: skip
    (runtime / "nbchat-server-4243.json").write_text(json.dumps(announced))
    assert resolve().api_key == "tok-of-the-server"
