"""``%chat`` in real kernels against the scripted server: what a notebook shows and saves.

Most tests share one kernel (each asks in its own thread where it matters);
``interactive=True`` runs cells as JupyterLab sends them, ``False`` as
nbclient and nbval do. The auto-load tests build the wheel, install it into a
throwaway venv and start kernels of that venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel_helpers import CellRun, Kernel, kernel_env, run_notebook
from markup_helpers import body, shows, visible
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.store import ThreadStore
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]
USER = "kim"
WIDGET = "application/vnd.jupyter.widget-view+json"


def not_title(body: dict[str, Any]) -> bool:
    return body["messages"][0].get("content") != TITLE_PROMPT


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as started:
        yield started


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def env(server: ScriptedServer, store_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return kernel_env(
        tmp_path_factory.mktemp("kernel"), NBCHAT_BASE_URL=server.url,
        NBCHAT_STORE=str(store_path), NBCHAT_USER=USER, NBCHAT_MODEL="scripted-small",
    )


@pytest.fixture(scope="module")
def shared_kernel(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[Kernel]:
    with Kernel(env, cwd=tmp_path_factory.mktemp("cwd")) as kernel:
        kernel.ok("%load_ext nbchat")
        yield kernel


@pytest.fixture
def kernel(shared_kernel: Kernel, server: ScriptedServer) -> Kernel:
    server.reset()
    shared_kernel.ok("%config ChatMagics.live = None")
    return shared_kernel


def only_output(run: CellRun) -> dict[str, Any]:
    assert run.status == "ok", run.text()
    (output,) = run.outputs
    return output


def asked(server: ScriptedServer) -> list[Any]:
    return [r for r in server.chat_requests if not_title(r.body)]


def one_line_error(run: CellRun) -> str:
    """A failed cell that shows one stderr line and no traceback.

    A live placeholder shown before the failure stays as an empty display.
    """
    assert run.status == "error"
    assert not run.of_type("error")
    displays = [o for o in run.outputs if o["output_type"] == "display_data"]
    assert [o["data"] for o in displays] in ([], [{"text/html": "", "text/plain": ""}])
    (output,) = [o for o in run.outputs if o["output_type"] != "display_data"]
    assert output["output_type"] == "stream" and output["name"] == "stderr"
    lines = output["text"].splitlines()
    assert len(lines) == 1 and lines[0].startswith("UsageError: "), output["text"]
    return lines[0].removeprefix("UsageError: ")


# -- rendering ---------------------------------------------------------------------------


def test_a_question_streams_into_one_display_and_saves_the_final_answer(
    kernel: Kernel, server: ScriptedServer
) -> None:
    server.script(Reply("Python is **a language**.", when="Python", chunk_size=4))
    run = kernel.run("%chat -n What is Python?")
    kinds = [m["header"]["msg_type"] for m in run.messages]
    assert kinds[0] == "display_data" and set(kinds[1:]) == {"update_display_data"}
    placeholder = run.messages[0]["content"]["data"]
    assert shows(placeholder) == {
        "text/html": '<p class="nbchat-dim">… waiting for scripted-small</p>',
        "text/plain": "… waiting for scripted-small",
    }
    assert {tuple(m["content"]["data"]) for m in run.messages[1:-1]} <= {("text/html",)}
    output = only_output(run)
    assert shows(output["data"]) == {"text/html": "<p>Python is <strong>a language</strong>.</p>\n",
                                     "text/plain": "Python is **a language**."}
    thread = output["metadata"]["nbchat"]["thread"]
    assert output["metadata"] == {"nbchat": {"thread": thread, "turn": 0,
                                             "model": "scripted-small", "status": "complete"}}
    assert [r.messages[-1]["content"] for r in asked(server)] == ["What is Python?"]


def test_a_new_thread_gets_a_title_after_its_first_answer(
    kernel: Kernel, server: ScriptedServer, store_path: Path
) -> None:
    server.script(Reply("Tidy Data Frames", when=lambda b: not not_title(b)),
                  Reply("Use melt."))
    run = kernel.ok("%chat -n How do I reshape a data frame?")
    thread = only_output(run)["metadata"]["nbchat"]["thread"]
    store = ThreadStore(store_path, USER)
    deadline = time.monotonic() + 30  # the title is asked for after the cell is done
    while not store.get(thread).title and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get(thread).title == "Tidy Data Frames"


def test_non_interactive_runs_render_once(kernel: Kernel, server: ScriptedServer) -> None:
    server.script(Reply("Once, at the end.", chunk_size=2))
    run = kernel.run("%chat -n hello", interactive=False)
    assert [m["header"]["msg_type"] for m in run.messages] == ["display_data"]
    assert only_output(run)["data"]["text/plain"] == "Once, at the end."


def test_no_stream_renders_once_in_an_interactive_run(kernel: Kernel,
                                                       server: ScriptedServer) -> None:
    server.script(Reply("Once.", chunk_size=1))
    run = kernel.run("%chat -n --no-stream hello")
    assert [m["header"]["msg_type"] for m in run.messages] == ["display_data"]


def test_display_updates_are_coalesced(kernel: Kernel, server: ScriptedServer) -> None:
    server.script(Reply(tokens=5000, delay=0.0002, when=not_title))
    kernel.ok("%config ChatMagics.live = True")
    arrivals: list[float] = []
    run = kernel.run("%chat -n stream a long answer", interactive=False,
                     on_message=lambda m, k: arrivals.append(time.monotonic()))
    displays = run.display_messages
    streamed = arrivals[-1] - arrivals[0]
    assert 3 <= len(displays) <= 12 * streamed + 2, (len(displays), streamed)
    final = only_output(run)["data"]["text/plain"]
    assert final.split() == [f"word{i}" for i in range(5000)]


def test_reply_is_captured_and_not_rendered_twice(kernel: Kernel,
                                                   server: ScriptedServer) -> None:
    server.script(Reply("Captured."))
    run = kernel.run("reply = %chat -n capture me")
    assert only_output(run)["data"]["text/plain"] == "Captured."
    run = kernel.run("%chat -n as the last expression")
    assert only_output(run)["output_type"] == "display_data"  # no execute_result repeating it
    assert not run.of_type("execute_result")
    run = kernel.run("print(reply.text, str(reply) == reply.text, reply.status)")
    assert run.stdout == "Captured. True complete\n"
    later = only_output(kernel.run("reply"))  # asked for in a later cell: shown again
    assert shows(later["data"]) == {"text/html": "<p>Captured.</p>\n", "text/plain": "Captured."}


def test_interrupt_stops_the_stream_and_keeps_the_partial_answer(
    kernel: Kernel, server: ScriptedServer, store_path: Path
) -> None:
    server.script(Reply(tokens=400, delay=0.05, when="slowly"))
    at_interrupt: list[int] = []

    def interrupt_once_text_shows(message: dict[str, Any], kernel: Kernel) -> None:
        data = message["content"].get("data", {})
        if not at_interrupt and "word" in visible(data.get("text/html", "")):
            at_interrupt.append(server.chat_requests[-1].chunks_sent)
            kernel.interrupt()

    run = kernel.run("%chat -n answer slowly", on_message=interrupt_once_text_shows)
    request = asked(server)[-1]
    server.wait_for(lambda: request.disconnected)
    # 0.05 s a chunk: stopped within half a second of the interrupt
    assert request.chunks_sent - at_interrupt[0] <= 10
    assert not request.completed
    output = only_output(run)  # swallowed: no traceback, the cell succeeds
    shown = output["data"]["text/plain"]
    partial, note = shown.split("\n\n")
    assert note == "■ interrupted — the partial answer is kept in the thread"
    assert partial.startswith("word0")
    meta = output["metadata"]["nbchat"]
    assert meta["status"] == "interrupted"
    turn = ThreadStore(store_path, USER).get(meta["thread"]).turns[-1]
    assert (turn.status, turn.answer.strip()) == ("interrupted", partial.strip())
    server.script(Reply("Still here."))
    assert kernel.ok("%chat again").outputs[-1]["data"]["text/plain"] == "Still here."


# -- the ? of questions, help, errors ---------------------------------------------------------


def test_question_marks_reach_the_magic(kernel: Kernel, server: ScriptedServer) -> None:
    server.script(Reply("Yes.", when=not_title))
    kernel.ok("%chat -n Is x.y a thing?")
    kernel.ok("r = %chat What is Python?")
    kernel.ok("if True:\n    %chat Why??\n")
    assert [r.messages[-1]["content"] for r in asked(server)] == [
        "Is x.y a thing?", "What is Python?", "Why??"
    ]


def test_help(kernel: Kernel) -> None:
    run = kernel.ok("%chat?")
    (page,) = run.reply["payload"]
    assert "Chat with an LLM in threads that are kept." in page["data"]["text/plain"]


def test_errors_are_one_line(kernel: Kernel, server: ScriptedServer) -> None:
    assert one_line_error(kernel.run("%chat -t 99 hello")) == (
        f"invalid thread id 99 for user '{USER}'; see your threads with %chat --list"
    )
    assert one_line_error(kernel.run("%chat --nope")) == "unrecognized arguments: --nope"
    assert one_line_error(kernel.run("%%chat -t x\nhello")) == (
        "argument -t/--thread: invalid int value: 'x'"
    )


def test_a_refused_key_is_one_line_and_the_key_is_never_shown(kernel: Kernel) -> None:
    key = "sk-planted-key-0123456789"
    with ScriptedServer(api_key="the-right-one") as guarded:
        kernel.ok(f"import os; os.environ['NBCHAT_API_KEY'] = {key!r}")
        kernel.ok(f"%config ChatMagics.base_url = {guarded.url!r}")
        try:
            run = kernel.run("%chat -n hello")
        finally:
            kernel.ok("%config ChatMagics.base_url = None\ndel os.environ['NBCHAT_API_KEY']")
    assert "NBCHAT_API_KEY" in one_line_error(run)
    assert "planted" not in json.dumps(run.messages, default=str)
    assert "planted" not in json.dumps(run.reply)


def test_an_api_key_in_config_is_refused_in_one_line_and_kept_nowhere(kernel: Kernel) -> None:
    key = "sk-planted-config-key-0123456789"
    run = kernel.run(f"%config ChatMagics.api_key = {key!r}")
    assert run.status == "ok" and not run.of_type("error")
    assert [line for line in run.stderr.splitlines() if line] == [
        "UsageError: ChatMagics.api_key is not a setting, and the value was discarded; give the "
        "key with %chat --key (a hidden prompt) or the NBCHAT_API_KEY environment variable, set "
        "before starting Jupyter"
    ]
    assert (run.stdout, run.outputs[1:]) == ("", [])
    shown = kernel.ok("%config ChatMagics")
    assert "ChatMagics.api_key" in shown.stdout and "NBCHAT_API_KEY" in shown.stdout
    probe = kernel.ok(
        "ip = get_ipython()\n"
        "print(sorted({repr(c.config) for c in (ip, *ip.configurables)}).__repr__().count('sk-'),"
        " any('api_key' in c.config['ChatMagics'] for c in (ip, *ip.configurables)),"
        " ip.run_line_magic('config', 'ChatMagics.api_key'))"
    )
    assert probe.stdout == "0 False None\n"
    for message in (*run.messages, *shown.messages, *probe.messages):
        assert "planted" not in json.dumps(message, default=str)


def test_key_asks_at_a_hidden_prompt_and_the_key_is_used_but_shown_nowhere(
    kernel: Kernel, server: ScriptedServer, store_path: Path
) -> None:
    key = "sk-typed-at-the-prompt-0123456789"
    with ScriptedServer(api_key=key) as guarded:
        url = guarded.url
        kernel.ok(f"%config ChatMagics.base_url = {url!r}")
        try:
            refused = kernel.run("%chat -n before the key")
            given = kernel.ok("%chat --key",
                              stdin=lambda request: key if request["password"] else "n")
            asked_after = kernel.ok("%chat -n after the key", interactive=False)
            probe = kernel.ok("import os\nprint(sum('typed-at' in v for v in os.environ.values()))")
        finally:
            kernel.ok("%config ChatMagics.base_url = None")
        headers = [r.headers.get("Authorization") for r in guarded.chat_requests]
    elsewhere = kernel.ok("%chat -n another endpoint", interactive=False)
    assert [r.headers.get("Authorization") for r in asked(server)] == [None]  # not sent there
    assert "NBCHAT_API_KEY" in one_line_error(refused)
    assert given.input_requests[0] == {"prompt": "API key (hidden): ", "password": True}
    assert given.input_requests[1]["prompt"].startswith("Remember it for 127.0.0.1-")
    assert given.input_requests[1]["prompt"].endswith("? [y/N] ")
    assert given.stdout == (
        f"The key for {url} is set in this kernel's memory only; it was not shown and "
        "is saved nowhere.\n"
    )
    assert "offline demo model" in asked_after.text()  # the guarded server answered
    assert headers[-1] == f"Bearer {key}" and headers[0] is None
    assert probe.stdout == "0\n"
    for run in (refused, given, asked_after, probe, elsewhere):
        assert "typed-at" not in json.dumps([run.messages, run.outputs, run.reply], default=str)
    stored = [path.read_text() for path in store_path.rglob("*.json")]
    assert stored and not any("typed-at" in text for text in stored)


def test_key_without_a_person_says_how_to_set_the_key(kernel: Kernel) -> None:
    assert one_line_error(kernel.run("%chat --key", interactive=False)) == (
        "%chat --key asks at a hidden prompt, and this notebook cannot show one (it runs "
        "without a person, e.g. under nbclient); set NBCHAT_API_KEY in the environment "
        "before starting Jupyter instead"
    )
    assert one_line_error(kernel.run("%chat --key sk-typed-in-the-cell")) == (
        "--key takes nothing after it: run %chat --key alone and type the key at its hidden "
        "prompt, not in the cell (cells are saved)"
    )


def test_a_failed_stream_keeps_the_partial_text_and_says_why(kernel: Kernel,
                                                              server: ScriptedServer) -> None:
    server.script(Reply(tokens=50, cut_after=5, when=not_title))
    run = kernel.run("%chat -n break please")
    display, error = run.outputs
    assert display["data"]["text/plain"].endswith("\n\n‼ incomplete: the turn failed")
    assert display["metadata"]["nbchat"]["status"] == "failed"
    assert error["name"] == "stderr" and error["text"].startswith("UsageError: ")
    assert run.status == "error" and not run.of_type("error")


# -- forms and options ------------------------------------------------------------------------


def test_interpolation(kernel: Kernel, server: ScriptedServer) -> None:
    kernel.ok("rows = 41 + 1")
    run = kernel.ok("%chat -n How many is {rows}? In JSON {\"rows\": {rows}} not {missing}")
    assert asked(server)[-1].messages[-1]["content"] == (
        'How many is 42? In JSON {"rows": 42} not {missing}'
    )
    note = ("nbchat: not defined here, sent as typed: {missing} "
            "(--no-interpolate sends all braces as typed)")
    assert run.stderr == ""
    assert run.outputs[0]["output_type"] == "display_data"
    assert run.outputs[0]["data"]["text/plain"] == note


def test_thread_commands_in_a_kernel(kernel: Kernel, server: ScriptedServer,
                                     tmp_path: Path) -> None:
    kernel.ok("%chat -n first question")
    new = kernel.ok("%chat --new -m scripted-large")
    thread = int(new.stdout.split()[1])
    assert new.stdout == f"Thread {thread} (scripted-large) is now current.\n"
    listing = only_output(kernel.ok("%chat --list"))
    assert listing["output_type"] == "display_data"
    rows = visible(listing["data"]["text/html"]).splitlines()
    assert rows[0] == "id | title | model | turns | updated"
    assert f"{thread} * | (untitled) | scripted-large | 0" in [
        row.rsplit(" | ", 1)[0] for row in rows[1:]]  # without the time it was updated
    kernel.ok("%chat second question")
    kernel.ok(f"%chat --rename {thread} Renamed thread")
    html = only_output(kernel.ok("%chat --show"))["data"]["text/html"]
    assert body(html).startswith("<h3>Renamed thread</h3>\n")
    assert "\nYou: second question\n" in visible(html)
    path = tmp_path / "t.ipynb"
    assert kernel.ok(f"%chat --export {thread} {path}").stdout.startswith("Exported")
    assert json.loads(path.read_text())["cells"][1]["source"] == "**You:** second question"
    assert kernel.ok(f"%chat --use {thread}").stdout.startswith(f"Thread {thread} (")
    assert kernel.ok(f"%chat --delete {thread}").stdout == f"Deleted thread {thread}.\n"
    models = only_output(kernel.ok("%chat --models"))["data"]["text/plain"].splitlines()
    assert "scripted-small (default)" in models


def test_code_error_and_history_options(kernel: Kernel, server: ScriptedServer) -> None:
    server.script(Reply("```python\nprint(1)\n```", when="code please"),
                  Reply("Divide by something else.", when="ZeroDivisionError"))
    run = kernel.ok("%chat -n --code code please")
    (payload,) = run.reply["payload"]
    assert (payload["source"], payload["text"], payload["replace"]) == (
        "set_next_input", "print(1)", False)
    kernel.run("1 / 0")
    run = kernel.ok("%chat --error")
    assert only_output(run)["data"]["text/plain"] == "Divide by something else."
    assert "1 / 0" in asked(server)[-1].messages[-1]["content"]
    kernel.ok("from nbchat import ChatHistory\nh = ChatHistory(system='Terse.')")
    kernel.ok("%chat -H h with a history")
    assert asked(server)[-1].messages == [
        {"role": "system", "content": "Terse."}, {"role": "user", "content": "with a history"}
    ]
    meta = only_output(kernel.ok("%chat -H h again"))["metadata"]["nbchat"]
    assert meta["thread"] is None
    assert one_line_error(kernel.run("%chat -H nope hi")).startswith("-H nope: no such variable")


def test_client_tools_prompt_live_and_answer_from_code(
    kernel: Kernel, server: ScriptedServer
) -> None:
    colour = ("choose", {"question": "Which colour?", "options": ["red", "blue"]})
    server.script(Reply("Let me ask.", tool_calls=[colour], when="paint"),
                  Reply("Blue it is.", after_tool="choose"))
    run = kernel.ok("%chat -n paint the shed")
    assert any(WIDGET in o.get("data", {}) for o in run.outputs)  # the prompt widget
    answer = run.outputs[0]
    assert answer["data"]["text/plain"] == "Let me ask.\n\n○ waiting for your answer"
    assert answer["metadata"]["nbchat"]["status"] == "suspended"
    assert one_line_error(kernel.run("%chat --answer purple")).startswith("'purple' is not one")
    run = kernel.ok("%chat --answer 2", interactive=False)
    assert run.outputs[-1]["data"]["text/plain"] == "Blue it is."


def test_no_stream_still_offers_the_prompt_to_a_person(kernel: Kernel,
                                                        server: ScriptedServer) -> None:
    colour = ("choose", {"question": "Which colour?", "options": ["red", "blue"]})
    server.script(Reply("Let me ask.", tool_calls=[colour], when="paint"))
    run = kernel.ok("%chat -n --no-stream paint it")
    assert run.messages[0]["header"]["msg_type"] == "display_data"
    assert run.messages[0]["content"]["metadata"]["nbchat"]["status"] == "suspended"
    assert any(WIDGET in o.get("data", {}) for o in run.outputs)
    assert "answer with:" not in run.stdout


def test_client_tools_in_a_non_interactive_run_say_how_to_answer(
    kernel: Kernel, server: ScriptedServer
) -> None:
    colour = ("choose", {"question": "Which colour?", "options": ["red", "blue"]})
    server.script(Reply(tool_calls=[colour], when="paint"), Reply("Red.", after_tool="choose"))
    run = kernel.ok("%chat -n paint", interactive=False)
    display, hint = run.outputs
    thread = display["metadata"]["nbchat"]["thread"]
    assert hint["text"] == (  # the question itself, its options and the answer line
        "? choose: Which colour? (one of: red, blue)\n"
        f"   answer with: %chat -t {thread} --answer VALUE\n"
    )
    assert not any(WIDGET in o.get("data", {}) for o in run.outputs)
    run = kernel.ok(f"%chat -t {thread} --answer red", interactive=False)
    assert run.outputs[-1]["data"]["text/plain"] == "Red."


def test_panel_opens(kernel: Kernel) -> None:
    assert WIDGET in only_output(kernel.ok("%chat --panel"))["data"]


# -- saved notebooks ----------------------------------------------------------------------------


def test_a_notebook_run_by_nbclient_passes_nbval(
    env: dict[str, str], server: ScriptedServer, tmp_path: Path
) -> None:
    import nbformat

    server.reset()
    server.script(Reply("Four.", when="2+2", chunk_size=1), Reply("Hi there.", when="Hello"))
    cells = ["%chat What is 2+2?", "reply = %chat -n Hello?", "print(reply.text)",
             "%chat -t 1 --show"]
    first = {**env, "NBCHAT_STORE": str(tmp_path / "first")}
    notebook = run_notebook(cells, first, cwd=tmp_path)
    assert [len(cell.outputs) for cell in notebook.cells] == [1, 1, 1, 1]
    assert notebook.cells[0].outputs[0].data["text/plain"] == "Four."
    path = tmp_path / "chat.ipynb"
    nbformat.write(notebook, path)
    second = {**env, "NBCHAT_STORE": str(tmp_path / "second")}  # same answers, same ids
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-cell-timeout=60", "-q",
         "-p", "no:cacheprovider", str(path)],
        cwd=tmp_path, env=second, capture_output=True, text=True, timeout=110,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- the offline fallback and auto-loading --------------------------------------------------------


def test_the_fallback_notice_appears_once_in_the_cell(tmp_path: Path) -> None:
    # Nothing configured, no Ollama on this machine, the local model turned off:
    # the offline demo model answers, and says so once.
    env = kernel_env(tmp_path / "k", NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER=USER,
                     NBCHAT_LOCAL_MODEL="off")
    with Kernel(env) as fresh:
        first = fresh.run("%chat What is 2+2?", interactive=False)
        second = fresh.run("%chat What is 3+3?", interactive=False)
    assert first.status == "ok", first.text()
    # A calm note in the cell, not red stderr: one dimmed line with a plain-text twin.
    assert (first.stderr, first.stdout) == ("", "")
    note, answer = first.outputs
    assert note["output_type"] == "display_data"
    assert note["data"]["text/plain"] == (
        "nbchat: no endpoint configured, so the offline demo model answers; connect a real "
        "model with %env NBCHAT_BASE_URL=https://api.openai.com/v1 then %chat --key"
    )
    assert body(note["data"]["text/html"]) == (
        "<small>nbchat: no endpoint configured, so the offline demo model answers; connect a "
        "real model with <code>%env NBCHAT_BASE_URL=https://api.openai.com/v1</code> then "
        "%chat --key</small>"
    )
    assert answer["data"]["text/plain"] == "2 + 2 = 4."
    assert (second.status, second.stderr) == ("ok", "")
    assert [o["data"]["text/plain"] for o in second.outputs] == ["3 + 3 = 6."]


def test_a_note_from_python_in_a_kernel_is_not_on_stderr(tmp_path: Path) -> None:
    # nbchat used from Python before any %chat: the note is a plain line, not red stderr.
    env = kernel_env(tmp_path / "k", NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER=USER,
                     NBCHAT_LOCAL_MODEL="off")
    with Kernel(env) as fresh:
        run = fresh.run("from nbchat import LLM\nLLM().ask('What is 2+2?')", interactive=False)
    assert run.status == "ok", run.text()
    assert (run.stderr, run.stdout) == ("", (
        "nbchat: no endpoint configured, so the offline demo model answers; connect a real "
        "model with %env NBCHAT_BASE_URL=https://api.openai.com/v1 then %chat --key\n"
    ))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway venv with the built wheel installed; its dependencies come from ours."""
    root = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "--wheel-dir", str(root / "dist"), str(ROOT)], check=True, timeout=110)
    (wheel,) = (root / "dist").glob("nbchat-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=110)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    ours = next(p for p in sys.path if p.endswith("site-packages"))
    # IPython, ipykernel, httpx… from this venv; a path in a .pth is not a site dir, so
    # this venv's editable nbchat stays out of sight
    Path(purelib, "_test_dependencies.pth").write_text(ours + "\n")
    return venv


def test_auto_load_in_a_fresh_kernel_of_the_installed_package(
    installed: Path, server: ScriptedServer, tmp_path: Path
) -> None:
    startup = installed / "etc" / "ipython" / "startup" / "90-nbchat.py"
    assert startup.read_text() == (ROOT / "jupyter-config/ipython-startup/90-nbchat.py"
                                   ).read_text()
    server.reset()
    server.script(Reply("A language.", when="Python"))
    env = kernel_env(tmp_path / "k", NBCHAT_BASE_URL=server.url, NBCHAT_MODEL="scripted-small",
                     NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER=USER)
    with Kernel(env, python=installed / "bin" / "python") as fresh:
        run = fresh.ok("import sys\nsorted(m for m in sys.modules if m.startswith('nbchat'))")
        assert run.outputs[0]["data"]["text/plain"] == "[]"  # nothing imported yet
        assert fresh.ok("[k for k in dir() if 'nbchat' in k]").outputs[0]["data"][
            "text/plain"] == "[]"  # and no names left behind
        run = fresh.ok("%chat What is Python?")  # the very first use, ending in "?"
        assert run.outputs[-1]["data"]["text/plain"] == "A language."
        run = fresh.ok("import nbchat\nprint(nbchat.__file__)")
        assert run.stdout.startswith(str(installed))
        fresh.ok("%load_ext nbchat")  # still valid, and idempotent
        fresh.ok("%load_ext nbchat")
        assert fresh.ok("%chat --list").outputs
    with Kernel(env, python=installed / "bin" / "python") as fresh:
        run = fresh.ok("%%chat -n\nWhat is Python?")  # a cell magic as the first use
        assert run.outputs[-1]["data"]["text/plain"] == "A language."
        assert "Chat with an LLM" in fresh.ok("%chat?").reply["payload"][0]["data"][
            "text/plain"]


def test_auto_load_can_be_turned_off(installed: Path, tmp_path: Path) -> None:
    env = kernel_env(tmp_path / "k", NBCHAT_NO_AUTOLOAD="1",
                     NBCHAT_STORE=str(tmp_path / "store"), NBCHAT_USER=USER)
    with Kernel(env, python=installed / "bin" / "python") as fresh:
        run = fresh.run("%chat --list")
        assert run.status == "error" and "UsageError: Line magic function `%chat` not found" in (
            run.stderr)
        fresh.ok("%load_ext nbchat")
        assert fresh.ok("%chat --list").stdout.startswith("No threads yet")


def test_the_startup_file_names_the_opt_out_variable_of_config() -> None:
    from nbchat.base.config import ENV_NO_AUTOLOAD

    source = (ROOT / "jupyter-config/ipython-startup/90-nbchat.py").read_text()
    assert f'os.environ.get("{ENV_NO_AUTOLOAD}"' in source
    assert os.path.exists(ROOT / "jupyter-config/ipython-startup/90-nbchat.py")


def test_a_first_plain_question_imports_what_it_needs_and_not_the_agents_or_notebook_tools(env):
    unneeded = ("nbchat.agents", "nbchat.jupyter.agents", "nbchat.jupyter.notebook",
                "nbchat.jupyter.panel", "ipywidgets", "nbchat.store.postgres")
    with Kernel(env) as kernel:  # a fresh kernel: nbchat loads on its first %chat
        kernel.ok("%chat What is 2+2?")
        loaded = kernel.ok(
            "import sys\n"
            f"print(sorted(m for m in sys.modules if m.startswith({unneeded!r})))"
        ).stdout
    assert loaded == "[]\n"
