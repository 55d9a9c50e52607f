"""Code suggestions: the fill-in-the-middle client over loopback, and nbchat/complete.

The client is tried against the scripted server in each form it speaks
(llama.cpp /infill, Ollama's generate with a suffix, completions with a
suffix, Codestral's FIM) and falls back to a chat prompt where a form is
refused. The route runs in a real Jupyter server, asked with the page's token.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from agent_helpers import agent_server, kernel_client, run_cell, start_session, write_notebook
from nbchat.base.config import Settings
from nbchat.llm import LLMClient
from nbchat.llm._stop import StopSignal
from nbchat.llm.fim import MAX_SUGGESTION, Infill, iter_infill
from nbchat.testing import Reply, ScriptedServer

PREFIX = "def add(a, b):\n    return "


def client_for(server: ScriptedServer, provider: str = "openai") -> LLMClient:
    url = server.url if provider == "openai" else server.url.removesuffix("/v1")
    return LLMClient(Settings(base_url=url, provider=provider, model="nbchat-demo",
                              max_retries=0))  # fmt: skip


def paths(server: ScriptedServer) -> list[str]:
    return [request.path for request in server.requests]


@pytest.mark.parametrize(
    ("provider", "model", "server_options", "path", "form"),
    [
        ("openai", "nbchat-demo", {"context_size": 4096}, "/infill", "infill"),
        ("openai", "nbchat-demo", {}, "/v1/completions", "completions"),
        ("openai", "codestral-latest", {"models": ["codestral-latest"]}, "/v1/fim/completions",
         "codestral"),
        ("ollama", "nbchat-demo", {}, "/api/generate", "ollama"),
    ],
)
def test_each_endpoint_is_asked_in_the_fim_form_it_offers(
    provider: str, model: str, server_options: dict[str, Any], path: str, form: str
) -> None:
    with ScriptedServer(Reply("a + b", chunk_size=2), **server_options) as server:
        client = client_for(server, provider)
        asked = Infill(PREFIX, "\n\nprint(add(1, 2))", model, 16,
                       (("The notebook's earlier cells", "import math"),))  # fmt: skip
        assert "".join(iter_infill(client, asked)) == "a + b"
        (request,) = [r for r in server.requests if r.path == path]
        assert request.fim_prefix.endswith(PREFIX) and request.fim_suffix.startswith("\n\nprint")
        assert "import math" in json.dumps(request.body)
        assert client.fim_forms == {model: form}


@pytest.mark.parametrize(
    ("provider", "server_options", "refused"),
    [("openai", {"context_size": 4096}, 501), ("openai", {}, 404), ("ollama", {}, 400)],
)
def test_a_form_the_model_refuses_falls_back_to_a_chat_prompt(
    provider: str, server_options: dict[str, Any], refused: int
) -> None:
    with ScriptedServer(Reply(status=refused, times=1), Reply("a + b", when="<FILL>"),
                        **server_options) as server:  # fmt: skip
        client = client_for(server, provider)
        assert "".join(iter_infill(client, Infill(PREFIX))) == "a + b"
        assert client.fim_forms == {"nbchat-demo": "chat"}
        assert "".join(iter_infill(client, Infill(PREFIX))) == "a + b"  # remembered: chat first
        assert sum(r.is_fim for r in server.requests) == 1


def test_a_chat_only_endpoint_gets_a_chat_prompt_and_its_fences_are_dropped() -> None:
    refused = Reply(status=404, times=1)  # "a chat model, not for /v1/completions"
    with ScriptedServer(refused, Reply("```python\na + b\n```", when="<FILL>")) as server:
        server_client = client_for(server)
        text = "".join(iter_infill(server_client, Infill(PREFIX, "\n\nprint(add(1, 2))")))
        assert text == "a + b\n"
        chat = [r for r in server.requests if r.path.endswith("/chat/completions")][-1]
        sent = json.dumps(chat.body)
        assert "def add(a, b):\\n    return <FILL>\\n\\nprint(add(1, 2))" in sent
        assert server_client.fim_forms == {"nbchat-demo": "chat"}


def test_a_suggestion_is_cut_and_a_stop_closes_the_connection() -> None:
    with ScriptedServer(Reply("x" * 20_000, chunk_size=500)) as server:
        text = "".join(iter_infill(client_for(server), Infill(PREFIX)))
        assert len(text) == MAX_SUGGESTION
    with ScriptedServer(Reply(tokens=400, delay=0.05)) as server:
        stop = StopSignal()
        pieces = iter_infill(client_for(server), Infill(PREFIX), stop)
        next(pieces)
        stop.set()
        assert len(list(pieces)) < 10
        deadline = time.monotonic() + 5
        while not server.requests[-1].disconnected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests[-1].disconnected


def test_a_stop_before_the_endpoint_answers_closes_the_request_at_once() -> None:
    with ScriptedServer(Reply("a + b", hold=8)) as server:
        stop = StopSignal()
        started = time.monotonic()
        pieces = iter_infill(client_for(server), Infill(PREFIX), stop)
        threading.Timer(0.5, stop.set).start()
        assert list(pieces) == []
        assert server.wait_for(lambda: server.requests[-1].disconnected, timeout=3.0)
        assert time.monotonic() - started < 4  # not the 8 s the endpoint would have taken


# -- the route --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scripted() -> Any:
    with ScriptedServer(
        Reply(tokens=2000, delay=0.05, when="slow_one"),
        Reply("a + b", when="return "),
    ) as server:
        yield server


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedServer) -> Any:
    base = tmp_path_factory.mktemp("suggestions")
    env = {"NBCHAT_BASE_URL": scripted.url, "MY_SERVICE_TOKEN": "sk-suggest-0123456789abcdef"}
    with agent_server(base, env=env) as server:
        yield server


def ask(lab: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = httpx.post(f"{lab.url}/nbchat/complete", json=body, timeout=60,
                          headers={"Authorization": f"token {lab.token}"})  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


@pytest.mark.kernel
def test_the_route_streams_a_suggestion_with_the_notebooks_context(
    lab: Any, scripted: ScriptedServer
) -> None:
    write_notebook(lab, "suggest.ipynb", ["import pandas as pd"])
    session = start_session(lab, "suggest.ipynb")
    client = kernel_client(lab, session)
    run_cell(client, "prices = [1, 2, 3]\nsecret_key = 'sk-suggest-0123456789abcdef'")
    lines = ask(lab, {"prefix": PREFIX, "suffix": "", "path": "suggest.ipynb",
                      "cells": ["import pandas as pd", "TOKEN = 'sk-suggest-0123456789abcdef'"]})
    assert "".join(line.get("text", "") for line in lines) == "a + b"
    assert lines[-1] == {"done": True}
    sent = json.dumps([r.body for r in scripted.requests][-1])
    assert "import pandas as pd" in sent and "prices: list of 3" in sent
    assert "sk-suggest-0123456789abcdef" not in sent
    client.stop_channels()


def test_a_key_typed_around_the_cursor_is_not_sent(lab: Any, scripted: ScriptedServer) -> None:
    key = "sk-suggest-0123456789abcdef"  # the server's MY_SERVICE_TOKEN
    prefix = f"headers = {{'key': '{key}'}}\nother = '{key[:16]}"  # the cursor inside a key
    suffix = f"{key[16:]}'\ndef add(a, b):\n    return "
    lines = ask(lab, {"prefix": prefix, "suffix": suffix, "path": ""})
    assert lines[-1] == {"done": True}
    request = scripted.requests[-1]
    sent = json.dumps(request.body)
    assert key not in sent and key[:16] not in sent and key[16:] not in sent
    assert request.fim_prefix.endswith("headers = {'key': '[redacted]'}\nother = '[redacted]")
    assert request.fim_suffix.startswith("'\ndef add(a, b):")


METACLASSES = """
ran = []
class Marking(type):
    @property
    def __name__(cls): ran.append("__name__"); return "Fake"
    @property
    def __module__(cls): ran.append("__module__"); return "numpy"
class Raising(type):
    @property
    def __name__(cls): raise RuntimeError("no name")
class Marked(metaclass=Marking): pass
class Raised(metaclass=Raising): pass
marked, raised, prices = Marked(), Raised(), [1, 2, 3]
"""


@pytest.mark.kernel
def test_the_variables_a_suggestion_sends_run_no_metaclass_of_the_notebooks(
    lab: Any, scripted: ScriptedServer
) -> None:
    write_notebook(lab, "metaclass.ipynb")
    client = kernel_client(lab, start_session(lab, "metaclass.ipynb"))
    run_cell(client, METACLASSES)
    run_cell(client, "ran.clear()")
    lines = ask(lab, {"prefix": PREFIX, "suffix": "", "path": "metaclass.ipynb"})
    assert lines[-1] == {"done": True}
    assert run_cell(client, "print(ran)").strip() == "[]"
    sent = json.dumps([r.body for r in scripted.requests][-1], ensure_ascii=False)
    assert "marked: Marked (from __main__)" in sent and "raised: Raised (from __main__)" in sent
    assert "prices: list of 3" in sent
    client.stop_channels()


def test_the_route_needs_the_pages_login(lab: Any) -> None:
    response = httpx.post(f"{lab.url}/nbchat/complete", json={"prefix": "x"}, timeout=30)
    assert response.status_code in (401, 403)
    bad = httpx.post(f"{lab.url}/nbchat/complete", json={"prefix": 3}, timeout=30,
                     headers={"Authorization": f"token {lab.token}"})  # fmt: skip
    assert bad.status_code == 400


def test_a_browser_that_lets_go_stops_the_endpoints_request(
    lab: Any, scripted: ScriptedServer
) -> None:
    with httpx.stream("POST", f"{lab.url}/nbchat/complete", timeout=60,
                      json={"prefix": "slow_one = ", "suffix": ""},
                      headers={"Authorization": f"token {lab.token}"}) as response:  # fmt: skip
        for line in response.iter_lines():
            if line:
                break
    deadline = time.monotonic() + 10
    slow = [r for r in scripted.requests if "slow_one" in json.dumps(r.body)][-1]
    while not slow.disconnected and time.monotonic() < deadline:
        time.sleep(0.1)
        slow = [r for r in scripted.requests if "slow_one" in json.dumps(r.body)][-1]
    assert slow.disconnected and not slow.completed


@pytest.mark.local
def test_the_bundled_local_model_suggests_offline(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SmolLM2-135M has no FIM tokens: llama.cpp refuses /infill (501), the chat form answers."""
    from nbchat.llm import discovery, local

    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    for name in ("NBCHAT_BASE_URL", "NBCHAT_MODEL", "NBCHAT_LOCAL_MODEL"):
        monkeypatch.delenv(name, raising=False)
    discovery.reset_fallback_endpoint()
    try:
        server = local.ensure_local_server()
        client = LLMClient(Settings(base_url=server.url, provider="openai", model=server.model,
                                    origin="local", max_retries=0))  # fmt: skip
        text = "".join(iter_infill(client, Infill(PREFIX, "\n", server.model, max_tokens=16)))
        assert text.strip()
        assert client.fim_forms == {server.model: "chat"}
    finally:
        local.stop_local_server()
        discovery.reset_fallback_endpoint()
