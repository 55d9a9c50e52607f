"""An edit call read while it streams: its source decoded from half a JSON object, and the
page's updates coalesced (no browser; the page's side is in e2e/test_help_in_the_cell.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbchat.base._partial_json import partial_string
from nbchat.base.events import (
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallRequested,
    ToolResult,
    TurnFinished,
    TurnStarted,
)
from nbchat.jupyter._loaded import on_turn_events, watched
from nbchat.jupyter.notebook._streamed_proposals import StreamedEdits, Throttle

HOSTILE = ("# <img src=x onerror=window.__pwned=1>\nname = 'abc\u202edcba'\n😀 \\u0041 \"q\"\n"
           + "".join(f"line_{n} = {n}\n" for n in range(50)))  # fmt: skip


def prefixes(text: str) -> list[str]:
    return [text[:cut] for cut in range(len(text) + 1)]


@pytest.mark.parametrize("ascii_only", [True, False])
def test_every_prefix_reads_as_a_prefix_of_the_source_and_the_whole_as_the_source(ascii_only):
    arguments = {"cell_id": "c-1", "index": [1, {"}": "\\"}], "source": HOSTILE, "why": "w"}
    text = json.dumps(arguments, ensure_ascii=ascii_only)
    seen = [partial_string(prefix, "source") for prefix in prefixes(text)]
    start = text.index('"source":') + len('"source":')
    assert seen[:start] == [None] * start  # the field not begun
    values = [v for v in seen[start:] if v is not None]
    assert len(values) == len(seen) - start  # once begun, always read
    assert all(b.startswith(a) for a, b in zip(values, values[1:], strict=False))  # only grows
    assert values[-1] == HOSTILE
    assert {"\ud83d", "\\"} & {v[-1:] for v in values} <= {"\\"}  # no half pair, ever
    assert seen[-1] == HOSTILE


@given(st.text(), st.text(max_size=20), st.booleans())
def test_any_source_grows_to_itself(source, cell_id, ascii_only):
    text = json.dumps({"cell_id": cell_id, "source": source}, ensure_ascii=ascii_only)
    values = [partial_string(p, "source") for p in prefixes(text)]
    read = [v for v in values if v is not None]
    assert all(source.startswith(v) for v in read)
    assert read[-1] == source


def test_what_is_not_the_field_or_not_json_reads_as_none():
    assert partial_string("", "source") is None
    assert partial_string('["source", "x"', "source") is None
    assert partial_string('{"source": 3', "source") is None
    assert partial_string('{"cell_id": [1, 2', "source") is None  # an earlier field not whole
    assert partial_string('{"source": "a\\x', "source") is None  # not an escape JSON has
    assert partial_string('{"source": ', "source") == ""
    assert partial_string('{"source": "ab\\', "source") == "ab"
    assert partial_string('{"source": "ab\\u00', "source") == "ab"
    assert partial_string('{"source": "ab\\\\u00', "source") == "ab\\u00"  # an escaped backslash
    assert partial_string('{"cell_id": "c-', "cell_id") == "c-"
    assert partial_string('{"cell_id": "c-', "cell_id", whole=True) is None
    assert partial_string('{"cell_id": "c-1"', "cell_id", whole=True) == "c-1"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Timers:
    """Scheduled catch-ups, run when the test says."""

    def __init__(self) -> None:
        self.waiting: list[tuple[float, Any]] = []

    def __call__(self, seconds: float, call: Any) -> Any:
        entry = (seconds, call)
        self.waiting.append(entry)
        return lambda: self.waiting.remove(entry)

    def run(self) -> None:
        waiting, self.waiting = self.waiting, []
        for _, call in waiting:
            call()


def pieces(arguments: dict[str, Any], size: int = 8) -> list[str]:
    text = json.dumps(arguments)
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_a_throttle_lets_twenty_a_second_through_and_backs_off_as_the_text_grows():
    clock = Clock()
    throttle = Throttle(rate=20, backoff=1000, clock=clock)
    due = []
    for step in range(1000):  # a piece every millisecond for a second
        clock.now = step / 1000
        due.append(throttle.is_due())
        if due[-1]:
            throttle.sent(size=10)
    assert sum(due) == 20 and due[0]
    clock.now, due = 10.0, []
    for step in range(1000):
        clock.now = 10 + step / 1000
        due.append(throttle.is_due())
        if due[-1]:
            throttle.sent(size=2500)  # two backoffs: a quarter as often
    assert sum(due) == 5
    assert throttle.is_due() is False  # nothing sent is not counted: only what went waits


def test_an_edit_streams_coalesced_then_once_whole_and_other_calls_are_not_sent():
    clock, sent, timers = Clock(), [], Timers()
    edits = StreamedEdits(sent.append, clock=clock, schedule=timers)
    source = "".join(f"x_{n} = {n}\n" for n in range(400))  # 4,5 KB in 8-character pieces
    arguments = {"cell_id": "c-1", "source": source, "why": "More."}
    edits.on(TurnStarted(7, 2, "m"))
    edits.on(TextDelta("Here."))
    for piece in pieces({"code": "1 + 1"}):
        edits.on(ToolCallDelta(0, "run", "run_code", piece))
    edits.on(ToolCallRequested(ToolCall("run", "run_code", '{"code": "1 + 1"}')))
    parts = pieces(arguments)
    for n, piece in enumerate(parts):
        clock.now = n / 1000  # a piece a millisecond
        edits.on(ToolCallDelta(0, "call_9", "edit_cell", piece))
    assert len(parts) > 500 and clock.now > 0.5
    growing = [m["proposed"] for m in sent]
    assert 5 <= len(growing) <= 20 * clock.now + 1, len(growing)  # at most 20 a second
    assert all(source.startswith(g) for g in growing)
    assert all(len(a) < len(b) for a, b in zip(growing, growing[1:], strict=False))
    assert growing[-1] != source  # the last pieces wait for the next update...
    assert len(timers.waiting) == 1  # ...or the end of the interval, whichever comes first
    edits.on(ToolCallRequested(ToolCall("call_9", "edit_cell", json.dumps(arguments))))
    # ...which the whole call is, at once.
    assert sent[-1] == {"op": "streaming", "thread": 7, "call_id": "call_9", "cell_id": "c-1",
                        "proposed": source}  # fmt: skip
    assert {m["call_id"] for m in sent} == {"call_9"} and edits.streamed == ["call_9"]
    count = len(sent)
    edits.on(ToolCallRequested(ToolCall("call_9", "edit_cell", json.dumps(arguments))))
    assert len(sent) == count  # one final update, not two


def test_a_call_without_its_cell_yet_sends_nothing_and_a_result_takes_the_drawing_away():
    clock, sent = Clock(), []
    edits = StreamedEdits(sent.append, clock=clock, schedule=Timers())
    text = json.dumps({"source": "a = 1\n", "cell_id": "c-2"})  # the cell named last
    for n, piece in enumerate(pieces({"source": "a = 1\n", "cell_id": "c-2"}, size=4)):
        clock.now = n
        edits.on(ToolCallDelta(0, "", "edit_cell", piece))
    assert [m["proposed"] for m in sent] == ["a = 1\n"]  # once the cell id was whole
    edits.on(ToolCallRequested(ToolCall("call_0", "edit_cell", text)))
    assert len(sent) == 1  # the whole source was sent already
    edits.on(ToolResult(ToolCall("call_0", "edit_cell", text), "landed"))
    assert sent[-1] == {"op": "streamed", "call_ids": ["call_0"]}


def test_what_came_during_the_interval_is_sent_when_it_ends_and_the_end_cancels_it():
    clock, sent, timers = Clock(), [], Timers()
    edits = StreamedEdits(sent.append, clock=clock, schedule=timers)
    parts = pieces({"cell_id": "c-1", "source": "x = 1\ny = 2\nz = 3\n"}, size=6)
    for piece in parts[:-1]:  # all within one interval, then the model pauses
        edits.on(ToolCallDelta(0, "call_2", "edit_cell", piece))
    assert [m["proposed"] for m in sent] == [""]  # the first update, at once: it has begun
    assert [seconds for seconds, _ in timers.waiting] == [pytest.approx(0.05)]  # one catch-up
    clock.now = 0.05
    timers.run()
    later = sent[-1]["proposed"]
    assert len(sent) == 2 and "x = 1\ny = 2\nz = 3\n".startswith(later) and len(later) > 5
    assert timers.waiting == []
    edits.on(ToolCallDelta(0, "call_2", "edit_cell", parts[-1]))  # too soon again: waits
    assert len(sent) == 2 and len(timers.waiting) == 1
    edits.end()
    assert timers.waiting == []  # cancelled: nothing is sent after the turn


def turn(arguments: dict[str, Any], fail: bool = False) -> Any:
    yield TurnStarted(3, 1, "m")
    for piece in pieces(arguments):
        yield ToolCallDelta(0, "call_1", "edit_cell", piece)
    if fail:
        raise KeyboardInterrupt
    yield ToolCallRequested(ToolCall("call_1", "edit_cell", json.dumps(arguments)))
    yield TurnFinished(3, 1, "", status="suspended")


@pytest.fixture
def watching():
    """The page's watcher of each panel turn, as ``_page_proposals.watch`` registers it."""
    sent: list[Any] = []

    def start() -> StreamedEdits:
        return StreamedEdits(sent.append, lambda: sent.append("published"))

    on_turn_events(start)
    yield sent
    on_turn_events(start, remove=True)


@pytest.mark.parametrize("fail", [False, True])
def test_the_end_of_a_turn_publishes_the_stored_proposals_then_ends_the_streamed_drawings(
    fail, watching
):
    sent = watching
    inner = turn({"cell_id": "c-1", "source": "b = 2\n"}, fail=fail)
    events = watched(inner)
    if fail:
        with pytest.raises(KeyboardInterrupt):
            list(events)
    else:
        assert [type(e).__name__ for e in events][-2:] == ["ToolCallRequested", "TurnFinished"]
    assert sent[0]["op"] == "streaming"
    assert sent[-2:] == ["published", {"op": "streamed", "call_ids": ["call_1"]}]
    assert inner.gi_frame is None  # the turn's generator closed


def test_a_turn_closed_midway_closes_its_generator_and_ends_the_drawings(watching):
    sent = watching
    inner = turn({"cell_id": "c-1", "source": "c = 3\n" * 20})
    events = watched(inner)
    for event in events:
        if type(event) is ToolCallDelta and sent:
            break
    events.close()  # as the renderer closes a stopped turn
    assert inner.gi_frame is None
    assert sent[-1] == {"op": "streamed", "call_ids": ["call_1"]}


def test_a_watcher_registered_during_the_turn_watches_from_then_on():
    sent: list[Any] = []
    seen = []

    def start() -> StreamedEdits:
        return StreamedEdits(sent.append)

    for event in watched(turn({"cell_id": "c-1", "source": "d = 4\n"})):
        seen.append(event)
        if len(seen) == 1:  # the first question loads the notebook tools, which register it
            on_turn_events(start)
    on_turn_events(start, remove=True)
    assert sent[-1] == {"op": "streamed", "call_ids": ["call_1"]}
    assert {"op": "streaming", "thread": None, "call_id": "call_1", "cell_id": "c-1",
            "proposed": "d = 4\n"} in sent  # fmt: skip


def test_the_cell_renderer_and_the_terminal_show_a_turn_the_same_with_its_call_pieces(capsys):
    from nbchat.__main__ import print_events
    from nbchat.jupyter.cell.render import render_turn

    whole = list(turn({"cell_id": "c-1", "source": "e = 5\n"}))
    plain = [e for e in whole if type(e) is not ToolCallDelta]
    assert len(plain) < len(whole)
    shown = []
    for events in (whole, plain):
        result = render_turn(iter(events), mode="text")
        print_events(iter(events))
        shown.append((capsys.readouterr().out, result.status, result.text))
    assert shown[0] == shown[1]
