"""The Connect dialog's routes on a real Jupyter server: a key goes in once, never comes back
out, and a new kernel answers with it and no ``--key``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from e2e.jupyterlab import JupyterLab, free_port, start_jupyterlab
from kernel_helpers import Kernel, kernel_env
from nbchat.base._across import (
    COMPLETE_ROUTE,
    CONNECTIONS_CHOICE_ROUTE,
    CONNECTIONS_ROUTE,
    CONNECTIONS_TEST_ROUTE,
)
from nbchat.testing import Reply, ScriptedServer

KEY = "sk-right-connect-0123456789abcdef"
WRONG = "sk-wrong-connect-fedcba9876543210"
MODELS = ["model-a", "model-b"]


@pytest.fixture
def model_server() -> ScriptedServer:
    with ScriptedServer(Reply("Four."), api_key=KEY, models=MODELS) as server:
        yield server


@pytest.fixture
def lab(tmp_path: Path) -> JupyterLab:
    with start_jupyterlab(tmp_path / "lab", env={"NBCHAT_KEYS": "file"}) as running:
        yield running


def call(lab: JupyterLab, method: str, route: str, body: object = None) -> httpx.Response:
    return httpx.request(method, f"{lab.url}/{route}", json=body, timeout=30,
                         headers={"Authorization": f"token {lab.token}"})  # fmt: skip


def suggest(lab: JupyterLab, model_server: ScriptedServer) -> list[Any]:
    """Ask nbchat/complete for a suggestion; the requests it made to the model server."""
    before = len(model_server.requests)
    answer = call(lab, "POST", COMPLETE_ROUTE, {"prefix": "def add(a, b):\n    return ",
                                                "suffix": ""})  # fmt: skip
    assert answer.status_code == 200 and KEY not in answer.text
    assert json.loads(answer.text.splitlines()[-1]) == {"done": True}, answer.text
    return [r for r in model_server.requests[before:] if r.model]


def test_connect_once_then_a_new_kernel_answers(tmp_path: Path, lab: JupyterLab,
                                                model_server: ScriptedServer) -> None:  # fmt: skip
    bodies: list[str] = []

    def answered(method: str, route: str, body: object = None) -> dict:
        response = call(lab, method, route, body)
        bodies.append(response.text)
        assert response.status_code == 200, response.text
        return response.json()

    base = {"kind": "compatible", "name": "scripted", "base_url": model_server.url}
    wrong = answered("POST", CONNECTIONS_TEST_ROUTE, {**base, "key": WRONG})
    assert set(wrong) == {"error"} and "\n" not in wrong["error"] and "key" in wrong["error"]
    closed = answered("POST", CONNECTIONS_TEST_ROUTE,
                      {**base, "base_url": f"http://127.0.0.1:{free_port()}/v1"})  # fmt: skip
    assert set(closed) == {"error"} and "\n" not in closed["error"] and closed["error"]
    right = answered("POST", CONNECTIONS_TEST_ROUTE, {**base, "key": KEY})
    assert right == {"models": MODELS}

    saved = answered("POST", CONNECTIONS_ROUTE, {**base, "key": KEY, "models": right["models"]})
    assert [(e["name"], e["key"], e["models"]) for e in saved["endpoints"]] == [
        ("scripted", saved["keys"], MODELS)]  # where the key is kept, never the key
    assert saved["chat"] == {"endpoint": "scripted", "model": "model-a"}
    assert "keys.json" in saved["keys"] and saved["own_allowed"] is True
    chosen = answered("PUT", CONNECTIONS_CHOICE_ROUTE,
                      {"chat": {"endpoint": "scripted", "model": "model-a"},
                       "suggestions": {"endpoint": "scripted", "model": "model-b"}})  # fmt: skip
    assert chosen["suggestions"] == {"endpoint": "scripted", "model": "model-b"}
    asked = suggest(lab, model_server)
    assert {r.model for r in asked} == {"model-b"}  # the suggestions' own model, its kept key
    assert {r.headers.get("Authorization") for r in asked} == {f"Bearer {KEY}"}
    kept = answered("POST", CONNECTIONS_TEST_ROUTE, {"kind": "compatible", "name": "scripted",
                                                     "base_url": model_server.url})  # fmt: skip
    assert kept == {"models": MODELS}  # the kept key, never sent back
    listed = answered("GET", CONNECTIONS_ROUTE)
    assert {p["kind"] for p in listed["presets"]} >= {"openai", "compatible", "azure"}
    assert not any(KEY in body for body in bodies)

    server_dirs = lab.root_dir.parent
    keys_file = server_dirs / "data" / "nbchat" / "keys.json"
    holding = [p for p in server_dirs.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert holding == [keys_file]
    assert keys_file.stat().st_mode & 0o777 == 0o600

    env = kernel_env(tmp_path / "kernel", JUPYTER_CONFIG_DIR=str(server_dirs / "config"),
                     JUPYTER_DATA_DIR=str(server_dirs / "data"),
                     NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_BASE_URL=None)  # fmt: skip
    with Kernel(env, cwd=tmp_path) as kernel:
        kernel.ok("%load_ext nbchat")
        reply = kernel.ok("%chat What is 2+2?", interactive=False)
    assert "Four." in reply.text()
    sent = {r.headers.get("Authorization") for r in model_server.chat_requests}
    assert sent == {f"Bearer {KEY}"}
    assert KEY not in json.dumps([reply.messages, reply.outputs], default=str)

    gone = answered("DELETE", f"{CONNECTIONS_ROUTE}/scripted")
    assert gone["endpoints"] == [] and gone["chat"] is None and gone["suggestions"] is None
    assert KEY.encode() not in keys_file.read_bytes()


def test_a_save_needs_the_key_store_and_a_usable_name(lab: JupyterLab) -> None:
    bad = call(lab, "POST", CONNECTIONS_ROUTE, {"kind": "openai", "name": "no spaces", "key": KEY})
    assert bad.status_code == 400 and "name" in bad.json()["error"] and KEY not in bad.text
    unknown = call(lab, "POST", CONNECTIONS_ROUTE, {"kind": "nonsense", "name": "x"})
    assert unknown.status_code == 400 and "kind" in unknown.json()["error"]
    no_url = call(lab, "POST", CONNECTIONS_TEST_ROUTE, {"kind": "compatible"})
    assert no_url.status_code == 400 and "URL" in no_url.json()["error"]
    with_password = call(lab, "POST", CONNECTIONS_ROUTE, {
        "kind": "compatible", "name": "x", "base_url": "http://me:hunter2-secret@127.0.0.1:9/v1"})
    assert with_password.status_code == 400 and "password" in with_password.json()["error"]
    assert "hunter2" not in with_password.text
    spaced = call(lab, "POST", CONNECTIONS_TEST_ROUTE, {"kind": "openai", "key": f"{KEY}\nx: y"})
    assert spaced.status_code == 400 and KEY not in spaced.text
    assert call(lab, "GET", CONNECTIONS_ROUTE).json()["endpoints"] == []


def test_a_cookie_login_without_the_xsrf_header_is_refused(lab: JupyterLab) -> None:
    with httpx.Client(base_url=lab.url, timeout=30, follow_redirects=True) as browser:
        browser.get(f"/lab?token={lab.token}")  # the login cookie and _xsrf, as a page has them
        xsrf = browser.cookies.get("_xsrf")
        assert xsrf, browser.cookies
        body = {"kind": "compatible", "name": "cookie", "base_url": "http://127.0.0.1:9/v1"}
        refused = browser.post(f"/{CONNECTIONS_ROUTE}", json=body)
        assert refused.status_code == 403
        assert browser.get(f"/{CONNECTIONS_ROUTE}").json()["endpoints"] == []
        allowed = browser.post(f"/{CONNECTIONS_ROUTE}", json=body, headers={"X-XSRFToken": xsrf})
        assert allowed.status_code == 200, allowed.text


def test_the_dialog_spells_the_routes_and_the_event_as_the_server_does() -> None:
    from nbchat.base import _across

    tree = Path(__file__).resolve().parents[1]
    source = (tree / "labextension" / "src" / "connect.ts").read_text()
    for name in ("CONNECTIONS_ROUTE", "CONNECTIONS_TEST_ROUTE", "CONNECTIONS_CHOICE_ROUTE",
                 "CONNECT_EVENT"):  # fmt: skip
        assert f"export const {name} = '{getattr(_across, name)}';" in source
    assert "innerHTML" not in source and "insertAdjacentHTML" not in source


def test_a_kept_key_goes_only_to_the_url_it_was_kept_for(
    lab: JupyterLab, model_server: ScriptedServer
) -> None:
    base = {"kind": "compatible", "name": "kept", "base_url": model_server.url}
    assert call(lab, "POST", CONNECTIONS_ROUTE, {**base, "key": KEY}).status_code == 200
    with ScriptedServer(models=["elsewhere"]) as other:
        moved = call(lab, "POST", CONNECTIONS_TEST_ROUTE, {**base, "base_url": other.url})
        assert moved.json() == {"models": ["elsewhere"]}
        assert [r.headers.get("Authorization") for r in other.requests] == [None]
        saved = call(lab, "POST", CONNECTIONS_ROUTE, {**base, "base_url": other.url})
        assert saved.status_code == 200, saved.text
        (endpoint,) = saved.json()["endpoints"]
        assert endpoint["base_url"] == other.url and endpoint["key"] is None  # forgotten
    needs = call(lab, "POST", CONNECTIONS_ROUTE, {"kind": "openai", "name": "kept"})
    assert needs.status_code == 400 and "key" in needs.json()["error"]
    assert call(lab, "DELETE", f"{CONNECTIONS_ROUTE}/kept").status_code == 200
    gone = call(lab, "DELETE", f"{CONNECTIONS_ROUTE}/kept")
    assert gone.status_code == 404 and "kept" in gone.json()["error"]


def test_an_azure_deployment_is_tried_with_one_token(
    lab: JupyterLab, model_server: ScriptedServer
) -> None:
    base = {"kind": "azure", "base_url": model_server.ollama_url, "key": KEY,
            "api_version": "2024-10-21"}  # fmt: skip
    assert call(lab, "POST", CONNECTIONS_TEST_ROUTE, {**base, "models": ["model-b"]}).json() == {
        "models": ["model-b"]}
    (asked,) = model_server.chat_requests
    assert asked.path == "/openai/deployments/model-b/chat/completions?api-version=2024-10-21"
    assert asked.headers.get("api-key") == KEY and asked.body["max_tokens"] == 1
    missing = call(lab, "POST", CONNECTIONS_TEST_ROUTE, {**base, "models": ["no-such"]}).json()
    assert set(missing) == {"error"} and "no-such" in missing["error"]
    unnamed = call(lab, "POST", CONNECTIONS_TEST_ROUTE, base).json()
    assert "deployment" in unnamed["error"]
    wrong = call(lab, "POST", CONNECTIONS_TEST_ROUTE, {**base, "key": WRONG, "models": ["model-b"]})
    assert "refused the API key" in wrong.json()["error"] and WRONG not in wrong.text


PROVIDED_CONFIG = """\
c.NbchatProvided.endpoints = {{"course": {{"provider": "openai", "base_url": {url!r},
                                          "key": {key!r}, "models": ["model-a"]}}}}
c.NbchatProvided.allow_own = False
"""


def test_where_the_administrator_provides_the_endpoints_people_add_none(
    tmp_path: Path, model_server: ScriptedServer
) -> None:
    config = tmp_path / "lab" / "config"
    config.mkdir(parents=True)
    (config / "jupyter_server_config.py").write_text(
        PROVIDED_CONFIG.format(url=model_server.url, key=KEY))
    theirs = ScriptedServer(models=["own-model"]).start()  # the person's, never asked here
    (config / "nbchat").mkdir()
    (config / "nbchat" / "connections.json").write_text(json.dumps({
        "endpoints": {"mine": {"provider": "openai", "base_url": theirs.url}},
        "suggestions": {"endpoint": "mine", "model": "own-model"}}))
    with theirs, start_jupyterlab(tmp_path / "lab", env={"NBCHAT_KEYS": "file"}) as lab:
        listed = call(lab, "GET", CONNECTIONS_ROUTE)
        assert KEY not in listed.text
        data = listed.json()
        assert data["own_allowed"] is False
        assert [(e["name"], e["provided"], bool(e["key"])) for e in data["endpoints"]] == [
            ("course", True, True)]
        own = call(lab, "POST", CONNECTIONS_ROUTE, {"kind": "ollama", "name": "mine"})
        assert own.status_code == 403 and "administrator" in own.json()["error"]
        removed = call(lab, "DELETE", f"{CONNECTIONS_ROUTE}/course")
        assert removed.status_code == 403
        chosen = call(lab, "PUT", CONNECTIONS_CHOICE_ROUTE,
                      {"suggestions": {"endpoint": "course", "model": "model-a"}})  # fmt: skip
        assert chosen.status_code == 400 and "c.NbchatProvided.suggestions" in chosen.text
        asked = suggest(lab, model_server)  # the administrator's, with its key, here
        assert {(r.model, r.headers.get("Authorization")) for r in asked} == {
            ("model-a", f"Bearer {KEY}")}
        assert not theirs.requests
