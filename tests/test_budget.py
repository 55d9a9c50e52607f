"""Budgets: a question over one sends nothing until the person says yes; caps hold."""

from __future__ import annotations

import pytest

from nbchat import Chat, OverBudget
from nbchat.testing import Reply, ScriptedServer
from shell_helpers import asked

PRICES = '{"scripted-small": [100.0, 400.0]}'  # dear, so a few tokens cross a small budget


@pytest.fixture
def priced(monkeypatch):
    monkeypatch.setenv("NBCHAT_PRICES", PRICES)


def make_chat(server: ScriptedServer, tmp_path, **kwargs) -> Chat:
    return Chat(base_url=server.url, model="scripted-small", store=tmp_path / "store",
                builtin_tools=False, **kwargs)  # fmt: skip


def test_a_question_over_the_thread_budget_sends_nothing_until_yes(scripted_server, tmp_path,
                                                                   priced):  # fmt: skip
    scripted_server.script(Reply("Answer."))
    chat = make_chat(scripted_server, tmp_path, budget=0.3)
    thread = chat.new_thread()
    chat.ask(thread, "Hi", options={"max_tokens": 10})  # ≈ $0.006 at most: within the budget
    spent = chat.store.get(thread).turns
    sent = len(asked(scripted_server))
    with pytest.raises(OverBudget) as raised:
        chat.ask(thread, "And again, at length?")  # an answer of up to 1,024 tokens: ≈ $0.41
    assert len(asked(scripted_server)) == sent  # nothing went out
    assert chat.store.get(thread).turns == spent  # nor was the question saved
    error = raised.value
    assert error.scope == "thread" and error.budget == 0.3 and not error.hard
    assert error.spent > 0 and error.estimate > 0.4
    assert "--over-budget" in str(error) and "nothing was sent" in str(error)
    assert chat.ask(thread, "And again, at length?", over_budget=True).text == "Answer."
    assert len(asked(scripted_server)) == sent + 1


def test_the_estimate_counts_max_tokens_for_the_answer(scripted_server, tmp_path, priced):
    chat = make_chat(scripted_server, tmp_path, budget=0.3)
    thread = chat.new_thread()
    chat.ask(thread, "Short?", options={"max_tokens": 20})  # within 0.3 with a short answer
    with pytest.raises(OverBudget):
        chat.ask(thread, "Short?", options={"max_tokens": 2000})


def test_the_kernel_budget_counts_what_this_kernel_spent(scripted_server, tmp_path, priced):
    scripted_server.script(Reply("word " * 500))  # 500 tokens out: $0.20 spent
    chat = make_chat(scripted_server, tmp_path, kernel_budget=0.1)  # a new store: $0 so far
    first, second = chat.new_thread(), chat.new_thread()
    chat.ask(first, "One", options={"max_tokens": 5})  # estimated at 5 tokens out
    with pytest.raises(OverBudget) as raised:
        chat.ask(second, "Two", options={"max_tokens": 5})  # another thread, the same kernel
    assert raised.value.scope == "kernel"


def test_a_history_question_is_checked_too(scripted_server, tmp_path, priced):
    from nbchat import ChatHistory

    chat = make_chat(scripted_server, tmp_path, budget=0.0, kernel_budget=0.0)
    with pytest.raises(OverBudget):
        chat.ask_with_history("Hello?", ChatHistory())
    assert scripted_server.chat_requests == []


def test_the_budget_comes_from_the_environment(scripted_server, tmp_path, priced, monkeypatch):
    monkeypatch.setenv("NBCHAT_BUDGET", "0.01")
    chat = make_chat(scripted_server, tmp_path)
    with pytest.raises(OverBudget):
        chat.ask(chat.new_thread(), "Hello?")
    assert scripted_server.chat_requests == []


def test_without_a_price_a_soft_budget_does_not_stop(scripted_server, tmp_path, monkeypatch):
    scripted_server.script(Reply("Free."))
    chat = make_chat(scripted_server, tmp_path, budget=0.0)
    assert chat.ask(chat.new_thread(), "Hello?").text == "Free."


def test_the_administrators_cap_is_not_lifted_by_a_bigger_budget(scripted_server, tmp_path,
                                                                 priced, monkeypatch):  # fmt: skip
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0.01")
    chat = make_chat(scripted_server, tmp_path, budget=1000.0)
    thread = chat.new_thread()
    with pytest.raises(OverBudget) as raised:
        chat.ask(thread, "Hello?")
    assert "NBCHAT_MAX_BUDGET" in str(raised.value) and not raised.value.hard
    scripted_server.script(Reply("Yes."))
    assert chat.ask(thread, "Hello?", over_budget=True).text == "Yes."  # a soft cap asks


def test_a_hard_cap_takes_no_yes(scripted_server, tmp_path, priced, monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0.01")
    monkeypatch.setenv("NBCHAT_HARD_BUDGET", "1")
    chat = make_chat(scripted_server, tmp_path, budget=1000.0)
    chat.prices = {}  # the person's own (empty) prices do not price the cap: NBCHAT_PRICES does
    with pytest.raises(OverBudget) as raised:
        chat.ask(chat.new_thread(), "Hello?", over_budget=True)
    assert raised.value.hard and "hard limit" in str(raised.value)
    assert scripted_server.chat_requests == []


def test_a_hard_cap_refuses_a_model_without_a_price(scripted_server, tmp_path, monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_KERNEL_BUDGET", "5")
    monkeypatch.setenv("NBCHAT_HARD_BUDGET", "yes")
    chat = make_chat(scripted_server, tmp_path)
    with pytest.raises(OverBudget) as raised:
        chat.ask(chat.new_thread(), "Hello?", over_budget=True)
    assert "has no price" in str(raised.value) and "NBCHAT_PRICES" in str(raised.value)
    assert scripted_server.chat_requests == []


def test_a_malformed_cap_fails_closed(scripted_server, tmp_path, priced, monkeypatch):
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "lots")
    chat = make_chat(scripted_server, tmp_path)
    with pytest.raises(OverBudget) as raised:
        chat.ask(chat.new_thread(), "Hello?")
    assert raised.value.budget == 0.0


def test_a_hard_cap_holds_for_a_history_question_too(scripted_server, tmp_path, priced,
                                                    monkeypatch):  # fmt: skip
    from nbchat import ChatHistory

    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0")
    monkeypatch.setenv("NBCHAT_HARD_BUDGET", "1")
    chat = make_chat(scripted_server, tmp_path)
    with pytest.raises(OverBudget):
        chat.ask_with_history("Hello?", ChatHistory(), over_budget=True)
    assert scripted_server.chat_requests == []


def test_a_new_thread_made_for_a_question_over_budget_is_not_left_behind(run, server, priced):
    server.script(Reply("Answer."))
    run("%config ChatMagics.budget = 0.01")
    refused = run("%chat -n Tell me everything about budgets")
    assert "--over-budget" in refused.err and not asked(server)
    assert "No threads yet" in run("%chat --list").out
    assert run("%chat --over-budget -n Tell me everything").error is None
    assert len(asked(server)) == 1


def test_a_budget_stop_shows_in_the_cell_show_and_the_panel(run, ip, server, monkeypatch):
    from nbchat.jupyter.panel._messages import conversation_view

    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [10.0, 40.0]}')
    monkeypatch.setenv("NBCHAT_MAX_BUDGET", "0.01")
    monkeypatch.setenv("NBCHAT_HARD_BUDGET", "1")
    server.script(Reply("", tool_calls=[("probe", {})], when=lambda body: bool(body.get("tools"))))
    run("import nbchat\n@nbchat.tool\ndef probe() -> str:\n    'Look again.'\n"
        "    return 'nothing yet ' * 10\n%config ChatMagics.tools = ['probe']")  # fmt: skip
    cell = run("%chat --max-tokens 10 Find it")
    assert cell.error is None and "stopped by the budget: going on would cost ≈ $" in cell.out
    shown = run("%chat --show")
    assert "(stopped by the budget: going on would cost ≈ $" in shown.out
    assert "NBCHAT_MAX_BUDGET" in shown.out and "hard limit" in shown.out
    chat = ip.magics_manager.registry["ChatMagics"].chat
    _, plain = conversation_view(chat.store.get(chat.store.threads()[0].id))
    assert "stopped by the budget: going on would cost" in plain


def test_a_budget_crossed_mid_turn_asks_in_the_cell_and_answer_yes_goes_on(run, server,
                                                                          monkeypatch):  # fmt: skip
    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [10.0, 40.0]}')
    server.script(Reply("", tool_calls=[("probe", {})], times=2,
                        when=lambda body: bool(body.get("tools"))), Reply("Found."))  # fmt: skip
    run("import nbchat\n@nbchat.tool\ndef probe() -> str:\n    'Look again.'\n"
        "    return 'nothing yet ' * 10\n%config ChatMagics.tools = ['probe']\n"
        "%config ChatMagics.budget = 0.0065")  # fmt: skip
    cell = run("%chat --max-tokens 10 Find it")
    assert "crosses your budget (ChatMagics.budget" in cell.out and "Go on?" in cell.out
    assert 0 < len(asked(server)) < 3  # it asked before the model's last round
    while "Found." not in (answered := run("%chat --answer yes")).out:
        assert "Go on?" in answered.out and answered.error is None
    assert [len(r.messages) for r in asked(server)] == [1, 3, 5]  # each request went once
