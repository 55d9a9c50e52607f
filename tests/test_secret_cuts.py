"""A secret cut short is still a secret: every cut on the way to a model comes after the scrub.

A frame's cell, a container's string, a run's result, a traceback, an MCP
tool's description or an endpoint's error page may hold a secret; each is
cut somewhere (pandas' and polars' column widths, reprlib's, the budget, the
4,000-character repr, the traceback's last 6,000 characters, 200 characters
of an error page). The secrets are planted as a secret-named environment
variable and as the key typed at ``%chat --key`` (a key the process uses),
placed so that each cut falls inside them at many offsets, and no piece of
them 8 characters long may reach the request the scripted server receives.
"""

from __future__ import annotations

import getpass
import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest

from nbchat import Chat
from nbchat.base._secrets import MIN_SECRET
from nbchat.base.errors import ServerError
from nbchat.context import describe
from nbchat.jupyter.notebook.tools import Notebook, notebook_tools
from nbchat.mcp._config import ServerConfig
from nbchat.mcp.servers import McpResult, ToolInfo
from nbchat.mcp.tools import MAX_DESCRIPTION, McpTool, as_text
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import asked

SECRET = "sk-secret-0123456789abcdef0123456789abcdef"
KEY = "nbk-live-fedcba9876543210fedcba9876543210"
OFFSETS = range(0, 44, 3)  # where a cut falls inside a secret, from its first to its last char


def pieces(secret: str) -> set[str]:
    return {secret[i : i + MIN_SECRET] for i in range(len(secret) - MIN_SECRET + 1)}


def leaked(text: str, secret: str) -> list[str]:
    """The 8-character pieces of ``secret`` found in ``text``."""
    return sorted(piece for piece in pieces(secret) if piece in text)


@pytest.fixture(params=["env", "key"])
def secret(request, monkeypatch, run) -> str:
    """A secret-named variable's value, or the key typed at ``%chat --key``."""
    if request.param == "env":
        monkeypatch.setenv("MY_API_KEY", SECRET)
        return SECRET
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": KEY)  # the person types it
    assert run("%chat --key").error is None
    return KEY


def straddling(secret: str, width: int) -> list[str]:
    """Texts in which a cut at ``width`` characters falls at each offset inside ``secret``."""
    return [("x" * (width - offset))[:width] + secret for offset in OFFSETS if offset <= width]


def sent(server: ScriptedServer) -> str:
    return json.dumps([request.body for request in asked(server)], ensure_ascii=False)


# -- describers: @df in a question ---------------------------------------------------------
def test_a_frames_cells_and_index_cut_by_pandas_leave_no_piece(ip, run, server, secret):
    texts = straddling(secret, 37)  # pandas keeps 37 characters of 40, then "..."
    ip.user_ns["df"] = pd.DataFrame(
        {f"c{i}": [text] * 5 for i, text in enumerate(texts)}
        | {"nested": [[texts[3]], {"k": texts[5]}, texts[7].encode(), None, 1]},
        index=[f"{text}!" for text in texts[:5]],
    )
    ip.user_ns["s"] = pd.Series(texts, name="s")
    server.script(Reply("Seen."))
    assert run("%chat What is in @df and @s?").error is None
    body = sent(server)
    assert "[redacted]" in body and "first rows:" in body
    assert leaked(body, secret) == []


def test_a_polars_frame_cut_by_polars_leaves_no_piece(ip, run, server, secret):
    texts = straddling(secret, 29)  # polars shows 29 characters and "…"
    ip.user_ns["pf"] = pl.DataFrame({f"c{i}": [text] for i, text in enumerate(texts)})
    server.script(Reply("Seen."))
    assert run("%chat What is in @pf?").error is None
    assert leaked(sent(server), secret) == []


class Opaque:
    """An object whose repr is long (reprlib cuts it in the middle)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Opaque({self.text})"


def test_strings_and_reprs_cut_by_reprlib_leave_no_piece(ip, run, server, secret):
    head = straddling(secret, 58)  # reprlib keeps 58 characters, "...", the last 59
    tail = [secret + "y" * (59 - offset) for offset in OFFSETS]
    ip.user_ns["items"] = [*(t + "z" * 200 for t in head), *("z" * 200 + t for t in tail)]
    ip.user_ns["objects"] = [Opaque(t + "z" * 200) for t in straddling(secret, 51)]
    ip.user_ns["table"] = {t + "z" * 200: 1 for t in head}
    ip.user_ns["strings"] = np.array(head)
    server.script(Reply("Seen."))
    assert run("%chat Look at @items, @objects, @table and @strings.").error is None
    assert leaked(sent(server), secret) == []


class Chatty:
    """An object that describes itself at length, or fails to."""

    def __init__(self, text: str, fails: bool = False) -> None:
        self.text, self.fails = text, fails

    def _repr_llm_(self) -> str:
        if self.fails:
            raise ValueError(self.text)
        return self.text


@pytest.mark.usefixtures("secret")
def test_the_budget_and_an_error_message_cut_after_the_scrub(secret):
    for offset in OFFSETS:
        described = describe(Chatty("w" * (7990 - offset) + secret + "w" * 9000), "c")
        assert "more characters left out" in described.text
        assert leaked(described.text, secret) == []
        failed = describe(Chatty("e" * (188 - offset) + secret + "e" * 50, fails=True), "f")
        assert "not described: ValueError" in failed.text
        assert leaked(failed.text, secret) == []


# -- notebook tools and run_code, as the model calls them ----------------------------------
def test_what_the_notebook_tools_and_run_code_send_holds_no_piece(
    ip, server, secret, tmp_path: Path
):
    ip.user_ns["value"] = "q" * 3960 + secret  # the result's repr is cut at 4,000 characters
    ip.user_ns["df"] = pd.DataFrame({"c": straddling(secret, 37)[:5]})
    ip.run_cell(f"raise ValueError({secret!r} + 'y' * 5975)", store_history=True)
    chat = Chat(base_url=server.url, store=tmp_path / "store", builtin_tools=False,
                tools=notebook_tools(ip, approval="never-ask"))  # fmt: skip
    calls = [("describe_variable", {"name": "df"}), ("last_error", {}),
             ("run_code", {"code": "print('p' * 20000 + value)\nvalue"})]  # fmt: skip
    server.script(Reply(when="go", tool_calls=calls, times=1),
                  Reply("Done.", after_tool="run_code"))  # fmt: skip
    assert chat.ask(chat.new_thread(), "go").text == "Done."
    last = asked(server)[-1].messages
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == 3 and "characters left out" in results[2]
    assert "ValueError" in results[1] and "[redacted]" in results[1]
    assert leaked(json.dumps(last), secret) == []


def test_a_traceback_cut_to_its_tail_leaves_no_piece(ip, secret):
    for offset in OFFSETS:
        ip.run_cell(f"raise ValueError({secret!r} + 'y' * {6000 - len(secret) + offset})")
        item = Notebook(ip).last_error(budget=4000)  # the 6,000 characters' cut, not the budget
        assert item is not None and leaked(item.text, secret) == []


# -- MCP and endpoints ------------------------------------------------------------------------
def test_an_mcp_description_and_result_cut_after_the_scrub(secret):
    server = ServerConfig("srv", "test", command="true")
    for offset in OFFSETS:
        said = "d" * (MAX_DESCRIPTION - offset) + secret
        info = ToolInfo("srv", "t", "srv__t", said, {"type": "object"}, read_only=True)
        tool = McpTool(info, server, lambda *_: McpResult(("r",)))
        assert len(tool.description) < MAX_DESCRIPTION + 100
        assert leaked(tool.description, secret) == []
        text = as_text(McpResult(("s" * (2990 - offset) + secret + "s" * 20000,)))
        assert "characters left out" in text and leaked(text, secret) == []


def test_an_endpoints_error_page_cut_to_200_characters_leaves_no_piece(
    scripted_server, secret, tmp_path
):
    chat = Chat(base_url=scripted_server.url, store=tmp_path / "store", model="scripted-small")
    for offset in OFFSETS:
        page = "<html>" + "p" * (194 - offset) + secret + "p" * 500
        scripted_server.script(Reply(status=400, error_body=page, times=1))
        thread = chat.new_thread()
        with pytest.raises(ServerError, match="HTTP 400: <html>ppp") as caught:
            chat.ask(thread, "hello")
        stored = chat.store.get(thread).turns[-1].error or ""
        assert leaked(str(caught.value), secret) == [] and leaked(stored, secret) == []
