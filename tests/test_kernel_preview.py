"""``%chat --preview`` in a real kernel: what the cell shows is what the question then sends."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest

from kernel_helpers import Kernel, module_kernel
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.testing import Reply, ScriptedServer

pytestmark = pytest.mark.kernel

SECRET = "tok-kernel-preview-0123456789"
BODY = re.compile(r"the request body \([\d,]+ bytes\)</i></summary>\n"
                  r'<pre class="nbchat-code"><code>(.*?)</code></pre>', re.DOTALL)  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as started:
        yield started


@pytest.fixture(scope="module")
def kernel(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    with module_kernel(tmp_path_factory, server, "%load_ext nbchat\nimport pandas as pd",
                       SERVICE_TOKEN=SECRET, NBCHAT_PRICES='{"scripted-small": [1.0, 4.0]}',
                       ) as started:  # fmt: skip
        yield started


def asked(server: ScriptedServer) -> list[Any]:
    return [r for r in server.chat_requests if r.messages[0].get("content") != TITLE_PROMPT]


def shown_html(run) -> str:
    return "".join(o["data"].get("text/html", "") for o in run.outputs
                   if o["output_type"] == "display_data")  # fmt: skip


def test_the_preview_shows_what_the_same_question_then_sends(kernel, server):
    server.script(Reply("It is fine."))
    kernel.ok("%chat -n Hello")
    kernel.ok(f"conn = {{'host': 'db', 'token': {SECRET!r}}}\n"
              "df = pd.DataFrame({'x': range(5)})")  # fmt: skip
    before = len(asked(server))
    run = kernel.ok("%%chat --preview --max-tokens 40\nIs @conn right for @df?",
                    interactive=False)  # fmt: skip
    assert len(asked(server)) == before  # nothing was sent
    page = shown_html(run)
    assert SECRET not in page and SECRET not in run.text()
    assert "scrubbed: SERVICE_TOKEN in @conn" in run.text()
    assert "earlier turn 1 (answer)" in page and "@df" in page
    assert "≈ $" in run.text()
    kernel.ok("%%chat --max-tokens 40\nIs @conn right for @df?", interactive=False)
    sent = asked(server)[before]
    shown = html.unescape(BODY.search(page).group(1))
    assert shown.removesuffix("\n") == sent.raw.decode()  # the highlighter ends a line


def test_preview_with_fix_and_agent_sends_nothing(kernel, server):
    kernel.run("1 / 0")
    before = len(asked(server))
    fix = kernel.ok("%chat --fix --preview", interactive=False)
    assert "the last error (--fix)" in shown_html(fix)
    agent = kernel.ok("%chat --agent --preview What is in df?", interactive=False)
    assert "run_code" in shown_html(agent) and "tool schemas" in shown_html(agent)
    assert len(asked(server)) == before


def test_preview_refuses_what_has_no_question(kernel):
    run = kernel.run("%chat --list --preview")
    assert "--preview shows what a question would send" in run.text()
