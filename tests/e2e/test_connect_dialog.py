"""The Connect dialog in real JupyterLab: a key tested, kept, and never sent back to the page;
the models an endpoint lists are shown as text, never as HTML."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Response, expect

from nbchat.testing import ScriptedServer

from .jupyterlab import JupyterLab, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

KEY = "sk-right-dialog-0123456789abcdef"
WRONG = "sk-wrong-dialog-fedcba9876543210"
HOSTILE = "<img src=x onerror=alert(1)>"
MODELS = ["model-a", HOSTILE]
LABEL = "nbchat: Connect a model\u2026"
TREE_BUILD = Path(__file__).resolve().parents[2] / "src" / "nbchat" / "labextension"


@pytest.fixture
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key=KEY, models=MODELS) as server:
        yield server


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[JupyterLab]:
    """A JupyterLab serving this tree's build of the extension (an install may hold an older
    copy): the user data dir's labextensions/nbchat, looked at first."""
    built = tmp_path / "lab" / "data" / "labextensions" / "nbchat"
    built.parent.mkdir(parents=True)
    built.symlink_to(TREE_BUILD, target_is_directory=True)
    env = {"NBCHAT_KEYS": "file", "JUPYTER_PREFER_ENV_PATH": "0"}
    with start_jupyterlab(tmp_path / "lab", env=env) as running:
        yield running


def open_by_palette(page: Page) -> None:
    page.locator("#jp-main-dock-panel").click()
    page.keyboard.press("Control+Shift+C")  # JupyterLab's own: the command palette
    box = page.locator(".jp-ModalCommandPalette .lm-CommandPalette-input")
    box.fill("connect a model")
    item = page.locator(".jp-ModalCommandPalette .lm-CommandPalette-item.lm-mod-active")
    expect(item).to_contain_text(LABEL)
    box.press("Enter")


def test_connect_a_model_in_the_dialog(page: Page, lab: JupyterLab,
                                       model_server: ScriptedServer) -> None:  # fmt: skip
    responses: list[Response] = []
    alerts: list[str] = []
    page.on("response", lambda r: responses.append(r) if "nbchat/connections" in r.url else None)
    page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
    page.goto(f"{lab.url}/lab?token={lab.token}&reset")
    page.wait_for_function("() => !!window.jupyterapp", timeout=60_000, polling=500)
    page.locator(".jp-LauncherCard", has_text="Connect a model").wait_for(timeout=60_000)

    open_by_palette(page)
    dialog = page.locator(".jp-Dialog .nbchat-connect")
    expect(dialog.locator(".nbchat-connect-where")).to_contain_text("keys.json")
    dialog.locator("select.nbchat-connect-kind").select_option("compatible")
    expect(dialog.locator("input.nbchat-connect-name")).to_have_value("compatible")
    expect(dialog.locator("input.nbchat-connect-key")).to_have_attribute("type", "password")
    dialog.locator("input.nbchat-connect-url").fill(model_server.url)
    dialog.locator("input.nbchat-connect-key").fill(WRONG)
    result = dialog.locator(".nbchat-connect-result")
    dialog.locator("button.nbchat-connect-test").click()
    expect(result).to_have_class("nbchat-connect-result nbchat-connect-error")
    expect(result).to_contain_text("key")
    assert "\n" not in result.inner_text().strip()

    dialog.locator("input.nbchat-connect-key").fill(KEY)
    dialog.locator("button.nbchat-connect-test").click()
    expect(result.locator("li")).to_have_text(sorted(MODELS))  # the hostile name, as its text
    assert page.locator("img[src=x]").count() == 0 and dialog.locator("img").count() == 0
    dialog.locator("select.nbchat-connect-chat").select_option("model-a")
    dialog.locator("select.nbchat-connect-suggestions").select_option(HOSTILE)
    dialog.locator("button.nbchat-connect-save").click()
    expect(dialog.locator(".nbchat-connect-saved")).to_contain_text("Connected compatible")
    expect(dialog.locator("input.nbchat-connect-key")).to_have_value("")
    endpoint = dialog.locator(".nbchat-connect-endpoint[data-name=compatible]")
    expect(endpoint).to_contain_text("key kept")
    expect(endpoint).to_contain_text("chat: model-a")
    expect(endpoint).to_contain_text(f"suggestions: {HOSTILE}")
    assert page.locator("img[src=x]").count() == 0 and not alerts
    screenshot(page, "connect-dialog/saved")

    page.locator(".jp-Dialog button", has_text="Close").click()
    expect(dialog).to_have_count(0)
    # The chat panel's plug button sends this event; the extension takes it and opens the dialog.
    taken = page.evaluate("() => !document.dispatchEvent(new CustomEvent('nbchat:connect', "
                          "{cancelable: true}))")  # fmt: skip
    assert taken
    expect(dialog.locator(".nbchat-connect-endpoint[data-name=compatible]")).to_contain_text(
        "key kept")
    dialog.locator(".nbchat-connect-endpoint[data-name=compatible] button").click()
    expect(dialog.locator(".nbchat-connect-none")).to_be_visible()

    bodies = [r.text() for r in responses if r.request.method != "OPTIONS"]
    assert len(bodies) >= 6 and all(KEY not in body for body in bodies)
    assert [r.headers.get("Authorization") for r in model_server.requests][-1] == f"Bearer {KEY}"
