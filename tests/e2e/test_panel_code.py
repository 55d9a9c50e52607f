"""Where the panel's code comes from: Jupyter Server's route, else the kernel, in Chromium.

The package enables ``nbchat.jupyter.server.extension``, so JupyterLab serves the panel's
versioned module and stylesheet and a panel's own messages carry only its
state and a small loader. Without that route (another front end, or the
extension switched off) the loader asks the kernel, and the panel works the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

from nbchat.base import markup
from nbchat.jupyter.panel import _assets as _panel_assets
from nbchat.testing import Reply

from .jupyterlab import JupyterLab, open_notebook, start_jupyterlab

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
ANSWER = "Use <b>pandas</b> & read_csv."


def test_the_panels_script_is_its_parts_joined_into_one_module():
    folder = Path(_panel_assets.__file__).parent / "js"
    assert sorted(p.name for p in folder.iterdir()) == sorted(_panel_assets.PARTS)
    assert len(set(_panel_assets.PARTS)) == len(_panel_assets.PARTS)
    assert list(_panel_assets.PARTS) == sorted(_panel_assets.PARTS)  # the names give the order
    code = _panel_assets.code()
    assert len(re.findall(r"\bexport\s+default\b", code)) == 1
    # The parts share the module's scope: no import or export of their own, but the last's.
    statement = re.compile(r"^\s*(?:import|export)\b.*$", re.M)
    for name in _panel_assets.PARTS:
        text = (folder / name).read_text(encoding="utf-8")
        found = [line.strip() for line in statement.findall(text)]
        last = name == _panel_assets.PARTS[-1]
        assert found == (["export default { render };"] if last else []), name
        assert f"// -- js/{name}\n{text}" in code


def test_the_panels_stylesheet_is_its_parts_joined_in_cascade_order():
    folder = Path(_panel_assets.__file__).parent / "css"
    assert sorted(p.name for p in folder.iterdir()) == sorted(_panel_assets.STYLE_PARTS)
    assert len(set(_panel_assets.STYLE_PARTS)) == len(_panel_assets.STYLE_PARTS)
    assert list(_panel_assets.STYLE_PARTS) == sorted(_panel_assets.STYLE_PARTS)
    sheet = _panel_assets.stylesheet()
    at = 0
    for name in _panel_assets.STYLE_PARTS:  # each under its header, in the declared order
        text = (folder / name).read_text(encoding="utf-8")
        assert text.endswith("}\n") and "/* -- css/" not in text, name
        found = sheet.find(f"/* -- css/{name} */\n{text}", at)
        assert found >= at, name
        at = found + len(text)
    # Then the renderer's rules, which the panel's answers need.
    assert sheet.endswith(markup.STYLE.removeprefix("<style>").removesuffix("</style>"))


def ask_in_the_panel(page: Page, lab: JupyterLab, server, store) -> None:
    server.script(Reply(ANSWER))
    nb = open_notebook(page, lab, [SETUP.format(url=server.url, store=str(store)), "%chat --panel"])
    nb.run_cell(0)
    nb.run_cell(1)
    box = page.locator(".nbchat-input-box").first
    box.wait_for(timeout=30_000)
    box.fill("How do I read a CSV?")
    box.press("Enter")
    page.get_by_text("read_csv.").first.wait_for(timeout=30_000)
    # The stylesheet is in force: the panel's own rules apply, however it came.
    assert page.locator(".nbchat-panel").first.evaluate(
        "el => getComputedStyle(el).display") == "flex"


def test_jupyterlab_serves_the_panels_code_and_the_panel_sends_only_a_loader(
    jupyterlab, page, scripted_server, tmp_path
):
    ask_in_the_panel(page, jupyterlab, scripted_server, tmp_path / "store")
    version = _panel_assets.version()
    assert page.locator(f'link[href$="/nbchat/static/panel-{version}.css"]').count() == 1
    assert page.locator(f"style#nbchat-panel-css-{version}").count() == 0
    base = f"{jupyterlab.url}/nbchat/static"
    login = {"Authorization": f"token {jupyterlab.token}"}
    with httpx.Client(trust_env=False, headers=login) as http:
        served = http.get(f"{base}/panel-{version}.js")
        assert served.status_code == 200 and served.text == _panel_assets.code()
        assert "immutable" in served.headers["cache-control"]
        assert http.get(f"{base}/_static.py").status_code == 404  # only the two files
    assert len(_panel_assets.loader()) < 4000  # what each panel sends besides its state


ADMIN_HEADERS = {"X-Frame-Options": "DENY", "X-Nbchat-Test-Admin": "set by the administrator"}


def test_the_route_sends_the_servers_security_headers_and_the_administrators(tmp_path):
    settings = {"ServerApp": {"tornado_settings": {"headers": ADMIN_HEADERS}}}
    version = _panel_assets.version()
    with start_jupyterlab(tmp_path / "lab", server_config=settings) as lab, httpx.Client(
        trust_env=False, headers={"Authorization": f"token {lab.token}"}
    ) as http:
        for name, kind in [("js", "text/javascript"), ("css", "text/css")]:
            served = http.get(f"{lab.url}/nbchat/static/panel-{version}.{name}")
            assert served.status_code == 200 and served.headers["content-type"].startswith(kind)
            assert served.headers["x-content-type-options"] == "nosniff"
            assert served.headers["content-security-policy"].startswith("frame-ancestors 'self'")
            for header, value in ADMIN_HEADERS.items():
                assert served.headers[header] == value
            assert served.headers["cache-control"] == "public, max-age=31536000, immutable"
            lab_page = http.get(f"{lab.url}/lab")  # what every Jupyter page sends, the same
            assert lab_page.headers["content-security-policy"] == served.headers[
                "content-security-policy"]
        missing = http.get(f"{lab.url}/nbchat/static/panel-0.js")
        assert missing.status_code == 404 and missing.headers["x-nbchat-test-admin"]
        anonymous = httpx.get(f"{lab.url}/nbchat/static/panel-{version}.js", trust_env=False)
        assert anonymous.status_code == 302 and "/login" in anonymous.headers["location"]
        assert _panel_assets.code() not in anonymous.text


def test_without_the_route_the_kernel_sends_the_code_and_the_panel_works(
    browser, scripted_server, tmp_path
):
    off = {"ServerApp": {"jpserver_extensions": {"nbchat.jupyter.server.extension": False}}}
    with start_jupyterlab(tmp_path / "lab", server_config=off) as lab:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        try:
            ask_in_the_panel(page, lab, scripted_server, tmp_path / "store")
            version = _panel_assets.version()
            assert page.locator(f"style#nbchat-panel-css-{version}").count() == 1
            assert page.locator('link[href*="/nbchat/static/"]').count() == 0
        finally:
            context.close()
