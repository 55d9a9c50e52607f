"""The panel's look and what a chat panel is expected to do, in real JupyterLab + Chromium.

One notebook, one page load: the side panel and a cell panel, at 1280×800
and 1024×700, in the light and the dark theme. Checked in the page itself:
nothing sticks out of the panel or its rows, no value wraps inside itself,
code keeps its lines, colours are the theme's. Then what a person does:
rename in place, switch threads with search, show earlier turns, Copy and
insert a code block as a cell, the shortcut back to the input, an IME's
Enter, and prices given while the panel is open.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Locator, Page, expect

from nbchat.testing import Reply

from .jupyterlab import NotebookPage, screenshot

pytestmark = pytest.mark.e2e

SETUP = """\
import os
os.environ.update(NBCHAT_BASE_URL={url!r}, NBCHAT_MODEL="scripted-small", NBCHAT_STORE={store!r})
%load_ext nbchat
"""
CODE = (
    "# Reading a CSV\n\nRead it with pandas:\n\n```python\nimport pandas as pd\n"
    "frame = pd.read_csv('measurements_of_the_whole_year_2026.csv', parse_dates=['when'])\n"
    "```\n\nThen look at `frame.describe()`."
)
LONG_THREAD = """\
from nbchat import Chat
chat = Chat()
long = chat.new_thread()
for n in range(25):
    chat.append_response(long, f"question {n}", f"answer {n}.", title="Many questions")
"""
SIZES = [(1280, 800), (1024, 700)]
THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

# Whatever sticks out of the panel or wraps where it must not, as sentences.
_JS_LAYOUT = """
root => {
    const problems = [];
    const box = root.getBoundingClientRect();
    const parent = root.parentElement.getBoundingClientRect();
    if (box.right > Math.min(parent.right, window.innerWidth) + 1)
        problems.push(`panel right ${box.right} past ${Math.min(parent.right, window.innerWidth)}`);
    if (box.bottom > window.innerHeight + 1)
        problems.push(`panel bottom ${box.bottom} past the window ${window.innerHeight}`);
    for (const sel of ['.nbchat-header', '.nbchat-bar', '.nbchat-composer', '.nbchat-usage',
                       '.nbchat-pop-bar']) {
        const el = root.querySelector(sel);
        if (el && el.offsetParent !== null && el.scrollWidth > el.clientWidth + 1)
            problems.push(`${sel} overflows: ${el.scrollWidth} > ${el.clientWidth}`);
    }
    const rows = '.nbchat-header > *, .nbchat-bar > *, .nbchat-pop-bar > *';
    for (const el of root.querySelectorAll(rows)) {
        if (el.offsetParent === null) continue;
        const r = el.getBoundingClientRect();
        if (r.right > box.right + 1) problems.push(`${el.className} clipped at the right`);
    }
    for (const el of root.querySelectorAll('.nbchat-value')) {
        if (el.offsetParent !== null && el.getClientRects().length > 1)
            problems.push(`"${el.textContent}" wraps inside itself`);
    }
    for (const pre of root.querySelectorAll('.nbchat-body pre')) {
        const lines = pre.textContent.replace(/\\n$/, '').split('\\n').length;
        const height = parseFloat(getComputedStyle(pre).lineHeight);
        const inner = pre.clientHeight - 16;  // less its padding
        if (getComputedStyle(pre).whiteSpace !== 'pre' || inner > (lines + 0.5) * height)
            problems.push(`code wraps: ${lines} lines in ${inner}px`);
    }
    const composer = root.querySelector('.nbchat-composer').getBoundingClientRect();
    if (box.bottom - composer.bottom > 4)
        problems.push(`${box.bottom - composer.bottom}px empty under the input`);
    return problems;
}
"""
# Copy and Insert sit under their code block: none of them covers a character of it.
_JS_CODE_TOOLS = """
root => {
    const problems = [];
    for (const block of root.querySelectorAll('.nbchat-codeblock')) {
        const pre = block.querySelector('pre').getBoundingClientRect();
        for (const tool of block.querySelectorAll('.nbchat-code-tools button')) {
            const r = tool.getBoundingClientRect();
            if (r.top < pre.bottom)
                problems.push(`${tool.textContent} at ${r.top}, above ${pre.bottom}`);
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            if (!tool.contains(hit)) problems.push(`${tool.textContent} is covered`);
        }
        const range = document.createRange();
        range.selectNodeContents(block.querySelector('pre'));
        for (const line of range.getClientRects()) {  // the text, point by point
            for (let x = line.left + 1; x < Math.min(line.right, pre.right); x += 6) {
                const hit = document.elementFromPoint(x, line.top + line.height / 2);
                if (hit && hit.closest('.nbchat-code-tools')) problems.push(`covered at ${x}`);
            }
        }
    }
    return problems;
}
"""
# Headings in answers against the answer's body text: font sizes in px.
_JS_HEADINGS = """
root => [...root.querySelectorAll('.nbchat-body :is(h1, h2, h3)')].map(h =>
    [parseFloat(getComputedStyle(h).fontSize),
     parseFloat(getComputedStyle(h.closest('.nbchat-body')).fontSize)])
"""
# WCAG contrast of Stop's text on its fill, and of its edge against the input around it.
_JS_STOP = """
root => {
    const rgb = c => (c.match(/[\\d.]+/g) || []).map(Number);
    const lum = c => {
        const [r, g, b] = rgb(c).slice(0, 3).map(v => v / 255)
            .map(v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (a, b) => (Math.max(lum(a), lum(b)) + 0.05) / (Math.min(lum(a), lum(b)) + 0.05);
    const opaque = el => {
        for (; el; el = el.parentElement) {
            const c = getComputedStyle(el).backgroundColor;
            if (rgb(c).length < 4 || rgb(c)[3] > 0) return c;
        }
        return 'rgb(255, 255, 255)';
    };
    const stop = root.querySelector('.nbchat-stop');
    const style = getComputedStyle(stop);
    const fill = opaque(stop);
    const around = opaque(stop.parentElement);
    const edge = parseFloat(style.borderTopWidth) > 0 ? style.borderTopColor : fill;
    return {text: ratio(style.color, fill), edge: ratio(edge, around),
            label: stop.textContent.trim()};
}
"""
# The panel's colours against the theme's own variables.
_JS_THEME = """
root => {
    const probe = document.createElement('div');
    probe.style.background = 'var(--jp-layout-color1)';
    probe.style.color = 'var(--jp-ui-font-color1)';
    document.body.appendChild(probe);
    const want = getComputedStyle(probe);
    const result = {
        panel: getComputedStyle(root).backgroundColor, theme: want.backgroundColor,
        text: getComputedStyle(root).color, themeText: want.color,
        font: getComputedStyle(root).fontFamily,
        themeFont: getComputedStyle(document.body).getPropertyValue('--jp-ui-font-family').trim(),
    };
    probe.remove();
    return result;
}
"""


def is_title_request(body):
    return "conversation title" in body["messages"][0]["content"]


def set_theme(page: Page, theme: str) -> None:
    page.evaluate("t => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})",
                  THEMES[theme])
    wait_for(lambda: page.evaluate("document.body.dataset.jpThemeName") == THEMES[theme],
             f"the {theme} theme", page)
    time.sleep(0.5)  # the theme's stylesheet applies after the attribute


def wait_for(condition, what: str, page: Page, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            screenshot(page, "chat-panel/timeout")
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.25)


def check_look(page: Page, panels: dict[str, Locator], name: str) -> dict[str, str]:
    """Every layout rule holds in each panel; the colours are the theme's. The panel colours."""
    colours = {}
    for where, panel in panels.items():
        panel.scroll_into_view_if_needed()
        time.sleep(0.3)  # the side panel fits its height on a 250 ms tick
        assert panel.evaluate(_JS_LAYOUT) == [], f"{where} at {name}"
        assert panel.evaluate(_JS_CODE_TOOLS) == [], f"{where} at {name}"
        sizes = panel.evaluate(_JS_HEADINGS)
        assert all(heading <= 1.25 * body for heading, body in sizes), (where, name, sizes)
        theme = panel.evaluate(_JS_THEME)
        assert theme["panel"] == theme["theme"] and theme["text"] == theme["themeText"], theme
        assert theme["font"].split(",")[0] == theme["themeFont"].split(",")[0], theme
        colours[where] = theme["panel"]
    screenshot(page, f"chat-panel/{name}")
    return colours


def test_the_panel_looks_native_and_does_what_a_chat_panel_does(
    notebook, page, scripted_server, tmp_path
):
    scripted_server.script(
        Reply("Reading CSV Files", when=is_title_request),
        Reply(CODE, when="read a csv", chunk_size=20, delay=0.01),
        Reply("Sent once the character was chosen.", when="안녕", chunk_size=3, delay=0.3),
    )
    scripted_server.context_size = 2048  # what GET /props reports, as llama.cpp's server does
    setup = SETUP.format(url=scripted_server.url, store=str(tmp_path / "store"))
    nb: NotebookPage = notebook([
        setup, "%chat --panel --side", "%chat --panel", "%chat How do I read a CSV file?",
        LONG_THREAD, '%config ChatMagics.prices = {"scripted-small": [1.5, 6.0]}',
    ])
    nb.run_cell(0)
    nb.run_cell(1)
    side = page.locator(".jupyterlab-sidecar .nbchat-panel")
    side.wait_for(timeout=30_000)
    nb.run_cell(2)
    cell = nb.output(2).locator(".nbchat-panel")
    cell.wait_for(timeout=30_000)
    panels = {"side": side, "cell": cell}

    # First open: an empty state that says what to type, the input at the bottom.
    for panel in panels.values():
        expect(panel.locator(".nbchat-empty")).to_contain_text("Ask something below")
        expect(panel.locator(".nbchat-empty")).to_contain_text("Enter sends")
    check_look(page, panels, "empty-1280x800-light")

    nb.run_cell(3)  # a thread with code, from a cell: both panels follow
    for panel in panels.values():
        wait_for(lambda p=panel: "frame.describe()" in p.inner_text(), "the answer", page)
        expect(panel.locator(".nbchat-title")).to_have_text("Reading CSV Files")
        expect(panel.locator(".nbchat-from-person .nbchat-bubble")).to_have_text(
            "How do I read a CSV file?")
        # Each turn: a divider, "You" over the question, the model's name over its answer.
        expect(panel.locator(".nbchat-from-person .nbchat-who")).to_have_text("You")
        expect(panel.locator(".nbchat-from-model .nbchat-who")).to_have_text("scripted-small")
        # The footer is the time and the usage; the model is named once, above.
        expect(panel.locator(".nbchat-message-usage")).to_have_text(
            re.compile(r"^\d\d:\d\d · \d+ in · \d+ out"))
        expect(panel.locator(".nbchat-message-usage")).not_to_contain_text("0.0 s")
        expect(panel.locator(".nbchat-gauge")).to_have_text(re.compile(r"^\d+%$"))
        # The thread's totals and its gauge share one row, under the header.
        expect(panel.locator(".nbchat-usage .nbchat-gauge")).to_be_visible()
        expect(panel.locator(".nbchat-gauge")).to_have_attribute(
            "title", re.compile(r"^context: \d+ of 2,048 tokens on the last turn"))
        expect(panel.locator(".nbchat-gauge")).not_to_contain_text("$")

    # Prices given now apply at once, to the answers shown and the running cost: a
    # few tokens cost under a cent, said so, once in the answer and once in the totals.
    nb.run_cell(5)
    for panel in panels.values():
        expect(panel.locator(".nbchat-message-usage")).to_contain_text(re.compile(r"< \$0\.01$"))
        expect(panel.locator(".nbchat-usage")).to_contain_text(
            re.compile(r"Σ 1 answer · .*< \$0\.01"))
        assert "$0.0000" not in panel.inner_text() and "0.0 s" not in panel.inner_text()
        assert panel.inner_text().count("$") == 2, panel.inner_text()
        assert "$" not in (panel.locator(".nbchat-gauge").get_attribute("title") or "")

    # The side area opens wide enough for the panel (JupyterLab opens it at 250 px).
    assert 320 <= side.bounding_box()["width"] <= 360, side.bounding_box()
    colours = {}
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        for theme in THEMES:
            set_theme(page, theme)
            colours[theme] = check_look(page, panels, f"thread-{width}x{height}-{theme}")
    assert colours["light"]["side"] != colours["dark"]["side"]  # the dark theme is dark
    set_theme(page, "light")
    page.set_viewport_size({"width": 1280, "height": 800})

    # Copy puts the code block's text on the clipboard.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    block = side.locator(".nbchat-codeblock").first
    block.hover()
    block.get_by_role("button", name="Copy").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("import pandas as pd\nframe = pd.read_csv(")

    # Insert as a new cell: below the active cell of the notebook (the last one
    # here, so that the cells run below keep their places; running the last cell
    # left an empty one under it).
    cells = page.locator(".jp-Notebook .jp-Cell")
    before = cells.count()
    nb.cell(before - 1).click()
    block.hover()
    block.get_by_role("button", name="Insert as a new cell").click()
    wait_for(lambda: cells.count() == before + 1, "the inserted cell", page)
    sources = page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.model
        .sharedModel.cells.map(cell => cell.getSource())""")
    assert len(sources) == before + 1 and sources[before] == copied.rstrip("\n")

    # The shortcut comes back to the input from a notebook cell.
    box = side.locator("textarea")
    nb.cell(0).click()
    expect(box).not_to_be_focused()
    page.keyboard.press("Alt+Shift+C")
    expect(box).to_be_focused()

    # An IME's Enter confirms a character: it does not send. The next Enter does.
    box.fill("안녕")
    box.evaluate("""box => {
        box.dispatchEvent(new CompositionEvent('compositionstart', {data: ''}));
        box.dispatchEvent(new KeyboardEvent('keydown',
            {key: 'Enter', code: 'Enter', keyCode: 229, isComposing: true, bubbles: true}));
        box.dispatchEvent(new CompositionEvent('compositionend', {data: '녕'}));
    }""")
    time.sleep(1)
    expect(box).to_have_value("안녕")
    assert "Sent once the character was chosen." not in side.inner_text()
    box.press("Enter")
    # While it streams: "Answering…" shows, and Stop reads as a button against the input.
    expect(side.locator(".nbchat-answering")).to_be_visible()
    expect(side.get_by_role("button", name="Stop")).to_be_visible()
    stop = side.evaluate(_JS_STOP)
    assert stop["label"] == "Stop" and stop["text"] >= 4.5 and stop["edge"] >= 3, stop
    screenshot(page, "chat-panel/streaming")
    wait_for(lambda: "Sent once the character was chosen." in side.inner_text(), "the send", page)
    expect(side.locator(".nbchat-answering")).to_be_hidden()
    expect(box).to_have_value("")
    expect(box).to_be_focused()

    # The full title is the title's tooltip; Rename is a button of its own.
    expect(side.locator(".nbchat-title")).to_have_attribute("title", "Reading CSV Files")
    # Rename in place: the title becomes a field; Enter keeps the new title.
    side.get_by_role("button", name="Rename thread").click()
    edit = side.locator(".nbchat-title-edit")
    expect(edit).to_be_focused()
    edit.fill("CSV with pandas")
    edit.press("Enter")
    expect(side.locator(".nbchat-title")).to_have_text("CSV with pandas")
    expect(cell.locator(".nbchat-threads .nbchat-thread").first).to_have_text(
        re.compile(r"CSV with pandas \(#1\)"))

    # The thread switcher: a search, then the last 20 turns and "Show earlier".
    nb.run_cell(4)
    side.get_by_role("button", name="Threads").click()
    search = side.get_by_role("searchbox", name="Search threads")
    expect(search).to_be_focused()
    search.fill("many")
    threads = side.get_by_role("listbox", name="Threads").get_by_role("option")
    expect(threads).to_have_text([re.compile(r"Many questions \(#2\)")])
    assert side.evaluate(_JS_LAYOUT) == []  # the switcher's row too
    # Delete is in the thread list, away from New in the header, and it asks first.
    header_delete = side.locator(".nbchat-header").get_by_role("button", name="Delete thread")
    expect(header_delete).to_have_count(0)
    pop_delete = side.locator(".nbchat-threads-pop").get_by_role("button", name="Delete thread")
    expect(pop_delete).to_be_visible()
    screenshot(page, "chat-panel/switcher")
    search.press("Enter")
    expect(side.locator(".nbchat-title")).to_have_text("Many questions")
    earlier = side.get_by_role("button", name="Show earlier (5 more)")
    expect(earlier).to_be_visible()
    expect(side.locator(".nbchat-from-person")).to_have_count(20)
    earlier.click()
    expect(side.locator(".nbchat-from-person")).to_have_count(25)
    expect(earlier).to_be_hidden()
