"""The Connect dialog's routes on a real Jupyter server: a key goes in once, never comes back
out, and a new kernel answers with it and no ``--key``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from e2e.jupyterlab import JupyterLab, free_port, start_jupyterlab
from kernel_helpers import Kernel, kernel_env
from nbchat.base._across import CONNECTIONS_CHOICE_ROUTE, CONNECTIONS_ROUTE, CONNECTIONS_TEST_ROUTE
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
        ("scripted", True, MODELS)]
    assert saved["chat"] == {"endpoint": "scripted", "model": "model-a"}
    assert "keys.json" in saved["keys"]
    chosen = answered("PUT", CONNECTIONS_CHOICE_ROUTE,
                      {"chat": {"endpoint": "scripted", "model": "model-a"},
                       "suggestions": {"endpoint": "scripted", "model": "model-b"}})  # fmt: skip
    assert chosen["suggestions"] == {"endpoint": "scripted", "model": "model-b"}
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
    assert no_url.status_code == 200 and "URL" in no_url.json()["error"]
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
