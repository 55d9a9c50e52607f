"""The cell renderer, fed event lists: what it displays, updates and returns.

Display messages are captured from a real InteractiveShell's display
publisher; coalescing is checked by counting them against a stream whose
pace the test sets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

from markup_helpers import body, shows, typeset_math, visible
from nbchat import Answer, PendingCall, ServerError, StreamCutOff
from nbchat.base.config import ENV_LIVE
from nbchat.base.events import (
    RanCode,
    TextDelta,
    ToolCall,
    ToolCallAbandoned,
    ToolCallPending,
    ToolCallRequested,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    UsageReported,
)
from nbchat.base.records import Prompt
from nbchat.jupyter.cell.render import (
    RenderResult,
    TurnRenderer,
    answer_hints,
    detect_mode,
    new_handle,
    render_turn,
)
from shell_helpers import close_shell

META = {"thread": 3, "turn": 1, "model": "m"}


@pytest.fixture(autouse=True)
def shell(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.delenv(ENV_LIVE, raising=False)
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    close_shell()


def turn(*texts: str, status: str = "complete", final: str | None = None) -> list[Any]:
    text = "".join(texts) if final is None else final
    return [
        TurnStarted(3, 1, "m"),
        *(TextDelta(t) for t in texts),
        UsageReported(None),  # type: ignore[arg-type]
        TurnFinished(3, 1, text, status, "m"),  # type: ignore[arg-type]
    ]


def paced(events: list[Any], pause: float) -> Iterator[Any]:
    for event in events:
        if isinstance(event, TextDelta):
            time.sleep(pause)
        yield event


def shown(outputs: list[Any]) -> list[tuple[bool, dict[str, Any]]]:
    """Each display message: whether it updates, and its bundle with the HTML inside the wrapper."""
    return [(o.update, shows(o.data)) for o in outputs]


# -- live ---------------------------------------------------------------------------


def test_live_shows_a_placeholder_then_updates_one_display_then_a_final_render() -> None:
    with capture_output() as cap:
        result = render_turn(turn("Hel", "lo", " **world**"), mode="live")
    assert shown(cap.outputs) == [
        (False, {"text/html": '<p class="nbchat-dim">… waiting for m</p>',
                 "text/plain": "… waiting for m"}),
        (True, {"text/html": "<p>Hel</p>\n"}),  # the first token at once, the rest coalesced
        (True, {"text/html": "<p>Hello <strong>world</strong></p>\n",
                "text/plain": "Hello **world**"}),
    ]
    display_ids = {o.transient["display_id"] for o in cap.outputs}
    assert len(display_ids) == 1
    assert cap.outputs[-1].metadata == {"nbchat": {**META, "status": "complete"}}
    assert (result.text, result.status, result.updates) == ("Hello **world**", "complete", 3)
    assert result.handle is not None and result.handle.display_id in display_ids


def test_only_the_final_render_has_its_math_typeset() -> None:
    with capture_output() as cap:
        render_turn(paced(turn("Since $x^2$", " and $$y$$", " we are done."), 0.12), mode="live")
    updates, final = cap.outputs[1:-1], cap.outputs[-1]
    assert len(updates) >= 2
    assert "$x^2$" in updates[-1].data["text/html"]  # shown as written while it streams
    assert [typeset_math(o.data["text/html"]) for o in updates] == [[]] * len(updates)
    assert typeset_math(final.data["text/html"]) == ["$x^2$", "$$y$$"]


def test_live_updates_are_coalesced_by_time() -> None:
    texts = [f"w{i} " for i in range(200)]
    with capture_output() as cap:
        started = time.monotonic()
        result = render_turn(paced(turn(*texts), 0.002), mode="live")
        elapsed = time.monotonic() - started
    # at most about 10 a second, plus the placeholder and the final render
    assert len(cap.outputs) <= 10 * elapsed + 3
    assert len(cap.outputs) >= 3
    assert cap.outputs[-1].data["text/plain"] == "".join(texts)
    assert result.updates == len(cap.outputs)


def test_a_slow_stream_shows_every_chunk() -> None:
    with capture_output() as cap:
        render_turn(paced(turn("a", "b", "c"), 0.12), mode="live")
    assert [body(o.data["text/html"]) for o in cap.outputs[1:]] == [
        "<p>a</p>\n", "<p>ab</p>\n", "<p>abc</p>\n", "<p>abc</p>\n"]


def test_updates_back_off_as_the_text_grows() -> None:
    long = "x" * 180_000  # ten times the backoff unit: about one update a second
    with capture_output() as cap:
        render_turn(paced(turn(long, "y", "z"), 0.2), mode="live")
    assert [len(visible(o.data["text/html"])) for o in cap.outputs[1:]] == [180_000, 180_002]


def test_a_long_answer_is_drawn_less_often_within_a_second() -> None:
    chunks = ["x" * 2000] * 4  # 0.3 s apart
    with capture_output() as cap:
        # After 2,000 characters the interval is 0.1 s x (1 + 2000 / 500): 0.5 s.
        render_turn(paced(turn(*chunks), 0.3), mode="live")
    assert [len(visible(o.data["text/html"])) for o in cap.outputs[1:]] == [2000, 6000, 8000]


def test_a_given_handle_is_reused_for_everything() -> None:
    with capture_output() as cap:
        handle = new_handle()
        result = render_turn(turn("Hi"), mode="live", handle=handle)
    assert [o.update for o in cap.outputs] == [False, True, True, True]
    assert {o.transient["display_id"] for o in cap.outputs} == {handle.display_id}
    assert result.handle is handle


def test_reserve_displays_an_empty_output_now_and_renders_into_it_later() -> None:
    with capture_output() as cap:
        renderer = TurnRenderer(mode="final", reserve=True)
        assert shown(cap.outputs) == [(False, {"text/plain": ""})]
        renderer.render(turn("Later."))
    assert shown(cap.outputs)[1] == (True, {"text/html": "<p>Later.</p>\n", "text/plain": "Later."})


# -- final and text ----------------------------------------------------------------------


def test_final_mode_displays_once_at_the_end() -> None:
    with capture_output() as cap:
        result = render_turn(turn("Hel", "lo"), mode="final", metadata={"extra": 1})
    assert shown(cap.outputs) == [(False, {"text/html": "<p>Hello</p>\n", "text/plain": "Hello"})]
    assert cap.outputs[0].metadata == {"extra": 1, "nbchat": {**META, "status": "complete"}}
    assert result.updates == 1


def test_text_mode_prints_as_it_arrives(capsys: pytest.CaptureFixture[str]) -> None:
    with capture_output(stdout=False) as cap:
        result = render_turn(turn("Hel", "lo"), mode="text")
    assert cap.outputs == []
    assert capsys.readouterr().out == "Hello\n"
    assert result.text == "Hello"


def test_text_mode_keeps_one_blank_line_between_a_tool_and_the_next_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = [ToolResult(CHOOSE, "a"), TurnStarted(3, 1, "m"), TextDelta("\n\n"),
              TextDelta("You chose a."), TurnFinished(3, 1, "You chose a.", "complete", "m")]
    render_turn(events, mode="text")
    assert capsys.readouterr().out == "► choose → 1 chars\n\nYou chose a.\n"


def test_the_final_render_happens_before_the_turn_generator_goes_on() -> None:
    seen_before_title: list[int] = []

    def events() -> Iterator[Any]:
        yield from turn("Done.")
        seen_before_title.append(len(cap.outputs))  # e.g. while the title is asked for

    with capture_output() as cap:
        render_turn(events(), mode="final")
    assert seen_before_title == [1]


# -- interruptions and errors ---------------------------------------------------------------


def test_an_interrupt_keeps_the_partial_text_marked_and_is_swallowed() -> None:
    closed: list[bool] = []

    def events() -> Iterator[Any]:
        try:
            yield TurnStarted(3, 1, "m")
            yield TextDelta("Partial")
            raise KeyboardInterrupt
        finally:
            closed.append(True)

    with capture_output() as cap:
        result = render_turn(events(), mode="live")
    final = cap.outputs[-1]
    assert shows(final.data) == {
        "text/html": "<p>Partial</p>\n\n<p class=\"nbchat-note\"><i>■ interrupted — the partial "
                     "answer is kept in the thread</i></p>",
        "text/plain": "Partial\n\n■ interrupted — the partial answer is kept in the thread",
    }
    assert final.metadata["nbchat"]["status"] == "interrupted"
    assert (result.status, result.text, closed) == ("interrupted", "Partial", [True])


class InterruptingHandle:
    """A display handle whose second update is where the interrupt lands."""

    display_id = "x"

    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def update(self, bundle: dict[str, Any], **kwargs: Any) -> None:
        self.updates.append(bundle)
        if len(self.updates) == 2:
            raise KeyboardInterrupt


def test_an_interrupt_in_the_renderer_closes_the_turn() -> None:
    closed: list[str] = []

    def events() -> Iterator[Any]:
        try:
            yield TurnStarted(3, 1, "m")
            yield TextDelta("Par")
            yield TextDelta("tial")
        except GeneratorExit:
            closed.append("closed at the yield")  # the engine records the interruption here
            raise

    handle = InterruptingHandle()
    result = render_turn(events(), mode="live", handle=handle)  # type: ignore[arg-type]
    assert closed == ["closed at the yield"]
    assert result.status == "interrupted"
    assert handle.updates[-1]["text/plain"].startswith("Par\n\n■ interrupted")


def test_a_failed_turn_shows_the_error_under_the_partial_text() -> None:
    error = StreamCutOff("the connection broke in the middle of the answer; ask again")
    events = [TurnStarted(3, 1, "m"), TextDelta("Half"), TurnFailed(3, 1, error, "Half")]
    with capture_output() as cap:
        result = render_turn(events, mode="final")
    assert shown(cap.outputs) == [(False, {
        "text/html": "<p>Half</p>\n\n<p class=\"nbchat-error\">‼ the connection broke in the "
                     "middle of the answer; ask again</p>",
        "text/plain": "Half\n\n‼ the connection broke in the middle of the answer; ask again",
    })]
    assert (result.status, result.error, result.text) == ("failed", error, "Half")


def test_error_text_shows_literally_and_no_tag_in_it_survives() -> None:
    error = ServerError("status 500 from *the* endpoint_url <html><img src=x onerror=alert(1)>")
    with capture_output() as cap:
        render_turn([TurnStarted(3, 1, "m"), TurnFailed(3, 1, error)], mode="final")
    html = cap.outputs[0].data["text/html"]
    assert visible(html) == (
        "‼ status 500 from *the* endpoint_url <html><img src=x onerror=alert(1)>"
    )
    assert body(html) == (
        '<p class="nbchat-error">‼ status 500 from *the* endpoint_url '
        "&lt;html&gt;&lt;img src=x onerror=alert(1)&gt;</p>"
    )
    assert cap.outputs[0].data["text/plain"] == f"‼ {error}"


def test_without_show_error_the_caller_reports_it() -> None:
    error = StreamCutOff("cut")
    with capture_output() as cap:
        result = render_turn(
            [TurnStarted(3, 1, "m"), TextDelta("Half"), TurnFailed(3, 1, error, "Half")],
            mode="final", show_error=False,
        )
        assert result.error is error
        render_turn([TurnStarted(3, 1, "m"), TurnFailed(3, 1, error)], mode="final",
                    show_error=False)
    assert shown(cap.outputs) == [(False, {
        "text/html": "<p>Half</p>\n\n<p class=\"nbchat-note\"><i>‼ incomplete: the turn "
                     "failed</i></p>",
        "text/plain": "Half\n\n‼ incomplete: the turn failed",
    })]  # and nothing at all for a turn that failed before any text


def test_an_nbchat_error_raised_by_the_stream_is_a_failed_turn() -> None:
    def events() -> Iterator[Any]:
        yield TurnStarted(3, 1, "m")
        yield TextDelta("Some")
        raise ServerError("boom")

    with capture_output():
        result = render_turn(events(), mode="final")
    assert (result.status, str(result.error), result.text) == ("failed", "boom", "Some")


def test_other_exceptions_propagate_after_a_final_render() -> None:
    def events() -> Iterator[Any]:
        yield TurnStarted(3, 1, "m")
        yield TextDelta("Some")
        raise RuntimeError("a bug")

    with capture_output() as cap, pytest.raises(RuntimeError, match="a bug"):
        render_turn(events(), mode="live")
    assert cap.outputs[-1].data["text/plain"].startswith("Some\n\n■ interrupted")


# -- tools ----------------------------------------------------------------------------------

WEATHER = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
CHOOSE = ToolCall("call_2", "choose", '{"question": "Which?", "options": ["a", "b"]}')


def test_tool_activity_is_one_line_per_call() -> None:
    events = [
        TurnStarted(3, 1, "m"), TextDelta("Let me check."), ToolCallRequested(WEATHER),
        ToolResult(WEATHER, "x" * 42), TextDelta("It is sunny."),
        TurnFinished(3, 1, "Let me check.\n\nIt is sunny.", "complete", "m"),
    ]
    with capture_output() as cap:
        result = render_turn(events, mode="live")
    tool = '<p class="nbchat-dim">► <code>get_weather</code> {}</p>'.format
    assert [body(o.data["text/html"]) for o in cap.outputs[1:]] == [
        "<p>Let me check.</p>\n",
        f"<p>Let me check.</p>\n\n{tool('…')}",
        f"<p>Let me check.</p>\n\n{tool('→ 42 chars')}",  # tool lines show at once
        f"<p>Let me check.</p>\n\n{tool('→ 42 chars')}\n<p>It is sunny.</p>\n",  # coalesced
    ]
    assert visible(cap.outputs[-1].data["text/html"]) == (
        "Let me check.\n► get_weather → 42 chars\nIt is sunny."
    )
    assert cap.outputs[-1].data["text/plain"] == "Let me check.\n\nIt is sunny."
    assert result.text == "Let me check.\n\nIt is sunny."


def test_a_failed_tool_shows_its_error_line() -> None:
    events = [TurnStarted(3, 1, "m"), ToolCallRequested(WEATHER),
              ToolResult(WEATHER, "error: ValueError: no such city\nmore", is_error=True),
              TurnFinished(3, 1, "", "complete", "m")]
    with capture_output() as cap:
        render_turn(events, mode="final")
    assert body(cap.outputs[0].data["text/html"]) == (
        '<p class="nbchat-dim">► <code>get_weather</code> × error: ValueError: no such city</p>'
    )


RUN = ToolCall("call_3", "run_code", '{"code": "x"}')


def test_code_that_ran_shows_folded_then_its_output_value_and_error() -> None:
    ran = RanCode("print('hi')\n1 + 1\n<img src=x onerror=alert(1)>", stdout="hi\n",
                  result="2", error="NameError: name 'img' is not defined")  # fmt: skip
    events = [TurnStarted(3, 1, "m"), ToolCallRequested(RUN),
              ToolResult(RUN, "stdout:\nhi\nresult:\n2", shown=ran),
              TextDelta("It printed hi."), TurnFinished(3, 1, "It printed hi.", "complete", "m")]
    with capture_output() as cap:
        render_turn(events, mode="final")
    html = cap.outputs[0].data["text/html"]
    assert '<details class="nbchat-ran"><summary><i>► ran the code (3 lines)</i></summary>' in html
    assert "<img" not in html and "&lt;" in html  # the code is escaped, never markup
    assert "<details class=\"nbchat-ran\" open>" not in html  # the code is folded
    assert visible(html) == (
        "► ran the code (3 lines)\nprint('hi')\n1 + 1\n<img src=x onerror=alert(1)>\n"
        "hi\n2\nNameError: name 'img' is not defined\nIt printed hi."
    )
    assert "chars" not in visible(html)  # not the length of what the model read


def test_code_that_printed_nothing_says_so_and_a_terminal_gets_it_as_text(capsys) -> None:
    events = [TurnStarted(3, 1, "m"), ToolCallRequested(RUN),
              ToolResult(RUN, "The code ran", shown=RanCode("x = 1", edited=True)),
              TurnFinished(3, 1, "", "complete", "m")]  # fmt: skip
    with capture_output() as cap:
        render_turn(events, mode="final")
    assert "it printed nothing and has no value" in visible(cap.outputs[0].data["text/html"])
    render_turn(events, mode="text")
    assert capsys.readouterr().out == (
        "► ran your edited code (1 line):\nx = 1\n(it printed nothing and has no value)\n"
    )


def suspended() -> list[Any]:
    return [
        TurnStarted(3, 1, "m"), TextDelta("Let me ask."), ToolCallRequested(CHOOSE),
        ToolCallPending(PendingCall(3, 1, "call_2", "choose",
                                    {"question": "Which?", "options": ["a", "b"]},
                                    Prompt("choice", "Which?", ("a", "b")))),
        TurnFinished(3, 1, "Let me ask.", "suspended", "m"),
    ]


def test_a_suspended_turn_renders_and_says_how_to_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with capture_output(stdout=False) as cap:
        result = render_turn(suspended(), mode="final")
    assert body(cap.outputs[0].data["text/html"]) == (
        '<p>Let me ask.</p>\n\n<p class="nbchat-dim">► <code>choose</code> waits for your '
        'answer</p>\n<p class="nbchat-note"><i>○ waiting for your answer</i></p>'
    )
    assert capsys.readouterr().out == (
        "? choose: Which? (one of: a, b)\n"
        "   answer with: %chat -t 3 --answer VALUE\n"
    )
    assert result.status == "suspended"
    assert result.pending == (PendingCall(3, 1, "call_2", "choose",
                                          {"question": "Which?", "options": ["a", "b"]},
                                          Prompt("choice", "Which?", ("a", "b"))),)


def test_answer_hints_name_the_call_when_several_wait() -> None:
    calls = [PendingCall(3, 1, "call_1", "confirm", {}, Prompt("confirm", "Go on?")),
             PendingCall(3, 1, "call_2", "ask_user", {}, Prompt("text", "Your name?"))]
    assert answer_hints(calls) == [
        "? confirm: Go on? (yes or no)",
        "   answer with: %chat -t 3 --answer call_1 VALUE",
        "? ask_user: Your name?",
        "   answer with: %chat -t 3 --answer call_2 VALUE",
    ]


def test_a_resumed_turn_renders_its_continuation_and_returns_the_whole_answer() -> None:
    events = [
        ToolResult(CHOOSE, "a"), TurnStarted(3, 1, "m"), TextDelta("You chose a."),
        TurnFinished(3, 1, "Let me ask.\n\nYou chose a.", "complete", "m"),
    ]
    with capture_output() as cap:
        result = render_turn(events, mode="final")
    assert shows(cap.outputs[0].data) == {
        "text/html": '<p class="nbchat-dim">► <code>choose</code> → 1 chars</p>\n'
                     "<p>You chose a.</p>\n",
        "text/plain": "You chose a.",
    }
    assert result.text == "Let me ask.\n\nYou chose a."


# -- the result -------------------------------------------------------------------------------


def test_the_result_is_the_reply(shell: InteractiveShell) -> None:
    with capture_output():
        result = render_turn(turn("Four."), mode="final")
    assert (str(result), result.text, result.thread_id, result.turn, result.model) == (
        "Four.", "Four.", 3, 1, "m")
    assert repr(result) == "<nbchat reply thread=3 turn=1 complete: 'Four.'>"
    assert result.to_answer() == Answer("Four.", 3, 1, "complete", "m")


def test_the_result_is_not_shown_again_where_it_was_rendered(shell: InteractiveShell) -> None:
    from nbchat.jupyter.cell.render import execution_marker

    result = RenderResult("Four.", thread_id=3, turn=1, model="m")
    result.shown_in = execution_marker()
    with capture_output() as cap:
        result._ipython_display_()
    assert cap.outputs == []
    shell.execution_count += 1  # a later cell
    with capture_output() as cap:
        result._ipython_display_()
    assert shown(cap.outputs) == [(False, {"text/html": "<p>Four.</p>\n", "text/plain": "Four."})]
    assert cap.outputs[0].metadata["nbchat"]["thread"] == 3


# -- the mode -------------------------------------------------------------------------------------


def test_the_mode_without_a_kernel_is_text(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect_mode() == "text"
    monkeypatch.setenv(ENV_LIVE, "1")
    assert detect_mode() == "live"
    monkeypatch.setenv(ENV_LIVE, "false")
    assert detect_mode() == "final"


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of live, final, text"):
        TurnRenderer(mode="fast")  # type: ignore[arg-type]


def test_a_closed_waiting_call_is_named_in_the_cell() -> None:
    waiting = PendingCall(3, 0, "call_2", "choose", {}, Prompt("choice", "Which?", ("a", "b")))
    events = [ToolCallAbandoned(waiting), *turn("Sure.")]
    with capture_output() as cap:
        render_turn(events, mode="final")
    assert body(cap.outputs[-1].data["text/html"]) == (
        '<p class="nbchat-dim">► <code>choose</code> closed unanswered (a new question was '
        'asked)</p>\n<p>Sure.</p>\n'
    )
