"""``%chat`` parsing and commands in a fresh InteractiveShell (plain-text rendering).

What reaches the magic, what reaches the server, and that every mistake is one
line. Rendering in notebooks is tested in real kernels (test_kernel_magics.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from nbchat import ChatHistory
from nbchat.jupyter.magic._syntax import protect_chat_questions, split_options
from nbchat.jupyter.magic.magics import ChatMagics, load, unload
from nbchat.store import ThreadStore
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import Ran, asked, is_title_body


def questions(server: ScriptedServer) -> list[str]:
    """The last user message of each chat request, title requests left out."""
    return [r.messages[-1]["content"] for r in server.chat_requests if not _is_title(r)]


def _is_title(request: Any) -> bool:
    return is_title_body({"messages": request.messages})


def store(tmp_path: Path) -> ThreadStore:
    import os

    return ThreadStore(os.environ["NBCHAT_STORE"], os.environ["NBCHAT_USER"])


def usage_error(ran: Ran) -> str:
    """The one line IPython printed for a UsageError (and nothing else on stderr)."""
    assert type(ran.error) is UsageError, ran
    lines = ran.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("UsageError: "), ran.err
    return lines[0].removeprefix("UsageError: ")


# -- a line that does not start with "-" is a question --------------------------------


@pytest.mark.parametrize(
    ("line", "question"),
    [
        ("What is 2+2?", "What is 2+2?"),
        ("What is Python?", "What is Python?"),
        ("Is x.y an attribute??", "Is x.y an attribute??"),
        ("What's up? Don't \"quote\" me?", "What's up? Don't \"quote\" me?"),
        ("list the threads", "list the threads"),
        ("help", "help"),
        ("   padded   ", "padded"),
        ("-- -5 + 3?", "-5 + 3?"),
        ("-m scripted-large What is Python?", "What is Python?"),
    ],
)
def test_a_line_is_a_question_whatever_its_words_and_last_character(
    run: Any, server: ScriptedServer, line: str, question: str
) -> None:
    server.script(Reply("An answer.", when=lambda body: not is_title_body(body)))
    ran = run(f"%chat {line}")
    assert ran.error is None, ran.err
    assert questions(server) == [question]
    assert ran.out == "An answer.\n"


def test_a_question_mark_question_is_a_question_in_an_assignment_too(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    server.script(Reply("A language.", when="Python"))
    ran = run("reply = %chat What is Python?")
    assert ran.error is None
    reply = ip.user_ns["reply"]
    assert (reply.text, str(reply), reply.status) == ("A language.", "A language.", "complete")
    assert ran.out == "A language.\n"  # rendered once, while streaming


def test_options_before_the_question_and_the_cell_body(
    run: Any, server: ScriptedServer
) -> None:
    ran = run("%%chat -m scripted-large\nExplain this:\n    {not a reference}\n")
    assert ran.error is None
    assert questions(server) == ["Explain this:\n    {not a reference}"]
    assert asked(server)[0].model == "scripted-large"


def test_text_after_cell_options_comes_before_the_cell_body(
    run: Any, server: ScriptedServer
) -> None:
    run("%%chat -n Summarize:\nline one\nline two\n")
    assert questions(server) == ["Summarize:\nline one\nline two"]


def test_help_is_generated_from_the_declared_options(run: Any, ip: InteractiveShell) -> None:
    ran = run("%chat?")
    assert ran.error is None
    assert "Chat with an LLM in threads that are kept." in ran.out
    parser = ip.magics_manager.registry["ChatMagics"].chat_magic.parser
    for action in parser._actions:
        for option in action.option_strings:
            assert option in ran.out
    for form in ("%chat QUESTION", "%%chat", "reply = %chat", "--answer [CALL] VALUE",
                 "--rename ID TITLE", "{name.attr}"):
        assert form in ran.out


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_flag_prints_the_help(run: Any, flag: str) -> None:
    ran = run(f"%chat {flag}")
    assert ran.error is None and "--no-interpolate" in ran.out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--bogus", "unrecognized arguments: --bogus"),
        ("-t seven hi", "argument -t/--thread: invalid int value: 'seven'"),
        ("--use", "argument --use: expected one argument"),
        ("--export 1", "argument --export: expected 2 arguments"),
        ("--list --models", "use one command at a time, not --list and --models"),
        ("--list now", "--list takes no question; got 'now'"),
        ("--rename 1", "give the new title: %chat --rename ID TITLE"),
        ("-n -t 1 hi", "-t asks in an existing thread; -n and -s start a new one: "
                       "use one or the other"),
        ("-H hist -t 1 hi", "-H asks with a ChatHistory, not in a thread: drop -t/-n"),
        ("-H nothing hi", "-H nothing: no such variable in this notebook; "
                          "make one with nothing = nbchat.ChatHistory()"),
        ("-H number hi", "-H number: number is a int, not a ChatHistory; "
                         "see chat.history(thread_id) or nbchat.ChatHistory()"),
        ("--show", "no current thread; pick one with %chat --use ID (see %chat --list)"),
        ("--show x", "thread ids are numbers, got 'x'; see %chat --list"),
        ("--export 1 out.txt", "invalid thread id 1 for user 'tester'; "
                               "see your threads with %chat --list"),
        ("--answer", "give the answer: %chat --answer VALUE (or --answer CALL VALUE)"),
        ("--answer yes", "no client-tool call is waiting for an answer"),
        ("", "ask something: %chat QUESTION, or %%chat with the question in the cell; "
             "see %chat? for the options"),
        ("--no-stream", "ask something: %chat QUESTION, or %%chat with the question in the "
                        "cell; see %chat? for the options"),
    ],
)
def test_mistakes_are_one_line_without_a_traceback(
    run: Any, ip: InteractiveShell, server: ScriptedServer, line: str, message: str
) -> None:
    ip.user_ns.update(hist=ChatHistory(), number=3)
    assert usage_error(run(f"%chat {line}")) == message
    assert server.requests == []  # nothing was asked


def test_an_unknown_thread_is_one_line(run: Any, server: ScriptedServer) -> None:
    message = usage_error(run("%chat -t 99 hello"))
    assert message == "invalid thread id 99 for user 'tester'; see your threads with %chat --list"


def test_a_refused_key_is_one_line_and_never_shown(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedServer(api_key="the-right-key") as guarded:
        monkeypatch.setenv("NBCHAT_BASE_URL", guarded.url)
        monkeypatch.setenv("NBCHAT_API_KEY", "sk-wrong-key-1234567890")
        ran = run("%chat hello")
    message = usage_error(ran)
    assert "NBCHAT_API_KEY" in message
    assert "sk-wrong" not in ran.out + ran.err


# -- options --------------------------------------------------------------------------


def test_the_first_question_starts_a_thread_and_later_ones_continue_it(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    run("%chat first")
    run("%chat second")
    assert [len(r.messages) for r in asked(server)] == [1, 3]
    assert ip.magics_manager.registry["ChatMagics"].chat.wait_for_titles(10)
    (info,) = store(tmp_path).threads()
    assert info.turns == 2 and info.title  # titled after the first answer
    assert ip.magics_manager.registry["ChatMagics"].thread_id == info.id


def test_new_thread_options(run: Any, ip: InteractiveShell, server: ScriptedServer,
                            tmp_path: Path) -> None:
    run("%chat in the first thread")
    ran = run("%chat -n -m scripted-large in a second thread")
    assert asked(server)[-1].model == "scripted-large"
    run("%chat -s 'You are terse.' in a third thread")
    assert asked(server)[-1].messages == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "in a third thread"},
    ]
    threads = {t.id: t for t in store(tmp_path).threads()}
    assert len(threads) == 3 and threads[2].model == "scripted-large"
    assert ip.magics_manager.registry["ChatMagics"].thread_id == 3
    assert ran.error is None


def test_thread_option_asks_there_without_switching(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    run("%chat one")
    run("%chat -n two")
    run("%chat -t 1 back in one")
    run("%chat still in two")
    assert [t.turns for t in sorted(store(tmp_path).threads(), key=lambda t: t.id)] == [2, 2]
    assert asked(server)[2].messages[0]["content"] == "one"


def test_model_option_on_an_existing_thread_is_for_that_question(
    run: Any, server: ScriptedServer, tmp_path: Path
) -> None:
    run("%chat hello")
    run("%chat -m scripted-large again")
    assert [r.model for r in asked(server)] == ["scripted-small", "scripted-large"]
    assert store(tmp_path).get(1).model == "scripted-small"


def test_interpolation_from_the_user_namespace(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    ip.user_ns["df"] = {"rows": 3}
    run("x = 41 + 1")
    ran = run('%chat {x} {df[rows]} {Out} {In[1]} {{x}} {"json": 1} {nope}')
    assert questions(server) == ['42 3 {} x = 41 + 1 {x} {"json": 1} {nope}']
    assert ran.err == ""
    assert ran.out.startswith("nbchat: not defined here, sent as typed: {nope} "
                              "(--no-interpolate sends all braces as typed)\n")


def test_no_interpolate_sends_braces_as_typed(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    ip.user_ns["x"] = 42
    ran = run("%chat --no-interpolate {x} {{x}} {nope}")
    assert questions(server) == ["{x} {{x}} {nope}"]
    assert ran.err == ""


def test_history_option_asks_with_a_chat_history_and_touches_no_thread(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    history = ChatHistory(system="Be brief.")
    history.add_question_answer("Earlier?", "Earlier answer.")
    ip.user_ns["hist"] = history
    server.script(Reply("With history."))
    ran = run("reply = %chat -H hist -m scripted-large And now?")
    assert ran.error is None and ip.user_ns["reply"].text == "With history."
    (request,) = server.chat_requests
    assert request.model == "scripted-large"
    assert [m["content"] for m in request.messages] == [
        "Be brief.", "Earlier?", "Earlier answer.", "And now?"
    ]
    assert len(history) == 2  # untouched
    assert store(tmp_path).threads() == []
    run("%chat -H hist -s 'Be verbose.' Once more?")
    assert server.chat_requests[-1].messages[0]["content"] == "Be verbose."
    assert history.system == "Be brief."


def test_no_stream_renders_once_at_the_end(run: Any, server: ScriptedServer) -> None:
    server.script(Reply("Once."))
    ran = run("%chat --no-stream hello")
    assert ran.out == "Once.\n"


def test_code_option_puts_the_first_code_block_into_the_next_cell(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    server.script(Reply("Like this:\n\n```python\nprint('hi')\nx = 1\n```\n\n```\nsecond\n```"))
    run("%chat --code how?")
    assert ip.rl_next_input == "print('hi')\nx = 1"


def test_code_option_without_a_code_block_says_so(run: Any, server: ScriptedServer) -> None:
    server.script(Reply("No code here."))
    ran = run("%chat --code how?")
    assert ran.err == ""
    assert "nbchat: the answer has no code block; no cell added\n" in ran.out


def test_error_asks_about_the_last_exception_with_its_traceback(
    run: Any, server: ScriptedServer
) -> None:
    run("def divide(a):\n    return a / 0\n")
    run("divide(1)")
    ran = run("%chat --error what now with {divide.__name__}?")
    assert ran.error is None
    (question,) = questions(server)
    assert question.startswith("I ran code in a Jupyter notebook and got the error below.")
    assert "ZeroDivisionError: division by zero" in question
    assert "return a / 0" in question  # the cell's source, from IPython's line cache
    assert question.endswith("what now with divide?")


def test_error_without_an_exception_says_so(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for name in ("last_exc", "last_value", "last_type", "last_traceback"):
        monkeypatch.delattr(sys, name, raising=False)
    assert usage_error(run("%chat --error")) == (
        "no exception in this session yet; run the failing cell, then %chat --error"
    )


# -- thread commands -------------------------------------------------------------------


def test_thread_commands(run: Any, ip: InteractiveShell, server: ScriptedServer,
                         tmp_path: Path) -> None:
    assert run("%chat --list").out == (
        "No threads yet for user 'tester'; ask something with %chat QUESTION\n"
    )
    assert run("%chat --new -m scripted-large").out == "Thread 1 (scripted-large) is now current.\n"
    run("%chat hello")
    run("%chat -n second")
    listing = [line.split("  ") for line in run("%chat --list").out.splitlines()]
    assert [[cell.strip() for cell in row if cell.strip()][:4] for row in listing] == [
        ["id", "title", "model", "turns"],
        ["2 *", "Question About Second", "scripted-small", "1"],
        ["1", "Question About Hello", "scripted-large", "1"],
    ]
    assert run("%chat --use 1").out.startswith("Thread 1 (")
    assert run("%chat --rename 1 My  'first' thread").out == (
        "Thread 1 is now titled \"My  'first' thread\".\n"
    )
    shown = run("%chat --show").out  # a terminal prints the text/plain
    assert shown.startswith(
        "My 'first' thread\n\nthread 1 · scripted-large · 1 turns\n\nYou: hello\n\n"
    )
    assert run("%chat --show 2").out.count("\n\nYou: ") == 1
    assert run("%chat -t 2 --show").out.startswith("Question About Second\n")  # -t names it
    assert run("%chat --delete 1").out == "Deleted thread 1.\n"
    assert [t.id for t in store(tmp_path).threads()] == [2]
    assert ip.magics_manager.registry["ChatMagics"].thread_id is None
    assert usage_error(run("%chat --use 1")).startswith("invalid thread id 1")


def test_models_lists_the_endpoint_models(run: Any) -> None:
    lines = run("%chat --models").out.splitlines()
    assert sorted(lines) == ["nbchat-demo", "scripted-large", "scripted-small (default)"]


def test_export_as_markdown_and_as_a_notebook(
    run: Any, server: ScriptedServer, tmp_path: Path
) -> None:
    import nbformat

    server.script(Reply("Four.", when="2+2"))
    run("%chat What is 2+2?")
    run("%chat --rename 1 Sums")
    assert usage_error(run("%chat --export 1 missing-dir/thread.md")) == (
        "cannot write missing-dir/thread.md: No such file or directory"
    )
    assert run("%chat --export 1 thread.md").out == "Exported thread 1 (1 turns) to thread.md\n"
    markdown = (tmp_path / "thread.md").read_text()
    assert markdown.startswith("### Sums\n") and "**You:** What is 2+2?\n\nFour.\n" in markdown
    run("%chat --export 1 thread.ipynb")
    notebook = nbformat.read(tmp_path / "thread.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert [(c.cell_type, c.source) for c in notebook.cells] == [
        ("markdown", "# Sums"), ("markdown", "**You:** What is 2+2?"), ("markdown", "Four."),
    ]
    assert notebook.cells[2].metadata["nbchat"] == {"thread": 1, "turn": 0, "role": "assistant"}
    assert usage_error(run("%chat --export 1 thread.txt")) == (
        "export to a .md or .ipynb file, not 'thread.txt'"
    )


def test_search_lists_hits_newest_first(
    run: Any, server: ScriptedServer, location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NBCHAT_STORE", location)  # a folder, or a postgresql:// URL
    server.script(Reply(when="pandas", chunks=["Read it with pandas.read_csv."]))
    run("%chat -n How do I load a CSV with pandas?")
    run("%chat -n Something else entirely")
    run("%chat -n More PANDAS please")
    lines = run("%chat --search load a CSV").out.splitlines()
    assert [line.split()[0] for line in lines] == ["1"]
    assert lines[0].endswith("turn 0: How do I load a CSV with pandas? — Read it with "
                             "pandas.read_csv.")  # fmt: skip
    run("%chat --list")  # the titles are in
    run("%chat -t 3 And pandas again?")
    lines = run("%chat --search Pandas").out.splitlines()
    assert [line.split()[0] for line in lines] == ["3", "3", "1"]
    assert run("%chat --search zebra").out == "Nothing in your threads matches 'zebra'\n"
    assert usage_error(run("%chat --search")) == "search for what? %chat --search TEXT"


# -- client tools ------------------------------------------------------------------------

CHOOSE = ("choose", {"question": "Which colour?", "options": ["red", "blue"]})


def test_a_suspended_turn_says_how_to_answer_and_answer_resumes_it(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        Reply("Let me ask.", tool_calls=[CHOOSE], when="paint"),
        Reply("Blue it is.", after_tool="choose"),
    )
    ran = run("%chat paint the shed")
    assert ran.out == (
        "Let me ask.\n► choose waits for your answer\n○ waiting for your answer\n"
        "? choose: Which colour? (one of: red, blue)\n"
        "   answer with: %chat -t 1 --answer VALUE\n"
    )
    assert usage_error(run("%chat --answer purple")) == (
        "'purple' is not one of the options: red, blue; answer with one of them or its "
        "number, 1 to 2"
    )
    ran = run("reply = %chat --answer 2")
    assert ran.error is None
    assert "Blue it is." in ran.out
    assert ip.user_ns["reply"].text == "Let me ask.\n\nBlue it is."
    assert store(tmp_path).get(1).turns[0].status == "complete"
    assert usage_error(run("%chat --answer 1")) == (
        "already answered: 'Which colour?' in thread 1 was answered (blue); "
        "nothing was sent again"
    )


def test_a_failed_resume_says_so_and_retry_sends_the_answer_again(
    run: Any, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(
        Reply("Let me ask.", tool_calls=[CHOOSE], when="paint"),
        Reply("Blue is a", after_tool="choose", cut_after=1, times=1),
        Reply("Blue it is.", after_tool="choose"),
    )
    run("%chat paint the shed")
    ran = run("%chat --answer blue")
    assert type(ran.error) is UsageError  # under the partial answer, marked incomplete
    assert ran.err.splitlines()[-1].endswith(
        "(the question is kept: %chat -t 1 --retry asks again)"
    )
    ran = run("%chat --retry")
    assert ran.error is None and ran.out.endswith("Blue it is.\n")
    [turn] = store(tmp_path).get(1).turns
    assert (turn.status, turn.answer) == ("complete", "Let me ask.\n\nBlue it is.")
    assert [a.answer for a in turn.answered] == ["blue"]


def test_answer_finds_the_waiting_thread_after_a_restart(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    server.script(
        Reply(tool_calls=[CHOOSE], when="paint"), Reply("Red.", after_tool="choose")
    )
    run("%chat paint")
    ip.magics_manager.registry["ChatMagics"].thread_id = None  # a new session
    ran = run('%chat --answer "red"')
    assert ran.out.startswith("► choose → ") and "Red." in ran.out


def test_answer_after_a_restart_names_the_damaged_waiting_call(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    server.script(Reply(tool_calls=[CHOOSE], when="paint"))
    run("%chat paint")
    ip.magics_manager.registry["ChatMagics"].thread_id = None  # a new session
    path = Path(store(tmp_path).location(1))
    data = json.loads(path.read_text())
    del data["turns"]["1"]["pending"][0]["call"]
    path.write_text(json.dumps(data))
    assert usage_error(run("%chat --answer blue")).startswith(
        f"{path} holds a damaged record in turn 0 "
    )


def test_answer_names_the_call_when_several_wait(
    run: Any, server: ScriptedServer
) -> None:
    server.script(
        Reply(tool_calls=[CHOOSE, ("confirm", {"question": "Sure?"})], when="paint"),
        Reply("Done.", after_tool="confirm"),
    )
    ran = run("%chat paint")
    hints = [line for line in ran.out.splitlines() if "answer with:" in line]
    assert len(hints) == 2 and "--answer call_" in hints[0]
    calls = [line.split("--answer ")[1].split()[0] for line in hints]
    run(f"%chat --answer {calls[0]} red")
    ran = run(f"%chat --answer {calls[1]} yes")
    assert "Done." in ran.out


# -- the input transformer and loading ---------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("%chat What is Python?\n", "get_ipython().run_line_magic('chat', 'What is Python?')\n"),
        ("x = %chat Why?\n", "x = get_ipython().run_line_magic('chat', 'Why?')\n"),
        ("if True:\n    %chat Why?\n",
         "if True:\n    get_ipython().run_line_magic('chat', 'Why?')\n"),
        ("%chat -m small Why?\n", "get_ipython().run_line_magic('chat', '-m small Why?')\n"),
    ],
)
def test_the_transformer_keeps_the_question_mark(cell: str, expected: str) -> None:
    assert "".join(protect_chat_questions(cell.splitlines(keepends=True))) == expected


@pytest.mark.parametrize(
    "cell",
    [
        "%chat?\n",
        "%chat??\n",
        "%chatter what?\n",
        "x?\n",
        "%chat no question mark\n",
        "%%chat\n%chat What is Python?\n",  # a cell magic's body is its own
        's = """\n%chat inside a string?\n"""\n',
        "%chat continued \\\nline?\n",
        "# %chat in a comment?\n",
    ],
)
def test_the_transformer_leaves_everything_else_alone(cell: str) -> None:
    lines = cell.splitlines(keepends=True)
    assert protect_chat_questions(lines) == lines


def test_the_transformer_never_raises_on_broken_input() -> None:
    lines = ["%chat Why?\n", "def f(:\n", "    '''unterminated\n"]
    assert protect_chat_questions(lines)[0] == "get_ipython().run_line_magic('chat', 'Why?')\n"


@pytest.mark.parametrize(
    ("line", "words", "rest"),
    [
        ("-m gpt What's up?", ["-m", "gpt"], "What's up?"),
        ('-s "be terse" -n hi there', ["-s", "be terse", "-n"], "hi there"),
        ("--show", ["--show"], ""),
        ("--show 3", ["--show", "3"], ""),
        ("--show --list", ["--show", "--list"], ""),
        ('--export 3 "my file.md"', ["--export", "3", "my file.md"], ""),
        ("--rename 3 New  'title'", ["--rename", "3"], "New  'title'"),
        ("--model=x q", ["--model=x"], "q"),
        ("--sys x q", ["--sys", "x"], "q"),
        ("--mod x q", ["--mod"], "x q"),  # --model or --models: argparse will say so
        ("-mx q", ["-mx"], "q"),
        ("-- -5", [], "-5"),
        ("-s it's odd", ["-s", "it's"], "odd"),
    ],
)
def test_split_options_keeps_the_question_as_typed(
    ip: InteractiveShell, line: str, words: list[str], rest: str
) -> None:
    magics = ip.magics_manager.registry["ChatMagics"]
    assert split_options(line, magics._arity) == (words, rest)


def test_load_is_idempotent_and_unload_removes_everything(ip: InteractiveShell) -> None:
    load(ip)
    ip.run_line_magic("load_ext", "nbchat")
    assert sum(isinstance(m, ChatMagics) for m in ip.configurables) == 1
    assert ip.input_transformers_cleanup.count(protect_chat_questions) == 1
    unload(ip)
    assert "chat" not in ip.magics_manager.magics["line"]
    assert "chat" not in ip.magics_manager.magics["cell"]
    assert protect_chat_questions not in ip.input_transformers_cleanup
    assert not any(isinstance(m, ChatMagics) for m in ip.configurables)


def test_load_replaces_the_startup_file_stand_in(ip: InteractiveShell) -> None:
    def protect_chat_questions(lines: list[str]) -> list[str]:  # the startup file's
        return lines

    unload(ip)
    ip.input_transformers_cleanup.append(protect_chat_questions)
    load(ip)
    names = [getattr(t, "__name__", "") for t in ip.input_transformers_cleanup]
    assert names.count("protect_chat_questions") == 1


def test_settings_are_traits_passed_to_chat(
    run: Any, ip: InteractiveShell, server: ScriptedServer, tmp_path: Path
) -> None:
    run(f"%config ChatMagics.store = {str(tmp_path / 'elsewhere')!r}")
    run("%config ChatMagics.user = 'bea'")
    run("%config ChatMagics.model = 'scripted-large'")
    run("%config ChatMagics.system = 'Be kind.'")
    run("%chat hello")
    magics = ip.magics_manager.registry["ChatMagics"]
    assert (magics.chat.user, magics.chat.store.path) == ("bea", tmp_path / "elsewhere")
    assert magics.thread_id == 1
    run("%config ChatMagics.user = 'cy'")
    assert magics.chat.user == "cy" and magics.thread_id is None  # not cy's thread
    (request,) = asked(server)
    assert request.model == "scripted-large"
    assert request.messages[0] == {"role": "system", "content": "Be kind."}


def test_an_environment_change_takes_effect_at_the_next_question(
    run: Any, ip: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("%chat hello")
    with ScriptedServer(Reply("From the other server.")) as other:
        run(f"%env NBCHAT_BASE_URL={other.url}")
        ran = run("%chat -n hello")
        assert ran.out == "From the other server.\n"


def test_a_terminal_prints_the_answer_once_and_no_empty_out_prompt(
    run: Any, ip: InteractiveShell, server: ScriptedServer
) -> None:
    server.script(Reply("Just once."))
    assert run("%chat hello").out == "Just once.\n"
    assert run("%%chat\nhello").out == "Just once.\n"
    assert run("r = %chat hello").out == "Just once.\n"
    assert run("r").out == "Out[4]: Just once.\n"  # shown again when asked for


def test_importing_the_magics_is_cheap_and_registers_nothing() -> None:
    import subprocess
    import sys

    code = (
        "import sys, nbchat.jupyter.magic.magics\n"
        "from IPython import get_ipython\n"
        "heavy = [m for m in ('ipywidgets', 'nbchat.jupyter.panel.widget') if m in sys.modules]\n"
        "print(heavy, get_ipython())"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout == "[] None\n"


def test_key_needs_an_endpoint_to_be_given_for(run, monkeypatch):
    monkeypatch.delenv("NBCHAT_BASE_URL")
    ran = run("%chat --key")
    assert str(ran.error) == (
        "no endpoint is set for the key: set one first, e.g. "
        "%env NBCHAT_BASE_URL=https://api.openai.com/v1, then %chat --key"
    )


def test_a_dollar_name_in_a_question_is_sent_as_typed(run: Any, ip: InteractiveShell,
                                                      server: ScriptedServer) -> None:
    ip.user_ns["price"] = 5
    run("%chat Does $price mean the variable?")
    run("%chat -n What is {price} times two")
    assert questions(server) == ["Does $price mean the variable?", "What is 5 times two"]
