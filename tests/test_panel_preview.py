"""The panel's Preview: the request the typed question would send, shown, nothing sent."""

from __future__ import annotations

from markup_helpers import visible
from nbchat import Chat
from nbchat.jupyter.panel.widget import ChatPanel
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import asked


def test_preview_shows_the_request_and_sends_nothing(scripted_server: ScriptedServer, tmp_path):
    scripted_server.script(Reply("Tea <b>is</b> fine."))
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    panel = ChatPanel(chat=chat)
    panel.value = "Which tea <img src=x onerror=alert(1)>?"
    shown = panel.preview()
    assert asked(scripted_server) == [] and chat.threads() == []
    assert shown is not None and shown.parts[-2].source == "the question"
    assert "<img" not in panel.preview_html and "&lt;img" in panel.preview_html
    assert "Preview: nothing was sent." in visible(panel.preview_html)
    assert panel.value == "Which tea <img src=x onerror=alert(1)>?"  # kept, to send next
    panel.submit()
    panel.wait()
    assert asked(scripted_server)[-1].raw == shown.content
    panel.close_preview()
    assert panel.preview_html == ""


def test_an_empty_question_has_nothing_to_preview(scripted_server: ScriptedServer, tmp_path):
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    panel = ChatPanel(chat=chat)
    assert panel.preview() is None
    assert "the question is empty" in panel.status and panel.preview_html == ""


def test_a_question_over_budget_asks_in_the_panel_then_sends(scripted_server, tmp_path,
                                                             monkeypatch):  # fmt: skip
    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [100, 400]}')
    scripted_server.script(Reply("Sent anyway."))
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s",
                budget=0.01)  # fmt: skip
    panel = ChatPanel(chat=chat)
    panel.value = "An expensive question?"
    panel.submit()
    assert asked(scripted_server) == [] and chat.threads() == []  # nothing sent, nor kept
    assert "would cost ≈ $" in panel.confirm and panel.confirm_action == "Send anyway"
    assert panel.value == "An expensive question?"
    panel._on_front_end_msg(None, {"event": "confirm_delete"}, [])  # the bar's yes
    panel.wait()
    assert len(asked(scripted_server)) == 1 and panel.confirm == ""
    assert "Sent anyway." in panel.conversation.text
