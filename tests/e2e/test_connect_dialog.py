"""The Connect dialog in real JupyterLab: a key tested, kept, and never sent back to the page;
a notebook then answers with no --key; the models an endpoint lists are shown as text, never
as HTML, their invisible and bidi characters written out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Error, Page, Response, WebSocket, expect

from nbchat.testing import Reply, ScriptedServer

from .jupyterlab import JupyterLab, open_notebook, screenshot, start_jupyterlab

pytestmark = pytest.mark.e2e

KEY = "sk-right-dialog-0123456789abcdef"
WRONG = "sk-wrong-dialog-fedcba9876543210"
HOSTILE = "<img src=x onerror=alert(1)>"
BIDI = "model-\u202etxt.exe\u200b"  # reads as "model-exe.txt" where bidi is obeyed
SHOWN = {BIDI: "model-\u27e8U+202E\u27e9txt.exe\u27e8U+200B\u27e9"}
MODELS = ["model-a", HOSTILE, BIDI]
LABEL = "nbchat: Connect a model\u2026"
TREE_BUILD = Path(__file__).resolve().parents[2] / "src" / "nbchat" / "labextension"


@pytest.fixture
def model_server() -> Iterator[ScriptedServer]:
    with ScriptedServer(Reply("Four.", when="2+2"), api_key=KEY, models=MODELS) as server:
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


class Seen:
    """What the page received from the server: API responses' bodies, websocket frames."""

    def __init__(self, page: Page, lab: JupyterLab) -> None:
        self.pending: list[Response] = []
        self.bodies: list[bytes] = []
        self.frames: list[str | bytes] = []
        self.connections = 0
        api = (f"{lab.url}/api/", f"{lab.url}/nbchat/", f"{lab.url}/lab/api/")
        page.on("response", lambda r: self.pending.append(r) if r.url.startswith(api) else None)
        page.on("websocket", self._socket)

    def _socket(self, socket: WebSocket) -> None:
        socket.on("framereceived", lambda frame: self.frames.append(frame))

    def read(self) -> None:
        """Read the bodies so far (before the page navigates away and they are gone)."""
        for response in self.pending:
            self.connections += "nbchat/connections" in response.url
            try:
                self.bodies.append(response.body())
            except Error:
                assert response.status == 204 or 300 <= response.status < 400, response.url
        self.pending.clear()

    def holds(self, secret: str) -> bool:
        wanted = secret.encode()
        return any(wanted in body for body in self.bodies) or any(
            wanted in (frame if isinstance(frame, bytes) else frame.encode())
            for frame in self.frames)  # fmt: skip


def files_holding(folder: Path, secret: str) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_connect_a_model_in_the_dialog(page: Page, lab: JupyterLab,
                                       model_server: ScriptedServer) -> None:  # fmt: skip
    seen = Seen(page, lab)
    alerts: list[str] = []
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
    dialog.locator("input.nbchat-connect-key").press("Enter")  # tests; never closes the dialog
    expect(dialog.locator(".nbchat-connect-result")).to_contain_text("key")
    expect(dialog).to_have_count(1)
    result = dialog.locator(".nbchat-connect-result")
    dialog.locator("button.nbchat-connect-test").click()
    expect(result).to_have_class("nbchat-connect-result nbchat-connect-error")
    expect(result).to_contain_text("key")
    assert "\n" not in result.inner_text().strip()

    dialog.locator("input.nbchat-connect-key").fill(KEY)
    dialog.locator("button.nbchat-connect-test").click()
    shown = [SHOWN.get(m, m) for m in sorted(MODELS)]
    expect(result.locator("li")).to_have_text(shown)  # as text, bidi and zero-width written out
    assert SHOWN[BIDI] in dialog.locator("select.nbchat-connect-chat").inner_text()
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
    seen.read()
    dirs = lab.root_dir.parent
    kept = dirs / "data" / "nbchat" / "keys.json"
    assert files_holding(dirs, KEY) == [kept] and kept.stat().st_mode & 0o777 == 0o600

    # A kernel started now answers with the key kept by the server, and no --key.
    nb = open_notebook(page, lab, ["%load_ext nbchat", "%chat What is 2+2?"], name="connected")
    nb.run_cell(0)
    nb.run_cell(1)
    nb.wait_for_text(1, "Four.")
    asked = [r for r in model_server.chat_requests if "2+2" in str(r.body)]
    assert asked and {r.headers.get("Authorization") for r in asked} == {f"Bearer {KEY}"}
    assert {r.model for r in asked} == {"model-a"}
    # The chat panel's plug button sends this event; the extension takes it and opens the dialog.
    taken = page.evaluate("() => !document.dispatchEvent(new CustomEvent('nbchat:connect', "
                          "{cancelable: true}))")  # fmt: skip
    assert taken
    expect(dialog.locator(".nbchat-connect-endpoint[data-name=compatible]")).to_contain_text(
        "key kept")
    dialog.locator(".nbchat-connect-endpoint[data-name=compatible] button").click()
    expect(dialog.locator(".nbchat-connect-none")).to_be_visible()

    seen.read()
    assert seen.connections >= 6 and not seen.holds(KEY) and not seen.holds(WRONG)
    assert files_holding(dirs, KEY) == []  # the key went with its endpoint
    assert not alerts
