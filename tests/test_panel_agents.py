"""The panel's agent picker: a coding agent answers in its own thread, its request a prompt.

Widget state driven from code, no kernel; the agent is the scripted ACP agent,
a real process speaking ACP.
"""

from __future__ import annotations

import pytest

from nbchat import Chat
from nbchat.jupyter.agents._hosting import host_for
from nbchat.jupyter.panel.widget import ChatPanel
from nbchat.testing import Reply, ScriptedServer
from test_acp_host import WRITE, configure


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path) -> Chat:
    return Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "store")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the kernel's agents work without a notebook


@pytest.fixture
def panel(chat: Chat, tmp_path):
    configure(tmp_path, [
        {"when": "write", "steps": WRITE},
        {"when": "slow", "steps": [{"say": "Starting."}, {"sleep": 30}, {"say": "never"}]},
    ])  # fmt: skip
    made = ChatPanel(chat=chat, background=False)
    yield made
    host_for(chat.store).close()


def test_the_picker_offers_installed_agents_and_a_picked_one_answers_in_its_thread(
    panel, chat, tmp_path, scripted_server
):
    assert {"name": "scripted", "label": "scripted"} in panel.agents
    assert all(a["name"] != "claude" or a["label"] == "Claude Code" for a in panel.agents)
    panel.agent = "scripted"
    panel.value = "please write the notes"
    panel.submit()
    thread = chat.store.get(panel.thread_id)
    assert thread.model == "agent:scripted" and thread.settings["acp"]["agent"] == "scripted"
    ((prompt,),) = [group.prompts for group in panel.prompts]
    assert not (tmp_path / "notes.txt").exists()
    prompt.submit("Allow once")
    assert (tmp_path / "notes.txt").read_text() == "hello\n"
    assert "Done." in panel.messages[-1]["html"]
    assert panel.messages[-1]["model"] == "agent:scripted"  # who answered, shown
    assert not scripted_server.chat_requests  # nbchat's model was never asked

    # Back to nbchat's model: a question goes to a thread of its own.
    scripted_server.script(Reply("From the model.", when="model"))
    agent_thread = panel.thread_id
    panel.agent = ""
    panel.value = "ask the model"
    panel.submit()
    assert panel.thread_id != agent_thread
    assert "From the model." in panel.messages[-1]["html"]
    panel.select(agent_thread)  # the agent's thread shows its agent in the picker
    assert panel.agent == "scripted"


def test_stop_in_the_panel_cancels_the_agents_turn(chat, tmp_path):
    configure(tmp_path, [{"when": "slow", "steps": [
        {"say": "Starting."}, {"sleep": 30}, {"say": "never"}]}])
    panel = ChatPanel(chat=chat, background=True)
    try:
        panel.agent = "scripted"
        panel.value = "slow work"
        panel.submit()
        import time

        deadline = time.monotonic() + 15
        while "Starting." not in str(panel.streaming_message) and time.monotonic() < deadline:
            time.sleep(0.05)
        panel.stop()
        assert panel.wait(15)
        turn = chat.store.get(panel.thread_id).turns[-1]
        assert turn.status == "interrupted" and turn.answer == "Starting."
    finally:
        host_for(chat.store).close()
