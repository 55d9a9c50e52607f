"""The panel's Preview button in real JupyterLab: the request shown, hostile text inert."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from nbchat.testing import Reply

from .test_hostile import payload

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r},
                  NBCHAT_PRICES='{{"scripted-small": [1, 4]}}')
%load_ext nbchat
notes = {notes!r}
"""
JS_RAN = "() => Object.keys(window).filter(k => k.startsWith('pwned_')).sort()"


def test_preview_shows_the_request_and_its_hostile_text_stays_text(notebook, scripted_server,
                                                                   tmp_path):  # fmt: skip
    scripted_server.script(Reply("Seen."))
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"),
                         notes=payload("previewctx"))  # fmt: skip
    nb = notebook([setup, "%chat --panel"])
    out, box = nb.run_panel()
    box.fill(f"What do @notes say? {payload('previewq')}")
    out.get_by_role("button", name="Preview").click()
    pane = out.locator(".nbchat-preview-pane")
    expect(pane).to_contain_text("Preview: nothing was sent.", timeout=30_000)
    expect(pane).to_contain_text("@notes")
    expect(pane).to_contain_text("the question")
    expect(pane).to_contain_text("≈ $")
    nb.screenshot("preview")
    assert scripted_server.chat_requests == []  # nothing went to the model
    # The payloads are there as text, in the folds and the body, and made no element.
    pane.locator("details").first.evaluate("d => d.open = true")
    expect(pane).to_contain_text("Payload previewq begins.")
    assert pane.locator("img, script, svg, iframe, button[data-commandlinker-command]").count() == 0
    page = out.page
    page.wait_for_timeout(1000)  # time for an onerror to fire, if there were an image
    assert page.evaluate(JS_RAN) == []
    out.get_by_role("button", name="Close preview").click()
    expect(pane).to_be_hidden()
