"""Client-tool prompts in real kernels: suspend, answer later, restart, answer.

The cells run in a real IPython kernel, sent as JupyterLab sends them
(``kernel_helpers.Kernel``, so nbchat renders live and offers widget prompts),
and whose nbchat talks to the scripted server of this process. An answer from
a later cell updates the first cell's display: ``outputs_from`` applies both
cells' messages as a front end does. A second kernel on the same store
stands for a kernel restart. The last test runs with nbclient, as nbval does.
"""

from __future__ import annotations

import pytest

from kernel_helpers import Kernel, kernel_env, outputs_from, run_notebook
from nbchat import Chat
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel

WIDGET = "application/vnd.jupyter.widget-view+json"
COLOUR = ("choose", {"question": "Which colour?", "options": ["red", "green"]})
GO = ("confirm", {"question": "Go ahead?"})
SETUP = """\
%load_ext nbchat
import nbchat
from nbchat.jupyter.panel.widget import pending_prompts, show_tool_prompts"""
WAITING = "Which colour? [red / green] — answer here or with %chat --answer"

RATE_TOOL = """\
import nbchat
from nbchat.jupyter.panel.widget import show_tool_prompts

class Rate(nbchat.ClientTool):
    name = "rate"
    description = "Ask the user to rate the summary from 1 to 5."
    parameters = {"type": "object", "properties": {"subject": {"type": "string"}},
                  "required": ["subject"]}

    def call_requirements(self, arguments):
        return [nbchat.Requirement("rate", target=arguments["subject"])]
"""


@pytest.fixture
def env(scripted_server, tmp_path):
    return kernel_env(
        tmp_path / "kernel", NBCHAT_BASE_URL=scripted_server.url, NBCHAT_MODEL="scripted-small",
        NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER="ana",
    )


@pytest.fixture
def store_chat(scripted_server, env) -> Chat:
    """The test's own view of the kernels' store."""
    return Chat(base_url=scripted_server.url, store=env["NBCHAT_STORE"], user="ana")


def script(server: ScriptedServer, *calls, then: str = "Green it is.") -> None:
    server.script(
        Reply("Colours", when=lambda body: "title" in body["messages"][0]["content"]),
        *[Reply(then, after_tool=name) for name in sorted({name for name, _ in calls})],
        Reply("Let me ask.", when="please", tool_calls=list(calls)),
    )


def prompt_texts(outputs) -> list[str]:
    return [o["data"]["text/plain"] for o in outputs if WIDGET in o.get("data", {})]


def answer_shown(outputs) -> str:
    """The display reserved for the resumed answer: the one right after the prompts."""
    index = next(i for i, o in enumerate(outputs) if WIDGET in o.get("data", {}))
    return outputs[index + 1]["data"].get("text/plain", "")


def test_a_suspended_cell_finishes_with_a_prompt_widget(scripted_server, env, store_chat):
    script(scripted_server, COLOUR)
    with Kernel(env) as k:
        k.ok(SETUP)
        asked = k.ok("%%chat\nplease pick a colour")  # returns: the kernel is free

        outputs = asked.outputs
        assert [o["output_type"] for o in outputs] == ["display_data"] * 4
        assert outputs[0]["data"]["text/plain"].startswith("Let me ask.")
        assert prompt_texts(outputs) == [WAITING, ""]  # the prompts, the follow-up area
        assert answer_shown(outputs) == ""  # reserved, empty until the answer comes
        shown = k.ok("p, = pending_prompts()\nprint([b.description for b in p.buttons])")
        assert shown.stdout == "['red', 'green']\n"
    (call,) = store_chat.pending_calls()
    assert (call.tool, call.prompt.options) == ("choose", ("red", "green"))


def test_answer_from_a_later_cell_resumes_below_the_prompt(scripted_server, env, store_chat):
    script(scripted_server, COLOUR)
    with Kernel(env) as k:
        k.ok(SETUP)
        asked = k.ok("%%chat\nplease pick a colour")
        rejected = k.ok("p, = pending_prompts()\np.submit('blue')\nprint(p.error)")
        assert rejected.stdout.startswith("'blue' is not one of the options: red, green")
        assert len(store_chat.pending_calls()) == 1

        clicked = k.ok("p.buttons[1].click()")

        assert clicked.outputs == []  # the answer goes below the prompt, not here
        assert answer_shown(outputs_from(asked.messages + clicked.messages)) == "Green it is."
        assert k.ok("print(p.is_answered, pending_prompts())").stdout == "True []\n"
    turn = store_chat.store.get(1).turns[0]
    assert turn.status == "complete" and turn.answer.endswith("Green it is.")
    assert turn.messages[1]["content"].startswith("<answer>\ngreen\n</answer>")


def test_answer_with_the_magic_locks_the_prompt_left_behind(scripted_server, env, store_chat):
    script(scripted_server, COLOUR)
    with Kernel(env) as k:
        k.ok(SETUP)
        k.ok("%%chat\nplease pick a colour")
        k.ok("p, = pending_prompts()")

        answered = k.ok("%chat --answer green")

        assert "Green it is." in answered.text()
        looked = k.ok("print(pending_prompts(), p.is_answered, [b.disabled for b in p.buttons])")
        assert looked.stdout == "[] True [True, True]\n"
    assert store_chat.pending_calls() == []


def test_parallel_calls_each_get_a_prompt(scripted_server, env, store_chat):
    script(scripted_server, COLOUR, GO, then="Both done.")
    with Kernel(env) as k:
        k.ok(SETUP)
        asked = k.ok("%%chat\nplease ask two things")
        assert prompt_texts(asked.outputs)[0] == (
            "Which colour? [red / green]; Go ahead? [Yes / No] — answer here or with "
            "%chat --answer"
        )
        first = k.ok("colour, go = pending_prompts()\ncolour.submit('red')")
        assert answer_shown(outputs_from(asked.messages + first.messages)) == ""
        assert store_chat.store.get(1).turns[0].status == "suspended"

        last = k.ok("go.buttons[0].click()")

        assert answer_shown(outputs_from(asked.messages + first.messages + last.messages)) == (
            "Both done."
        )
    tools = [m for m in store_chat.store.get(1).turns[0].messages if m["role"] == "tool"]
    assert [m["content"].split("\n")[1] for m in tools] == ["red", "yes"]


def test_after_a_restart_the_pending_call_gets_a_live_prompt_again(
    scripted_server, env, store_chat
):
    script(scripted_server, COLOUR)
    with Kernel(env) as k:
        k.ok(SETUP)
        k.ok("%%chat\nplease pick a colour")
    with Kernel(env) as k:  # a new kernel: nothing but the store is left
        shown = k.ok(f"{SETUP}\nchat = nbchat.Chat()\n"
                     "group = show_tool_prompts(chat, chat.pending_calls())")
        assert prompt_texts(shown.outputs)[0] == WAITING

        answered = k.ok("group.prompts[0].submit('green')")

        assert answer_shown(outputs_from(shown.messages + answered.messages)) == "Green it is."
    assert store_chat.store.get(1).turns[0].status == "complete"


def test_requirements_are_checked_again_when_the_answer_arrives(
    scripted_server, env, store_chat
):
    scripted_server.script(
        Reply("Thanks for rating.", after_tool="rate"),
        Reply("", when="please", tool_calls=[("rate", {"subject": "the summary"})]),
    )
    with Kernel(env) as k:
        k.ok(RATE_TOOL)
        asked = k.ok(
            "from nbchat.jupyter.cell.render import render_turn\n"
            "chat = nbchat.Chat(tools=[Rate()], permissions={'rate'})\n"
            "render_turn(chat.iter_ask(chat.new_thread(), 'please rate it'), chat=chat,\n"
            "            prompts=show_tool_prompts);"
        )
        assert prompt_texts(asked.outputs)[0] == (
            "Ask the user to rate the summary from 1 to 5. [type an answer] — answer here or "
            "with %chat --answer"
        )
    with Kernel(env) as k:  # restarted, and the permission is gone
        k.ok(RATE_TOOL)
        shown = k.ok(
            "chat = nbchat.Chat(tools=[Rate()])\n"
            "group = show_tool_prompts(chat, chat.pending_calls())\n"
            "p = group.prompts[0]\np.text_box.value = '4'\np.submit_button.click()\n"
            "print(p.error)"
        )
        assert shown.stdout.startswith(
            "tool 'rate' needs permission 'rate' on 'the summary', which user 'ana' does not have"
        )
        assert len(store_chat.pending_calls()) == 1

        granted = k.ok("chat.permissions = frozenset({'rate'})\np.submit_button.click()")

        assert answer_shown(outputs_from(shown.messages + granted.messages)) == (
            "Thanks for rating."
        )


def test_headless_run_answers_from_a_later_cell_and_saves_the_final_answer(
    scripted_server, env
):
    script(scripted_server, COLOUR)
    notebook = run_notebook(
        [
            f"{SETUP}\nchat = nbchat.Chat()\nthread = chat.new_thread()\n"
            "chat.ask(thread, 'please pick a colour').status",
            "group = show_tool_prompts(chat, chat.pending_calls(thread))",
            "group.prompts[0].buttons[0].click()",
        ],
        env,
    )
    asked, shown, clicked = notebook.cells
    assert asked.outputs[0]["data"]["text/plain"] == "'suspended'"
    assert prompt_texts(shown.outputs)[0] == WAITING
    # nbclient applied the later cell's update to the display reserved in this one.
    assert answer_shown(shown.outputs) == "Green it is."
    assert clicked.outputs == []


def test_the_panel_and_the_magics_share_one_store(scripted_server, env, store_chat):
    scripted_server.script(
        Reply("Hello from the panel.", when="from the panel"),
        Reply("Hello from the magic.", when="from the magic"),
    )
    with Kernel(env) as k:
        k.ok(SETUP)
        k.ok("panel = nbchat.panel()\npanel.value = 'hi from the panel'\n"
             "panel.submit()")
        listed = k.ok("%chat --list")
        assert "hi from the panel" not in listed.text()  # titles, not questions
        assert "1 " in listed.text() and "scripted-small" in listed.text()

        k.ok("%chat hi from the magic")
        shown = k.ok("panel.refresh()\n"
                     "print([t['id'] for t in panel.threads], panel.thread_id)")

        assert shown.stdout == "[2, 1] 1\n"  # the magic's thread is listed; the panel stays
    assert [t.id for t in store_chat.threads()] == [2, 1]
