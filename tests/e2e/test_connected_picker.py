"""Two endpoints connected once: the panel's picker groups their models, and each answers."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.e2e

SETUP = """\
import os
for name in ("NBCHAT_BASE_URL", "NBCHAT_MODEL"):
    os.environ.pop(name, None)
os.environ.update(NBCHAT_STORE={store!r}, NBCHAT_CONFIG={config!r}, JUPYTER_DATA_DIR={data!r},
                  NBCHAT_KEYS="file")
from nbchat.base.connections import Choice, Connection, Connections, update
from nbchat.base.keys import key_store
key_store().set("alpha", "sk-alpha-0123456789")
key_store().set("beta", "sk-beta-0123456789")
with update() as box:
    box[0] = Connections({{
        "alpha": Connection("alpha", "openai", {a!r}, "compatible", ("alpha-1",)),
        "beta": Connection("beta", "openai", {b!r}, "compatible", ("beta-1", "<b>bold</b>")),
    }}, Choice("alpha", "alpha-1"))
%load_ext nbchat
"""


def test_the_picker_groups_models_by_endpoint_and_each_answers(notebook, tmp_path) -> None:
    with ScriptedServer(Reply("Alpha answers."), models=["alpha-1"],
                        api_key="sk-alpha-0123456789") as a, \
         ScriptedServer(Reply("Beta answers."), models=["beta-1", "<b>bold</b>"],
                        api_key="sk-beta-0123456789") as b:  # fmt: skip
        setup = SETUP.format(store=str(tmp_path / "store"), config=str(tmp_path / "c.json"),
                             data=str(tmp_path / "data"), a=a.url, b=b.url)  # fmt: skip
        nb = notebook([setup, "%chat --panel"])
        out, box = nb.run_panel()
        picker = out.locator("select.nbchat-model")
        groups = picker.locator("optgroup")
        expect(groups).to_have_count(2)
        assert [groups.nth(n).get_attribute("label") for n in range(2)] == [
            "alpha (OpenAI-compatible)", "beta (OpenAI-compatible)"]
        expect(groups.nth(1).locator("option")).to_have_text(["<b>bold</b>", "beta-1"])
        assert out.locator("optgroup b").count() == 0  # a model's name is text, never markup
        assert picker.input_value() == "alpha-1"
        nb.screenshot("1-grouped")

        box.fill("Who answers?")
        out.get_by_role("button", name="Send").click()
        nb.wait_for_text(1, "Alpha answers.")
        picker.select_option("beta-1")
        box.fill("And now?")
        out.get_by_role("button", name="Send").click()
        nb.wait_for_text(1, "Beta answers.")
        nb.screenshot("2-each-answered")
        assert [r.model for r in b.chat_requests if r.model == "beta-1"]
        assert all(r.model != "beta-1" for r in a.chat_requests)
        assert picker.input_value() == "beta-1"  # the pick stays after the answer
