"""What a prompt draws is what runs, in real JupyterLab: as an attacker would try it.

Code awaiting a yes that holds direction controls or zero-width characters is
drawn with each as a marked escape and a warning; model text quoted in the
prompt is never typeset, and an answer's math cannot paint over the code
(every drawn code line is hit-tested); a long line wraps instead of running
past the visible edge. In a cell, and in the panel showing the same prompt.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator

from nbchat.testing import Reply

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
# Trojan Source: drawn as it is, the comparison reads as if it ended before the comment.
TROJAN = (
    'mode = "dry-run"\n'
    'if mode != "dry-run\u202e \u2066# only outside dry-run mode\u2069 \u2066":\n'
    '    answer = "no\u200b"\n'
)
# A `!` line is quoted in the reason the prompt gives, and the answer carries math too:
# both boxes, typeset, would be painted over the code lines.
BOX = r"\smash{\color{white}{\rule{60em}{4.6em}}}"
PAINTED = f'!echo ${BOX}$\nopen("covered.txt", "w").write("x")\nprint("harmless")'
ANSWER_MATH = r"Here $x^2$ and $\smash{\lower{2em}{\color{white}{\rule{60em}{20em}}}}$"
LONG = 'x = "' + "a" * 300 + '";open("far.txt", "w")'
# The question line is the model's too: in the math case it carries the box as well.
WHY = {"hidden": "To check the mode.", "math": f"To check ${BOX}$ the mode.",
       "long line": "To check the mode."}

# For each drawn line of a code block: is the element at its first character inside it?
HIT_TEST = """(pre) => {
  const hits = [];
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  let lineStart = true, line = null;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.nodeValue;
    const block = n.parentElement.closest(".nbchat-line");
    if (block !== line) { lineStart = true; line = block; }
    for (let i = 0; i < text.length; i++) {
      if (text[i] === "\\n") { lineStart = true; continue; }
      if (!lineStart || !text[i].trim()) continue;
      lineStart = false;
      const range = document.createRange();
      range.setStart(n, i); range.setEnd(n, i + 1);
      const box = range.getBoundingClientRect();
      const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
      hits.push(!!hit && pre.contains(hit));
    }
  }
  return hits;
}"""
# Where the text `needle` of a code block is drawn, against the block's visible box.
VISIBLE = """(pre, needle) => {
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  let all = "", nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    nodes.push([n, all.length]);
    all += n.nodeValue;
  }
  const at = all.indexOf(needle);
  const [node, start] = nodes.filter(([n, s]) => s <= at).pop();
  const range = document.createRange();
  range.setStart(node, at - start); range.setEnd(node, at - start + 1);
  const box = range.getBoundingClientRect(), edge = pre.getBoundingClientRect();
  return {left: box.left, right: box.right, edgeLeft: edge.left, edgeRight: edge.right,
          scroll: pre.scrollWidth - pre.clientWidth};
}"""


def _ask(server, code: str, why: str, text: str = "") -> None:
    server.script(
        Reply(text, when="please", tool_calls=[("run_code", {"code": code, "why": why})],
              times=1),
        Reply("Done.", after_tool="run_code"),
    )


def _prompt_code(out: Locator) -> Locator:
    pre = out.locator(".nbchat-prompt pre, .nbchat-prompts pre").first
    pre.wait_for(timeout=30_000)
    pre.scroll_into_view_if_needed()
    return pre


def _checks_hidden(out: Locator) -> None:
    pre = _prompt_code(out)
    drawn = pre.inner_text()
    assert drawn.count("\n") <= 3, drawn  # one line break per line, as a copy takes it
    assert not re.search("[\u202a-\u202e\u2066-\u2069\u200b-\u200d]", drawn), drawn
    for escape in ("\\u202e", "\\u2066", "\\u2069", "\\u200b"):
        assert escape in drawn
    marks = pre.locator(".nbchat-hidden")
    assert marks.count() == 5
    assert marks.first.evaluate("el => getComputedStyle(el).fontWeight") in ("700", "bold")
    warning = out.get_by_text(re.compile("holds 5 characters that draw nothing")).first
    assert "U+202E RIGHT-TO-LEFT OVERRIDE on line 2" in warning.inner_text()


def _checks_nothing_paints_over(out: Locator) -> None:
    out.locator("mjx-container").first.wait_for(timeout=30_000)  # MathJax has run here
    prompt = out.locator(".nbchat-prompt, .nbchat-prompts").first
    assert prompt.locator("mjx-container").count() == 0  # nothing in the prompt is typeset
    pre = _prompt_code(out)
    hits = pre.evaluate(HIT_TEST)
    assert hits == [True, True, True], "a drawn code line is covered by another element"
    assert prompt.inner_text().count("\\rule") == 3  # in the code, the reason, the question


def _checks_wraps(out: Locator) -> None:
    pre = _prompt_code(out)
    where = pre.evaluate(VISIBLE, "open(")
    assert where["scroll"] <= 1, where  # nothing to scroll to: the line wraps
    assert where["edgeLeft"] <= where["left"] and where["right"] <= where["edgeRight"], where


CASES = {"hidden": (TROJAN, _checks_hidden), "math": (PAINTED, _checks_nothing_paints_over),
         "long line": (LONG, _checks_wraps)}


@pytest.mark.parametrize("case", ["hidden", "math", "long line"])
def test_a_code_prompt_in_a_cell_draws_what_runs(notebook, scripted_server, tmp_path, case):
    code, check = CASES[case]
    _ask(scripted_server, code, WHY[case], ANSWER_MATH if case == "math" else "")
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --agent please run it"])
    nb.run_cell(0)
    nb.run_cell(1)
    out = nb.output(1)
    check(out)
    nb.screenshot(f"cell-{case.replace(' ', '-')}")
    if case == "hidden":  # the editor holds what it draws: the escapes
        out.get_by_role("button", name=re.compile(r"^\s*Edit\s*$")).click()
        editor = out.locator("textarea").first
        editor.wait_for(timeout=10_000)
        assert "\\u202e" in editor.input_value() and "\u202e" not in editor.input_value()


@pytest.mark.parametrize("case", ["hidden", "math", "long line"])
def test_the_same_prompt_in_the_panel_draws_what_runs(notebook, scripted_server, tmp_path, case):
    code, check = CASES[case]
    _ask(scripted_server, code, WHY[case], ANSWER_MATH if case == "math" else "")
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --agent --no-stream please run it", "%chat --panel"])
    nb.run_cell(0)
    nb.run_cell(1)
    nb.run_cell(2)
    panel = nb.output(2)
    panel.locator(".nbchat-panel").first.wait_for(timeout=30_000)
    if case == "math":  # the panel draws no math: the hit test is the check there
        pre = _prompt_code(panel)
        assert pre.evaluate(HIT_TEST) == [True, True, True]
        assert panel.locator(".nbchat-prompts mjx-container").count() == 0
    else:
        check(panel)
    nb.screenshot(f"panel-{case.replace(' ', '-')}")


MCP_SETUP = SETUP + """\
import tempfile
from nbchat.testing import mcp_server
os.environ["JUPYTER_CONFIG_DIR"] = tempfile.mkdtemp()  # this kernel's own MCP configuration
mcp_server.add_to_config("t", approve="read-only")
"""
MCP_TEXT = "a" * 300 + ' ;rm -rf ~/data # "only a comment\u202e \u2066"'


def test_an_mcp_call_shows_its_whole_arguments_marked_and_wrapped(notebook, scripted_server,
                                                                  tmp_path):
    scripted_server.script(
        Reply(when="please", tool_calls=[("t__write_note", {"text": MCP_TEXT})], times=1),
        Reply("Noted.", after_tool="t__write_note"),
    )
    setup = MCP_SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb = notebook([setup, "%chat --mcp t please note it"])
    nb.run_cell(0)
    nb.run_cell(1)
    out = nb.output(1)
    pre = _prompt_code(out)
    drawn = pre.inner_text()
    assert "\u202e" not in drawn and "\\u202e" in drawn and "\\u2066" in drawn
    assert "a" * 300 in drawn.replace("\n", "")  # whole, never cut
    where = pre.evaluate(VISIBLE, ";rm")
    assert where["scroll"] <= 1, where
    assert where["edgeLeft"] <= where["left"] and where["right"] <= where["edgeRight"], where
    assert "These arguments hold 2 characters" in out.inner_text()
    nb.screenshot("mcp-arguments")
