"""Budgets bound every request of a question, not only its first: tool rounds, the answer to a
waiting call, a retry, the summary and the title, over real HTTP to the scripted server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nbchat import Chat, OverBudget, tool
from nbchat.engine._compaction import SETTING, SUMMARY_REQUEST
from nbchat.engine._titles import question_title
from nbchat.engine._usage import thread_cost
from nbchat.testing import Reply, ScriptedServer
from nbchat.tools import ClientTool
from shell_helpers import asked, is_title_body

PRICES = '{"scripted-small": [10.0, 40.0]}'
CAP = 0.01


@pytest.fixture
def priced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NBCHAT_PRICES", PRICES)


@pytest.fixture
def hard_cap(monkeypatch: pytest.MonkeyPatch, priced: None) -> None:
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", str(CAP))
    monkeypatch.setenv("NBCHAT_HARD_BUDGET", "1")


RUNS: list[int] = []


@tool
def probe(x: int) -> str:
    """Look at x once more."""
    RUNS.append(x)
    return "nothing found yet " * 10


def loop(server: ScriptedServer, times: int | None = None) -> None:
    """A model that calls ``probe`` in every reply that may call a tool (``times`` at most)."""
    RUNS.clear()
    server.script(Reply("", tool_calls=[("probe", {"x": 1})], times=times,
                        when=lambda body: bool(body.get("tools"))),
                  Reply("Done."))  # fmt: skip


def make_chat(server: ScriptedServer, tmp_path: Any, **kwargs: Any) -> Chat:
    return Chat(base_url=server.url, model="scripted-small", store=tmp_path / "store",
                builtin_tools=False, **kwargs)  # fmt: skip


def spent(chat: Chat, thread: int) -> float:
    return thread_cost(chat.store.get(thread).turns, chat._cap_prices()) or 0.0


def sizes(server: ScriptedServer) -> list[int]:
    """How many messages each question's request sent, in order."""
    return [len(request.messages) for request in asked(server)]


def test_a_tool_loop_under_a_hard_cap_stops_within_it_saved_and_marked(
    scripted_server, tmp_path, hard_cap, monkeypatch
):
    loop(scripted_server)
    chat = make_chat(scripted_server, tmp_path, tools=[probe])
    thread = chat.new_thread()
    answer = chat.ask(thread, "Find it", options={"max_tokens": 10})
    assert spent(chat, thread) <= CAP  # without the check the loop spent ≈ $0.015
    assert (answer.status, answer.finish_reason) == ("incomplete", "budget")
    assert answer.note.startswith("stopped by the budget:") and "hard limit" in answer.note
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.finish_reason) == ("incomplete", "budget")
    assert "NBCHAT_MAX_BUDGET" in (turn.error or "")
    results = [m for m in turn.messages if m["role"] == "tool"]
    assert len(results) == len(RUNS) == len(asked(scripted_server))  # every result kept
    sent = sizes(scripted_server)
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "1")  # the administrator raises the cap
    assert chat.retry(thread).text == "Done."
    now = sizes(scripted_server)
    assert now[len(sent)] == sent[-1] + 2  # on from the last result, nothing sent again
    assert len(RUNS) == len(results) + len(now) - len(sent) - 1  # only the new rounds ran it


class Act(ClientTool):
    """A call with an effect, run only once its answer is claimed."""

    name = "act"
    description = "Do something in the notebook after the person's yes."
    parameters = {"type": "object", "properties": {"question": {"type": "string"}},
                  "required": ["question"]}  # fmt: skip
    acts_on_answer = True
    done: list[object] = []

    def prompt(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"kind": "confirm", "question": arguments["question"]}

    def parse_response(self, arguments: dict[str, Any], response: object) -> object:
        return response

    def get_tool_output(self, arguments: dict[str, Any], answer: object) -> str:
        self.done.append(answer)
        return "done " * 40


def test_a_waiting_call_past_a_hard_cap_is_not_run_and_can_be_answered_later(
    scripted_server, tmp_path, hard_cap, monkeypatch
):
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0.003")  # the question fits, going on does not
    scripted_server.script(Reply("", tool_calls=[("act", {"question": "Go? " * 100})], times=1),
                           Reply("Done."))  # fmt: skip
    act = Act()
    act.done.clear()
    chat = make_chat(scripted_server, tmp_path, tools=[act])
    thread = chat.new_thread()
    assert chat.ask(thread, "Do it", options={"max_tokens": 10}).status == "suspended"
    sent = len(asked(scripted_server))
    with pytest.raises(OverBudget) as refused:
        chat.answer_tool_call(thread, "yes")
    assert refused.value.hard and "the call still waits" in str(refused.value)
    assert act.done == [] and len(asked(scripted_server)) == sent  # nothing ran, nothing sent
    [waiting] = chat.pending_calls(thread)
    assert waiting.tool == "act" and chat.store.get(thread).turns[0].status == "suspended"
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "1")
    assert chat.answer_tool_call(thread, "yes").text == "Done."
    assert act.done == ["yes"]


def test_a_tool_loop_over_a_persons_budget_asks_and_the_yes_goes_on(scripted_server, tmp_path,
                                                                     priced):  # fmt: skip
    loop(scripted_server, times=3)
    chat = make_chat(scripted_server, tmp_path, tools=[probe], budget=0.004)
    thread = chat.new_thread()
    answer = chat.ask(thread, "Find it", options={"max_tokens": 10})
    assert answer.status == "suspended" and answer.finish_reason == "budget"
    [question] = answer.pending
    assert question.asks_budget and "crosses your budget" in question.prompt.question
    assert question.prompt.kind == "confirm"
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.finish_reason, turn.pending) == ("suspended", "budget", [question])
    runs, sent = len(RUNS), sizes(scripted_server)
    assert runs == len(sent) < 4  # it stopped before the model's next round
    while (answer := chat.answer_tool_call(thread, "yes")).status == "suspended":
        assert answer.pending[0].asks_budget  # each further crossing asks again
    assert answer.text == "Done." and answer.status == "complete"
    after = sizes(scripted_server)
    assert after[: len(sent)] == sent and after == [1, 3, 5, 7]  # nothing was sent twice
    assert len(RUNS) == 3  # nor was a tool run again
    stored = chat.store.get(thread).turns[0]
    assert stored.status == "complete" and not stored.pending
    assert [m["role"] for m in stored.messages].count("tool") == 3  # no result for the yes


def test_no_to_going_past_the_budget_ends_the_turn_with_what_it_has(scripted_server, tmp_path,
                                                                    priced):  # fmt: skip
    loop(scripted_server)
    chat = make_chat(scripted_server, tmp_path, tools=[probe], budget=0.004)
    thread = chat.new_thread()
    assert chat.ask(thread, "Find it", options={"max_tokens": 10}).status == "suspended"
    sent = len(asked(scripted_server))
    answer = chat.answer_tool_call(thread, "no")
    assert (answer.status, answer.finish_reason) == ("incomplete", "budget")
    assert len(asked(scripted_server)) == sent
    turn = chat.store.get(thread).turns[0]
    assert (turn.status, turn.finish_reason, turn.pending) == ("incomplete", "budget", [])


def test_the_title_is_checked_and_not_asked_past_the_budget(scripted_server, tmp_path, priced):
    scripted_server.script(Reply("Fine."))
    chat = make_chat(scripted_server, tmp_path, budget=0.0015)  # the answer fits; a title not
    thread = chat.new_thread()
    chat.ask(thread, "Tell me about budgets", options={"max_tokens": 10})
    assert chat.wait_for_titles(10)
    assert not [r for r in scripted_server.chat_requests if is_title_body({"messages": r.messages})]
    assert chat.store.get(thread).title == question_title("Tell me about budgets")


def test_the_summary_is_checked_and_not_made_past_the_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [1.0, 1000.0]}')
    with ScriptedServer(context_size=2000) as server:
        server.script(Reply("A summary.", when=SUMMARY_REQUEST), Reply("Noted."))
        chat = make_chat(server, tmp_path, window="summarize", budget=0.05)
        thread = chat.new_thread(system="You count.")
        for n in range(200):
            chat.append_response(thread, f"Turn {n}: remember {n * 7}.", f"Remembered {n * 7}.")
        answer = chat.ask(thread, "What was the first number?", options={"max_tokens": 10})
        assert answer.text == "Noted."  # the oldest turns were left out instead
        assert not [r for r in server.chat_requests
                    if SUMMARY_REQUEST in json.dumps(r.messages[-1].get("content"))]
        assert SETTING not in chat.store.get(thread).settings


def test_an_unset_max_tokens_is_sent_bounded_by_what_the_cap_leaves(scripted_server, tmp_path,
                                                                    hard_cap, monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0.1")  # room for ~2,500 tokens of answer
    scripted_server.script(Reply("Fine."))
    chat = make_chat(scripted_server, tmp_path)
    chat.ask(chat.new_thread(), "Hello there")
    bound = asked(scripted_server)[-1].body["max_tokens"]
    price = chat._cap_prices()["scripted-small"]
    assert 1024 <= bound < 4096 and price.cost(0, bound) <= 0.1
    assert price.cost(20, bound + 30) > 0.1 - price.cost(20, 0)  # it is what is left, no less
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "50")  # far from the cap: nothing is added
    chat.ask(chat.new_thread(), "Hello there")
    assert "max_tokens" not in asked(scripted_server)[-1].body


def test_a_model_that_calls_a_tool_after_its_rounds_are_spent_ends_the_turn_saved_and_marked(
    scripted_server, tmp_path
):
    RUNS.clear()
    scripted_server.script(Reply("", tool_calls=[("probe", {"x": 1})]))  # even with no tools
    chat = make_chat(scripted_server, tmp_path, tools=[probe], max_tool_rounds=2)
    thread = chat.new_thread()
    answer = chat.ask(thread, "Find it")
    assert RUNS == [1, 1]  # two rounds ran their call; the third round offered no tools
    assert [bool(r.body.get("tools")) for r in asked(scripted_server)] == [True, True, False]
    assert answer.status == "incomplete"
    assert answer.note.startswith("stopped after 2 rounds of tool calls: the model asked for probe")
    (turn,) = chat.store.get(thread).turns
    assert turn.status == "incomplete"  # never left streaming
