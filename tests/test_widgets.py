"""Tool prompts and the chat panel as widget state, driven with .click(), no kernel.

Outside a kernel ``display`` only prints, so these tests look at the widgets
(values, disabled, children), the thread store and the scripted server's
request log.
"""

from __future__ import annotations

import json
from html import escape

import ipywidgets as widgets
import pytest

from markup_helpers import body, visible
from nbchat import Chat, ClientTool, Requirement
from nbchat.base.errors import InvalidToolAnswer
from nbchat.jupyter.panel.widget import ChatPanel, PromptGroup, pending_prompts, show_tool_prompts
from nbchat.testing import Reply, ScriptedServer

COLOUR = ("choose", {"question": "Which colour?", "options": ["red", "green"]})
NAME = ("ask_user", {"question": "What is your name?", "placeholder": "Ana"})
GO = ("confirm", {"question": "Delete the draft?"})


def title_reply(title: str = "A Short Title") -> Reply:
    """Answers the title request a thread's first complete turn makes."""
    return Reply(title, when=lambda body: "conversation title" in body["messages"][0]["content"])


@pytest.fixture
def chat(scripted_server: ScriptedServer, tmp_path) -> Chat:
    return Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "store")


def suspend(chat: Chat, server: ScriptedServer, *calls, then: str = "Done.", **reply) -> int:
    """A thread whose first turn waits for ``calls``; the answer after them is ``then``."""
    names = {name for name, _ in calls}
    server.script(
        title_reply(),
        *[Reply(then, after_tool=name) for name in sorted(names)],
        Reply(reply.pop("text", ""), when="please", tool_calls=list(calls), **reply),
    )
    thread = chat.new_thread()
    answer = chat.ask(thread, "please ask me")
    assert answer.status == "suspended"
    return thread


def tool_messages(server: ScriptedServer) -> list[dict]:
    """The tool results the model was sent in the last request that carried any."""
    for request in reversed(server.chat_requests):
        found = [m for m in request.messages if m["role"] == "tool"]
        if found:
            return found
    return []


def answer_in(message: dict) -> str:
    return message["content"].split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]


# ---------------------------------------------------------------- prompts


def test_clicking_an_option_resumes_the_turn_and_records_the_answer(chat, scripted_server):
    thread = suspend(chat, scripted_server, COLOUR, then="Green it is.")
    group = show_tool_prompts(chat, chat.pending_calls(thread))
    (prompt,) = group.prompts
    assert [b.description for b in prompt.buttons] == ["red", "green"]
    assert prompt.text_box is None and not prompt.is_answered

    prompt.buttons[1].click()

    assert prompt.is_answered and prompt.answer == "green" and prompt.error == ""
    assert [b.disabled for b in prompt.buttons] == [True, True]
    assert [b.button_style for b in prompt.buttons] == ["", "success"]
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["green"]
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.answer, turn.pending) == ("complete", "Green it is.", [])
    assert chat.pending_calls(thread) == []
    assert group.sink.data["text/plain"] == "Green it is."
    (tool,) = tool_messages(scripted_server)
    assert visible(group.sink.data["text/html"]) == (
        f"► choose → {len(tool['content'])} chars\nGreen it is."
    )
    assert pending_prompts(thread) == []


def test_a_rejected_free_text_answer_shows_the_error_and_keeps_the_prompt(chat, scripted_server):
    thread = suspend(chat, scripted_server, NAME, then="Hello, Ada.")
    group = show_tool_prompts(chat, chat.pending_calls(thread))
    (prompt,) = group.prompts
    assert prompt.text_box.placeholder == "Ana"
    requests = len(scripted_server.requests)

    prompt.text_box.value = "   "
    prompt.submit_button.click()

    assert prompt.error == "the answer is empty; type an answer, then submit it"
    assert "the answer is empty" in prompt.children[-2].value
    assert not prompt.is_answered
    assert not prompt.submit_button.disabled and not prompt.text_box.disabled
    assert prompt.text_box.value == "   "  # the person's input is kept
    assert len(scripted_server.requests) == requests  # the model was not asked
    assert [c.call_id for c in chat.pending_calls(thread)] == [prompt.call.call_id]
    assert pending_prompts(thread) == [prompt]

    prompt.text_box.value = " Ada "
    prompt.submit_button.click()

    assert prompt.is_answered and prompt.error == "" and prompt.children[-2].value == ""
    assert prompt.text_box.disabled and prompt.submit_button.disabled
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["Ada"]
    assert chat.store.get(thread).turns[0].answer == "Hello, Ada."


@pytest.mark.parametrize(("button", "said"), [(0, "yes"), (1, "no")])
def test_confirm_has_yes_and_no(chat, scripted_server, button, said):
    thread = suspend(chat, scripted_server, GO, then="Noted.")
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    assert [b.description for b in prompt.buttons] == ["Yes", "No"]

    prompt.buttons[button].click()

    assert prompt.answer is (button == 0)
    assert [b.button_style for b in prompt.buttons] == (
        ["success", ""] if button == 0 else ["", "success"]
    )
    assert [answer_in(m) for m in tool_messages(scripted_server)] == [said]


def test_parallel_calls_resume_only_when_the_last_is_answered(chat, scripted_server):
    thread = suspend(chat, scripted_server, COLOUR, GO, then="Both answered.")
    group = show_tool_prompts(chat, chat.pending_calls(thread))
    colour, go = group.prompts
    assert (colour.kind, go.kind) == ("choice", "confirm")
    requests = len(scripted_server.chat_requests)

    colour.submit("2")  # an option's number is an answer too

    assert colour.is_answered and colour.answer == "2" and not go.is_answered
    assert colour.buttons[1].button_style == "" and all(b.disabled for b in colour.buttons)
    assert "once the other questions are answered" in colour.children[-1].value
    assert len(scripted_server.chat_requests) == requests  # the turn still waits
    assert [c.call_id for c in chat.pending_calls(thread)] == [go.call.call_id]
    assert group.sink.data == {}

    go.buttons[0].click()

    assert group.is_answered
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["green", "yes"]
    assert group.sink.data["text/plain"] == "Both answered."
    assert chat.store.get(thread).turns[0].status == "complete"


def test_a_second_suspension_shows_its_prompts_below_the_resumed_answer(chat, scripted_server):
    scripted_server.script(
        title_reply(),
        Reply("All done.", after_tool="confirm"),
        Reply("Green, then.", after_tool="choose", tool_calls=[GO]),
        Reply("", when="please", tool_calls=[COLOUR]),
    )
    thread = chat.new_thread()
    chat.ask(thread, "please ask me")
    group = show_tool_prompts(chat, chat.pending_calls(thread))

    group.prompts[0].buttons[1].click()

    (tool,) = tool_messages(scripted_server)
    assert visible(group.sink.data["text/html"]) == (
        f"► choose → {len(tool['content'])} chars\nGreen, then.\n"
        "► confirm waits for your answer\n○ waiting for your answer"
    )
    (nested,) = group.followups.children
    assert isinstance(nested, PromptGroup)
    assert nested.prompts[0].question == "Delete the draft?"
    assert nested.children == (*nested.prompts, nested.sink.output, nested.followups)

    nested.prompts[0].buttons[0].click()

    assert nested.sink.data["text/plain"] == "All done."
    assert chat.store.get(thread).turns[0].status == "complete"
    assert group.followups.children == (nested,)


def test_submit_from_code_takes_the_same_path_and_a_second_answer_is_refused(
    chat, scripted_server
):
    thread = suspend(chat, scripted_server, COLOUR)
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    seen = []
    prompt.on_answer(lambda p, value: seen.append((p, value)))

    prompt.submit("blue")
    assert prompt.error.startswith("'blue' is not one of the options: red, green")
    assert seen == []

    prompt.submit("red")
    assert seen == [(prompt, "red")] and prompt.buttons[0].button_style == "success"

    prompt.submit("green")
    assert prompt.error.startswith("this question was already answered (red)")
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["red"]


def test_a_prompt_answered_elsewhere_locks_itself(chat, scripted_server):
    thread = suspend(chat, scripted_server, COLOUR)
    (prompt,) = show_tool_prompts(chat, chat.pending_calls(thread)).prompts
    chat.answer_tool_call(thread, "red")  # e.g. %chat --answer red

    prompt.buttons[1].click()

    assert prompt.error == "" and visible(prompt.children[-2].value) == ""  # not an error
    assert visible(prompt.children[-1].value) == "already answered: red"
    assert prompt.is_answered and all(b.disabled for b in prompt.buttons)
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["red"]


class Rate(ClientTool):
    name = "rate"
    description = "Ask the user to rate the summary from 1 to 5."
    parameters = {
        "type": "object",
        "properties": {"subject": {"type": "string"}},
        "required": ["subject"],
    }

    def call_requirements(self, arguments):
        return [Requirement("rate", target=arguments["subject"])]

    def prompt(self, arguments):
        return {
            "kind": "custom",
            "question": f"Rate {arguments['subject']} from 1 to 5",
            "markdown": f"**{arguments['subject']}**: *the summary text*",
            "placeholder": "1 to 5",
        }

    def parse_response(self, arguments, response):
        if str(response).strip() not in ("1", "2", "3", "4", "5"):
            raise InvalidToolAnswer(f"{response!r} is not a rating; answer 1, 2, 3, 4 or 5")
        return int(response)


def test_a_custom_tool_renders_its_markdown_and_checks_requirements_again(
    scripted_server, tmp_path
):
    store = tmp_path / "store"
    allowed = Chat(
        base_url=scripted_server.url, model="scripted-small", store=store, tools=[Rate()],
        permissions={"rate"},
    )
    thread = suspend(allowed, scripted_server, ("rate", {"subject": "the summary"}), then="Thanks.")
    # The kernel restarted and the Chat came back without the permission.
    denied = Chat(base_url=scripted_server.url, model="scripted-small", store=store, tools=[Rate()])
    (prompt,) = show_tool_prompts(denied, denied.pending_calls(thread)).prompts
    markdown = prompt.children[0]
    assert isinstance(markdown, widgets.Output)
    assert body(markdown.outputs[0]["data"]["text/html"]) == (
        "<p><strong>the summary</strong>: <em>the summary text</em></p>\n"
    )
    assert prompt.text_box.placeholder == "1 to 5"

    prompt.text_box.value = "4"
    prompt.submit_button.click()

    assert prompt.error.startswith("tool 'rate' needs permission 'rate' on 'the summary'")
    assert not prompt.is_answered and not prompt.text_box.disabled
    assert len(denied.pending_calls(thread)) == 1

    (prompt,) = show_tool_prompts(allowed, allowed.pending_calls(thread)).prompts
    prompt.submit("six")
    assert prompt.error == "'six' is not a rating; answer 1, 2, 3, 4 or 5"
    prompt.submit("4")
    assert prompt.is_answered and allowed.store.get(thread).turns[0].answer == "Thanks."
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["4"]


def test_the_prompt_reads_well_as_text(chat, scripted_server):
    thread = suspend(chat, scripted_server, COLOUR, NAME)
    group = show_tool_prompts(chat, chat.pending_calls(thread))
    assert repr(group) == (
        "Which colour? [red / green]; What is your name? [type an answer] — answer here "
        "or with %chat --answer"
    )
    group.prompts[0].submit("red")
    group.prompts[1].submit("Ada")
    assert repr(group) == "Which colour? → red; What is your name? → Ada"


# ---------------------------------------------------------------- panel


def labels(panel: ChatPanel) -> list[str]:
    return [t["label"] for t in panel.threads]


def test_the_panel_lists_the_store_s_threads_and_shows_the_newest(chat, scripted_server):
    first = chat.new_thread()
    chat.append_response(first, "What is 2+2?", "Four.", title="Sums")
    second = chat.new_thread()
    chat.append_response(second, "Capital of France?", "Paris.")

    panel = ChatPanel(chat=chat)

    assert labels(panel) == ["Untitled (#2)", "Sums (#1)"]
    assert panel.thread_id == second and panel.threads[0]["id"] == second
    assert "Capital of France?" in panel.conversation.text and "Paris." in panel.conversation.text
    assert panel.models == chat.list_models()
    assert panel.model == "scripted-small"
    assert panel.status == ""

    panel.select(first)

    assert panel.thread_id == first and panel.title == "Sums"
    assert "Four." in panel.conversation.text and "Paris." not in panel.conversation.text


def test_new_rename_and_delete(chat, scripted_server):
    panel = ChatPanel(chat=chat)
    assert panel.thread_id is None and labels(panel) == []

    panel.model = "scripted-large"
    panel.new_thread()

    (thread,) = [t.id for t in chat.threads()]
    assert panel.thread_id == thread and chat.store.get(thread).model == "scripted-large"

    panel.rename("Logo colours")
    assert chat.store.get(thread).title == "Logo colours"
    assert labels(panel) == [f"Logo colours (#{thread})"]

    panel.delete()  # asks first
    assert panel.confirm == f"Delete thread {thread}, “Logo colours”?" and labels(panel)
    panel.cancel_delete()
    assert panel.confirm == "" and chat.threads()

    panel.delete()
    panel.confirm_delete()
    assert chat.threads() == [] and labels(panel) == [] and panel.thread_id is None
    assert panel.status == f"Deleted thread {thread}."


def test_a_long_answer_is_drawn_in_the_panel_less_and_less_often(chat, scripted_server):
    # 4,000 characters over about 2 s: the interval grows from 0.1 s to 0.9 s.
    answer = "word " * 800
    scripted_server.script(title_reply(), Reply(answer, when="long", chunk_size=20, delay=0.01))
    panel = ChatPanel(chat=chat)
    drawn: list[str] = []
    panel.observe(lambda change: drawn.append(visible(change.new.get("html", ""))),
                  "streaming_message")  # fmt: skip
    panel.value = "long"
    panel.submit()
    chat.threads()
    sizes = [len(text) for text in drawn if text.startswith("word")]
    assert sizes == sorted(sizes) and 2 <= len(sizes) <= 8, sizes
    assert not panel.streaming and answer.strip() in panel.conversation.text


def test_send_streams_the_answer_into_the_conversation(chat, scripted_server):
    scripted_server.script(
        title_reply("Greeting Chat"),
        Reply("Hello! How can I help?", when="hello there", chunk_size=3),
    )
    panel = ChatPanel(chat=chat)
    ended = []
    panel.on_answer(lambda p, result: ended.append(result.status))

    panel.value = "hello there"
    panel.submit()

    (info,) = chat.threads()  # waits for the title, written after the answer
    assert panel.thread_id == info.id and info.title == "Greeting Chat"
    panel.sync()  # what the browser's next poll does
    assert labels(panel) == [f"Greeting Chat (#{info.id})"]
    assert "hello there" in panel.conversation.text
    assert "Hello! How can I help?" in panel.conversation.text
    assert panel.live.data == {} and panel.value == ""
    assert not panel.streaming and panel.streaming_message == {}
    assert ended == ["complete"]
    requests = scripted_server.chat_requests
    (request,) = [r for r in requests if r.messages[-1]["content"] == "hello there"]
    assert request.model == "scripted-small"


def test_an_error_shows_in_the_status_line_and_keeps_the_input(chat, scripted_server):
    thread = chat.new_thread()
    panel = ChatPanel(chat=chat)
    Chat(base_url=scripted_server.url, store=chat.store.path).delete_thread(thread)

    panel.value = "Is anyone there?"
    panel.submit()

    assert panel.status.startswith("‼ ") and f"thread id {thread}" in panel.status
    assert panel.value == "Is anyone there?"

    panel.value = "  "
    panel.submit()
    assert panel.status == "‼ the question is empty; type something to ask"

    panel.rename("x")
    assert "‼" in panel.status


def test_model_list_errors_show_in_the_panel(tmp_path):
    with ScriptedServer(api_key="right") as server:
        chat = Chat(
            base_url=server.url, api_key="wrong", model="scripted-small", store=tmp_path / "s"
        )
        panel = ChatPanel(chat=chat)
    assert panel.status.startswith("‼ ")
    assert "wrong" not in panel.status  # never the key
    assert panel.models == ["scripted-small"]


def test_tool_prompts_show_inline_and_the_answer_joins_the_conversation(chat, scripted_server):
    scripted_server.script(
        title_reply(),
        Reply("Green it is.", after_tool="choose"),
        Reply("Let me ask.", when="pick", tool_calls=[COLOUR]),
    )
    panel = ChatPanel(chat=chat)
    panel.value = "pick a colour"
    panel.submit()

    (group,) = panel.prompts
    assert "Let me ask." in panel.conversation.text
    assert "waiting for your answer" in panel.conversation.text

    group.prompts[0].buttons[1].click()

    assert panel.prompts == []
    assert "Let me ask.\n\n> *Which colour?* → **green**\n\nGreen it is." in (
        panel.conversation.text
    )
    assert "waiting" not in panel.conversation.text
    assert [answer_in(m) for m in tool_messages(scripted_server)] == ["green"]


def test_threads_made_elsewhere_appear_after_refresh_and_pending_calls_get_prompts(
    chat, scripted_server
):
    panel = ChatPanel(chat=chat)
    other = Chat(base_url=scripted_server.url, model="scripted-small", store=chat.store.path)
    thread = suspend(other, scripted_server, COLOUR, then="Red it is.")  # as %chat would
    assert labels(panel) == []

    panel.refresh()

    assert labels(panel) == [f"Untitled (#{thread})"] and panel.thread_id == thread
    (group,) = panel.prompts
    group.prompts[0].submit("red")
    assert "Red it is." in panel.conversation.text
    assert other.store.get(thread).turns[0].status == "complete"


def test_panel_takes_chat_settings_or_a_chat_not_both(chat, scripted_server, tmp_path):
    panel = ChatPanel(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    assert panel.chat.store.path == tmp_path / "s"
    with pytest.raises(ValueError, match="not both"):
        ChatPanel(chat=chat, model="x")


def test_the_thread_list_round_trips_json_safe_labels(chat):
    thread = chat.new_thread()
    chat.update_thread_title(thread, 'Quotes " and <tags>')
    panel = ChatPanel(chat=chat)
    assert json.loads(json.dumps(panel.threads)) == [
        {"id": thread, "title": 'Quotes " and <tags>', "turns": 0,
         "label": f'Quotes " and <tags> (#{thread})'}
    ]


def test_a_failed_turn_shows_its_error_and_gives_the_question_back(chat, scripted_server):
    scripted_server.script(Reply(status=400, error_message="the prompt is too long", when="break"))
    panel = ChatPanel(chat=chat)
    panel.value = "please break"
    panel.submit()

    assert panel.status.startswith("‼ ") and "the prompt is too long" in panel.status
    assert panel.value == "please break"
    (turn,) = chat.store.get(panel.thread_id).turns
    assert turn.status == "failed"
    html = panel.conversation.data["text/html"]
    assert visible(html) == f"You\nplease break\nAssistant · scripted-small\n‼ {turn.error}"
    assert body(html).endswith(f'<p class="nbchat-error">‼ {escape(turn.error)}</p>')
    assert panel.conversation.text.endswith(f"\n\n‼ {turn.error}")


def test_no_pending_calls_show_nothing(chat, capsys):
    group = show_tool_prompts(chat, [])
    assert group.prompts == () and group.children == () and group.sink is None
    assert capsys.readouterr().out == ""
