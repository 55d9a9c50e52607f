"""The notebook agent against hostile input, in a terminal, and with two processes answering.

Hostile sources (terminal controls, bidi, zero-width, HTML, a 5,000-line cell, a 10 MB
argument) are shown inert and land whole; a terminal IPython prints proposals as text and
says in one line that it has no notebook to edit; two processes accepting one proposal at
once land it once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from IPython.core.interactiveshell import InteractiveShell

from nbchat import Chat
from nbchat.base import markup
from nbchat.testing import Reply
from notebook_helpers import saved, source
from test_terminal_text import obeyed, pty_run

HOSTILE = ("<img src=x onerror=alert(1)>\n# \u202eevil\u202c ok\u200b\n"
           "print('\x1b]0;owned\x07\x1b[2J')\n")


def test_a_hostile_source_is_inert_in_text_and_in_the_prompt_and_lands_whole(run, ip, nb,
                                                                              server):
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": "c1", "source": HOSTILE, "why":
                                         "<b>bold</b> \x1b[2J"})], when="hostile"),
        Reply("Done.", after_tool="edit_cell"),
    )
    ran = run("%chat --agent hostile")
    assert obeyed(ran.out) == [] and "\x1b" not in ran.out and "\u202e" not in ran.out
    assert "\\u202e" in ran.out and "\\u200b" in ran.out and "\\x1b]0;owned" in ran.out
    chat = ip.magics_manager.registry["ChatMagics"].notebook_chat()
    (call,) = chat.pending_calls(1)
    html = markup.markdown(call.prompt.markdown)
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html  # code, as text
    assert "<b>" not in markup.markdown(call.prompt.question)
    assert run("%chat --answer accept").error is None
    assert source(nb, "c1") == HOSTILE  # byte for byte, controls and all


def test_a_5000_line_cell_and_a_10_mb_argument_land_whole(run, nb, server):
    long = "".join(f"row_{n} = {n}\n" for n in range(5000))
    edited = long.replace("row_2500 = 2500", "row_2500 = -1")
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": long, "why": "Long."})], when="long"),
        Reply("Long.", after_tool="insert_cell"),
    )
    run("%chat --agent long")
    assert run("%chat --answer accept").error is None
    (new,) = [c for c in saved(nb) if c["id"] not in ("c0", "c1")]
    assert source(nb, new["id"]) == long
    server.script(
        Reply(tool_calls=[("edit_cell", {"cell_id": new["id"], "source": edited,
                                         "why": "One row."})], when="one row"),
        Reply("Edited.", after_tool="edit_cell"),
    )
    ran = run("%chat --agent one row")
    assert "      -row_2500 = 2500\n      +row_2500 = -1\n" in ran.out
    assert ran.out.count("row_") < 20  # the diff shows the chunk and its context, not the cell
    assert run("%chat --answer accept").error is None
    assert source(nb, new["id"]) == edited
    huge = "x = 1\n" * 1_750_000  # 10.5 MB
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": huge, "why": "Huge."})], when="huge"),
        Reply("Huge.", after_tool="insert_cell"),
    )
    run("%chat --agent huge")
    assert run("%chat --answer accept").error is None
    assert any(source(nb, c["id"]) == huge for c in saved(nb))


def test_terminal_ipython_says_in_one_line_it_has_no_notebook_to_edit(
    scripted_server, tmp_path
):
    scripted_server.script(
        Reply(tool_calls=[("insert_cell", {"source": "1", "why": "One."})], when="add"),
        Reply("I could not add it.", after_tool="insert_cell"),
    )
    env = {**{k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"},
           "NBCHAT_BASE_URL": scripted_server.url, "NBCHAT_MODEL": "scripted-small",
           "NBCHAT_STORE": str(tmp_path / "store"), "TERM": "xterm-256color"}
    (tmp_path / "ip").mkdir()
    argv = [sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--colors=NoColor",
            "--TerminalInteractiveShell.term_title=False", f"--ipython-dir={tmp_path / 'ip'}",
            "--InteractiveShellApp.exec_lines=['%load_ext nbchat']", "-c",
            "%chat --agent add a cell"]
    out = pty_run(argv, env)
    assert "I could not add it." in out, out
    store = Chat(base_url=scripted_server.url, store=str(tmp_path / "store")).store
    turn = store.get(1).turns[0]
    assert turn.status == "complete" and not turn.pending  # nothing queued
    told = [m["content"] for m in turn.messages if m.get("role") == "tool"]
    assert "no notebook to edit" in told[0] and "nothing was queued" in told[0]


ANSWER = textwrap.dedent("""\
    import os, sys, time
    from IPython.core.interactiveshell import InteractiveShell
    import nbchat
    shell = InteractiveShell.instance()
    chat = nbchat.Chat(tools=nbchat.notebook_tools(shell))
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.005)
    try:
        chat.answer_tool_call(1, "accept", call_id=sys.argv[2])
        print("landed")
    except nbchat.AlreadyAnswered:
        print("already answered")
""")


def test_two_processes_accepting_one_proposal_land_it_once(run, nb, server, tmp_path):
    server.script(
        Reply(tool_calls=[("insert_cell", {"source": "once = 1\n", "why": "Once."})],
              when="once"),
        Reply("Once.", after_tool="insert_cell"),
    )
    run("%chat --agent once")
    (call,) = Chat().pending_calls(1)
    go = tmp_path / "go"
    env = {**os.environ}
    script = tmp_path / "answer.py"
    script.write_text(ANSWER)
    racers = [subprocess.Popen([sys.executable, str(script), str(go), call.call_id], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=tmp_path) for _ in range(2)]  # fmt: skip
    go.write_text("")
    said = sorted(p.communicate(timeout=120)[0].strip() for p in racers)
    assert said == ["already answered", "landed"], said
    assert [c["source"] for c in saved(nb)].count("once = 1\n") == 1
    InteractiveShell.clear_instance()
    (landed,) = [c for c in json.loads(Path(nb).read_text())["cells"]
                 if c["source"] == "once = 1\n"]
    assert landed["metadata"]["nbchat"]["call"] == call.call_id
