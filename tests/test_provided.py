"""Endpoints the administrator provides on a hub: users' kernels use them, nobody reads the key.

A real Jupyter server reads ``c.NbchatProvided`` from its own
``jupyter_server_config.py``; the endpoints behind it are the scripted server,
which refuses any key but the administrator's. A kernel the server started asks
through the server's proxy with a token; the key is in no kernel's
environment, no announcement, no route's answer, no output and no error.
"""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agent_helpers import kernel_client, run_cell, start_session, write_notebook
from e2e.jupyterlab import JupyterLab, free_port, start_jupyterlab
from nbchat.base.connections import Choice, Connection
from nbchat.base.errors import ModelNotAllowed
from nbchat.base.policy import Policy
from nbchat.jupyter.panel._assets import version
from nbchat.jupyter.server import provided
from nbchat.jupyter.server._offered import Endpoint, Offered
from nbchat.jupyter.server.provided_proxy import (
    is_local_client,
    model_refusal,
    offered_tokens,
    upstream_url,
)
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel

KEY = "sk-admin-secret"
MODELS = ("course-model", "other-model", "claude-course")
SERVER_CONFIG = """\
c.NbchatProvided.endpoints = {{
    "course": {{"provider": "openai", "base_url": {url!r}, "key_env": "COURSE_KEY",
               "models": ["course-model", "other-model"]}},
    "claude": {{"provider": "anthropic", "base_url": {anthropic!r}, "key_file": {key_file!r},
               "models": ["claude-course"]}},
    "broken": {{"provider": "telepathy", "base_url": {url!r}, "key": {key!r}}},
    "closed": {{"provider": "openai", "base_url": {closed!r}, "key": {key!r}}},
}}
c.NbchatProvided.chat = {{"endpoint": "course", "model": "course-model"}}
c.NbchatProvided.allow_own = False
"""


@dataclass(frozen=True)
class Hub:
    """The user's server with the administrator's configuration, and the model behind it."""

    lab: JupyterLab
    base: Path
    model: ScriptedServer

    @property
    def announcement(self) -> Path:
        return self.base / "lab" / "runtime" / f"nbchat-server-{self.lab.process.pid}.json"

    def announced(self) -> dict[str, Any]:
        return json.loads(self.announcement.read_text(encoding="utf-8"))

    @property
    def proxy(self) -> str:
        return f"{self.lab.url}/nbchat/provided"

    def token(self) -> str:
        return self.announced()["token"]


def header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), None)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    base = tmp_path_factory.mktemp("hub")
    key_file = base / "claude.key"
    key_file.write_text(KEY + "\n")
    with ScriptedServer(Reply("Four.", when="2+2"), api_key=KEY, models=MODELS) as model:
        config = base / "lab" / "config"
        (config / "nbchat").mkdir(parents=True)
        (config / "jupyter_server_config.py").write_text(SERVER_CONFIG.format(
            url=model.url, anthropic=model.anthropic_url, key_file=str(key_file), key=KEY,
            closed=f"http://127.0.0.1:{free_port()}/v1"))
        own = {"endpoints": {"my-own-endpoint": {"provider": "openai", "base_url": model.url}}}
        (config / "nbchat" / "connections.json").write_text(json.dumps(own))
        env = {"COURSE_KEY": KEY, "NBCHAT_ALLOWED_MODELS": "course-model,claude-course",
               "NBCHAT_STORE": str(base / "store"), "NBCHAT_USER": "student",
               "NBCHAT_KEYS": "file"}  # fmt: skip
        with start_jupyterlab(base / "lab", env=env) as lab:
            running = Hub(lab, base, model)
            deadline = time.monotonic() + 30
            while not running.announcement.exists() and time.monotonic() < deadline:
                time.sleep(0.1)  # written as the server's loop starts, before it answers
            yield running
        assert not running.announcement.exists()  # removed as the server stopped


@pytest.fixture(scope="module")
def kernel(hub: Hub) -> Iterator[Any]:
    write_notebook(hub.lab, "course.ipynb")
    client = kernel_client(hub.lab, start_session(hub.lab, "course.ipynb"))
    assert "ERROR" not in run_cell(client, "%load_ext nbchat")
    yield client
    client.stop_channels()


def test_a_kernel_asks_through_the_proxy_with_a_key_it_never_holds(hub: Hub, kernel: Any) -> None:
    answer = run_cell(kernel, "%chat What is 2+2?")
    assert "Four." in answer
    asked = [r for r in hub.model.chat_requests if "2+2" in json.dumps(r.body)]
    assert {(r.path, header(r.headers, "Authorization")) for r in asked} == {
        ("/v1/chat/completions", f"Bearer {KEY}")}  # the answer, then its title
    environ = json.loads(run_cell(kernel, "import os, json; print(json.dumps(dict(os.environ)))"))
    assert "COURSE_KEY" not in environ and KEY not in json.dumps(environ)
    assert environ["JPY_PARENT_PID"] == str(hub.lab.process.pid)
    listed = run_cell(kernel, "%chat --models")
    assert "course-model" in listed and "claude-course" in listed and KEY not in listed
    assert "other-model" not in listed and "my-own-endpoint" not in listed
    names = run_cell(kernel, "from nbchat.base.connections import load_all\n"
                             "print(sorted(load_all().endpoints))")  # fmt: skip
    assert names.strip() == "['claude', 'closed', 'course']"  # allow_own = False: not the user's
    assert KEY not in answer


def test_the_announcement_holds_a_token_never_a_key(hub: Hub) -> None:
    text = hub.announcement.read_text(encoding="utf-8")
    assert KEY not in text
    assert stat.S_IMODE(hub.announcement.stat().st_mode) == 0o600
    data = json.loads(text)
    assert data["proxy"] == hub.proxy and len(data["token"]) >= 40
    assert data["own_allowed"] is False
    assert data["chat"] == {"endpoint": "course", "model": "course-model"}
    assert data["endpoints"]["claude"] == {"provider": "anthropic",
                                           "base_url": hub.model.anthropic_url,
                                           "models": ["claude-course"]}  # fmt: skip
    assert sorted(data["endpoints"]) == ["claude", "closed", "course"]  # "broken" was skipped
    log = hub.lab.log()
    assert ("c.NbchatProvided.endpoints['broken'] has provider 'telepathy'; use one of: openai"
            in log)
    assert KEY not in log
    files = [p for p in hub.base.rglob("*") if p.is_file()]
    holding = {p.name for p in files if KEY.encode() in p.read_bytes()}
    assert holding == {"jupyter_server_config.py", "claude.key"}


def test_no_route_answers_with_the_key(hub: Hub, kernel: Any) -> None:
    hub.model.script(Reply(status=400, error_message=f"invalid key {KEY} for this project",
                           when="leak it"))  # fmt: skip
    lab_auth = {"Authorization": f"token {hub.lab.token}"}
    bearer = {"Authorization": f"Bearer {hub.token()}"}
    body = {"model": "course-model", "messages": [{"role": "user", "content": "leak it"}]}
    answers = [
        httpx.get(f"{hub.proxy}/course/models"),
        httpx.get(f"{hub.proxy}/course/models", headers={"Authorization": "Bearer wrong-token"}),
        httpx.post(f"{hub.proxy}/course/chat/completions", json=body, headers=bearer),
        httpx.get(f"{hub.proxy}/closed/models", headers=bearer),
        httpx.get(f"{hub.lab.url}/nbchat/connections", headers=lab_auth),
        httpx.get(f"{hub.lab.url}/nbchat/static/panel-{version()}.js", headers=lab_auth),
        httpx.post(f"{hub.lab.url}/nbchat/complete", json={"prefix": "x = ", "suffix": ""},
                   headers=lab_auth, timeout=60),
    ]  # fmt: skip
    assert [a.status_code for a in answers] == [401, 401, 400, 502, 200, 200, 200]
    refused = answers[3].json()["error"]["message"]
    assert refused.startswith("the provided endpoint 'closed' did not answer")
    assert "\n" not in refused
    assert "[redacted]" in answers[2].text and "for this project" in answers[2].text
    leaked = run_cell(kernel, "%chat leak it")
    assert "400" in leaked or "invalid key" in leaked
    assert not [a.request.url for a in answers if KEY in a.text] and KEY not in leaked
    assert set(answers[0].json()) == {"error"} and "token" in answers[0].json()["error"]["message"]


def test_the_proxy_streams_as_the_model_answers_and_lets_go_with_the_kernel(hub: Hub) -> None:
    hub.model.script(Reply(tokens=30, delay=0.03, when="stream please"),
                     Reply("again ", when="never ends", repeat_bytes=10**7,
                           delay=0.05))  # fmt: skip
    bearer = {"Authorization": f"Bearer {hub.token()}"}

    def body(text: str) -> dict[str, Any]:
        return {"model": "course-model", "stream": True,
                "messages": [{"role": "user", "content": text}]}  # fmt: skip

    reads = []
    with httpx.stream("POST", f"{hub.proxy}/course/chat/completions", json=body("stream please"),
                      headers=bearer, timeout=30) as response:  # fmt: skip
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        reads = [chunk for chunk in response.iter_raw() if chunk]
    assert len(reads) >= 2  # chunk by chunk, not the whole answer at the end
    text = b"".join(reads).decode()
    assert "word0" in text and "word29" in text and text.rstrip().endswith("data: [DONE]")
    sent = hub.model.chat_requests[-1]
    assert header(sent.headers, "Authorization") == f"Bearer {KEY}"
    assert hub.token() not in json.dumps(sent.headers)

    with httpx.stream("POST", f"{hub.proxy}/course/chat/completions", json=body("never ends"),
                      headers=bearer, timeout=30) as response:  # fmt: skip
        next(response.iter_raw())
    endless = hub.model.wait_for(
        lambda: next((r for r in hub.model.requests if "never ends" in json.dumps(r.body)
                      and r.disconnected), None), timeout=20)  # fmt: skip
    assert not endless.completed


def test_a_hand_made_request_for_a_model_not_allowed_is_refused_by_the_proxy(
        hub: Hub, kernel: Any) -> None:  # fmt: skip
    code = """\
import os, httpx
from nbchat.base._provided import announcement
os.environ.pop("NBCHAT_ALLOWED_MODELS", None)  # the kernel's own cap, lifted by its own code
given = announcement()
for model in ("other-model", None):
    body = {"messages": [{"role": "user", "content": "hand made"}]}
    if model:
        body["model"] = model
    answer = httpx.post(given["proxy"] + "/course/chat/completions", json=body,
                        headers={"Authorization": "Bearer " + given["token"]})
    print(answer.status_code, answer.json()["error"]["message"])
"""
    printed = run_cell(kernel, code).strip().splitlines()
    assert printed == [
        "403 model 'other-model' is not allowed here; the administrator allows course-model, "
        "claude-course (NBCHAT_ALLOWED_MODELS)",
        "403 model None is not allowed here; the administrator allows course-model, "
        "claude-course (NBCHAT_ALLOWED_MODELS)",
    ]
    assert not [r for r in hub.model.requests if "hand made" in json.dumps(r.body)]


def test_anthropic_goes_to_the_real_v1_with_the_key_in_its_header(hub: Hub) -> None:
    hub.model.script(Reply("Bonjour.", when="anthropic hello"))
    headers = {"x-api-key": hub.token(), "anthropic-version": "2023-06-01"}
    body = {"model": "claude-course", "max_tokens": 50,
            "messages": [{"role": "user", "content": "anthropic hello"}]}  # fmt: skip
    answer = httpx.post(f"{hub.proxy}/claude/v1/messages", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200 and "Bonjour." in answer.text
    sent = hub.model.requests[-1]
    assert sent.path == "/v1/messages"
    assert header(sent.headers, "x-api-key") == KEY
    assert header(sent.headers, "anthropic-version") == "2023-06-01"
    assert header(sent.headers, "Authorization") is None
    listed = httpx.get(f"{hub.proxy}/claude/v1/models", headers=headers, timeout=30)
    assert listed.status_code == 200 and "claude-course" in listed.text
    dotted = httpx.get(f"{hub.proxy}/claude/v1/%2e%2e/secrets", headers=headers, timeout=30)
    assert dotted.status_code == 400


@pytest.mark.parametrize(("provider", "base_url", "path", "real"), [
    ("openai", "https://api.openai.com/v1", "/chat/completions",
     "https://api.openai.com/v1/chat/completions"),
    ("anthropic", "https://api.anthropic.com", "/v1/messages",
     "https://api.anthropic.com/v1/messages"),
    ("anthropic", "https://api.anthropic.com/v1/", "/v1/models",
     "https://api.anthropic.com/v1/models"),
    ("azure", "https://res.openai.azure.com", "/openai/deployments/gpt/chat/completions",
     "https://res.openai.azure.com/openai/deployments/gpt/chat/completions"),
    ("ollama", "http://gpu:11434", "/api/chat", "http://gpu:11434/api/chat"),
    ("openai", "https://gw.example/v1", "", "https://gw.example/v1"),
])  # fmt: skip
def test_a_kernels_path_maps_to_the_real_endpoint_exactly(provider: str, base_url: str, path: str,
                                                          real: str) -> None:  # fmt: skip
    assert upstream_url(Connection("x", provider, base_url), path) == real


def test_only_this_machine_reaches_the_proxy() -> None:
    assert is_local_client("127.0.0.1") and is_local_client("::1") and is_local_client("127.0.0.5")
    assert not is_local_client("10.0.0.2") and not is_local_client("") and not is_local_client(None)
    assert is_local_client("10.0.0.5", "10.0.0.5")  # a server bound to that address only
    assert not is_local_client("10.0.0.6", "10.0.0.5")
    assert not is_local_client("10.0.0.6", "0.0.0.0")


def test_the_token_is_taken_from_any_header_a_provider_sends_its_key_in() -> None:
    assert offered_tokens({"Authorization": "Bearer t1"}) == ["t1"]
    assert offered_tokens({"x-api-key": "t2"}) == ["t2"]
    assert offered_tokens({"api-key": "t3"}) == ["t3"]
    assert offered_tokens({"Authorization": "token t4"}) == []


def test_the_model_caps_hold_in_the_proxy() -> None:
    body = json.dumps({"model": "b"}).encode()
    assert model_refusal(Policy(), "openai", "/chat/completions", body) is None
    allowed = Policy(allowed_models=("a",))
    assert "'b' is not allowed" in model_refusal(allowed, "openai", "/chat/completions", body)
    assert model_refusal(allowed, "openai", "/chat/completions", b'{"model": "a"}') is None
    assert "None" in model_refusal(allowed, "openai", "/embeddings", b"not json")
    azure = "/openai/deployments/a/chat/completions"
    assert model_refusal(allowed, "azure", azure, b"{}") is None
    assert "(NBCHAT_FORCE_MODEL)" in model_refusal(Policy(force_model="a"), "openai", "/x", body)


def test_the_configuration_is_checked_entry_by_entry_and_no_error_quotes_a_key(
        tmp_path: Path) -> None:  # fmt: skip
    secret_file = tmp_path / "key"
    secret_file.write_text("sk-from-a-file-1234\n")
    config = provided.NbchatProvided(
        endpoints={
            "env": {"base_url": "https://gw.example/v1", "key_env": "GW_KEY", "models": ["m"]},
            "file": {"provider": "anthropic", "base_url": "https://api.anthropic.com",
                     "key_file": str(secret_file)},
            "keyless": {"provider": "ollama", "base_url": "http://gpu:11434"},
            "bad name!": {"base_url": "https://x.example/v1", "key": KEY},
            "two-keys": {"base_url": "https://x.example/v1", "key": KEY, "key_env": "GW_KEY"},
            "typo": {"base_url": "https://x.example/v1", "api_key": KEY},
            "unset": {"base_url": "https://x.example/v1", "key_env": "NOT_SET"},
            "missing": {"base_url": "https://x.example/v1", "key_file": str(tmp_path / "no")},
            "query": {"base_url": f"https://x.example/v1?key={KEY}", "key": KEY},
            "wire": {"provider": "grpc", "base_url": "https://x.example/v1", "key": KEY},
        },
        chat={"endpoint": "gone", "model": "m"},
        suggestions={"endpoint": "env", "model": "m"},
        allow_own=False,
    )  # fmt: skip
    environ = {"GW_KEY": "sk-from-the-env-5678", "HOME": "/home/ana"}
    found, errors = provided.read_config(config, environ)
    assert sorted(found.endpoints) == ["env", "file", "keyless"]
    assert [found.endpoints[n].key for n in ("env", "file", "keyless")] == [
        "sk-from-the-env-5678", "sk-from-a-file-1234", None]
    assert environ == {"HOME": "/home/ana"}  # no kernel started afterwards inherits it
    assert found.chat is None and found.suggestions == Choice("env", "m")
    assert not found.own_allowed
    assert len(errors) == 8 and all("\n" not in e and KEY not in e for e in errors)
    named = "\n".join(errors)
    for name in ("bad name!", "two-keys", "typo", "unset", "missing", "query", "wire"):
        assert f"c.NbchatProvided.endpoints[{name!r}]" in named
    assert "c.NbchatProvided.chat names 'gone'" in named
    assert "key_env names NOT_SET" in named and "api_key" in named
    assert "sk-from" not in repr(found)


def test_the_other_routes_get_public_data_and_the_server_its_real_settings() -> None:
    offered = Offered({"gw": Endpoint(Connection("gw", "openai", "https://u:pw@gw.example/v1",
                                                 models=("m",), provided=True), "sk-real-1234")},
                      suggestions=Choice("gw", "m"), own_allowed=False)  # fmt: skip
    serverapp = SimpleNamespace(web_app=SimpleNamespace(settings={provided.SETTINGS_KEY: offered}))
    public = provided.provided_public(serverapp)
    assert public == {"endpoints": {"gw": {"provider": "openai", "models": ["m"],
                                           "base_url": "https://[redacted]@gw.example/v1"}},
                      "own_allowed": False, "suggestions": {"endpoint": "gw", "model": "m"}}
    assert not provided.own_allowed(serverapp)
    settings = provided.provided_settings(serverapp, "gw", "m")
    assert settings is not None and settings.api_key == "sk-real-1234" and settings.model == "m"
    assert settings.connection == "gw" and "sk-real" not in repr(settings)
    assert provided.provided_settings(serverapp, "other") is None
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NBCHAT_ALLOWED_MODELS", "n")
        with pytest.raises(ModelNotAllowed):
            provided.provided_settings(serverapp, "gw", "m")
    empty = SimpleNamespace(web_app=SimpleNamespace(settings={}))
    assert provided.own_allowed(empty) and provided.provided_public(empty)["endpoints"] == {}
