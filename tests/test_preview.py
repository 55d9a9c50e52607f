"""Chat.preview: the request a question would send, equal byte for byte to what it then sends."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

from nbchat import Chat, tool
from nbchat.base._secrets import REDACTED, noting_scrubs
from nbchat.context import describe
from nbchat.testing import Reply, ScriptedServer
from provider_helpers import PROVIDERS, base_url

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SECRET = "sk-preview-0123456789abcdef"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def chat_for(server: ScriptedServer, provider: str, tmp_path, **kwargs) -> Chat:
    return Chat(base_url=base_url(server, provider), provider=provider, model="scripted-small",
                store=tmp_path / "store", **kwargs)  # fmt: skip


def sent_after(chat: Chat, server: ScriptedServer, thread: int, question: str, scrubbed=(),
               **kwargs):  # fmt: skip
    """The preview of ``question``, then the request the same question sends."""
    before = len(server.chat_requests)
    preview = chat.preview(thread, question, scrubbed=scrubbed, **kwargs)
    assert before == len(server.chat_requests)  # the preview sent nothing
    chat.ask(thread, question, **kwargs)
    return preview, server.chat_requests[before]


@pytest.fixture
def figure():
    fig, ax = plt.subplots(figsize=(3, 2), dpi=40)
    ax.plot([1, 2], [3, 4])
    yield fig
    plt.close(fig)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_preview_is_what_the_question_then_sends(scripted_server, provider, tmp_path, figure):
    scripted_server.script(Reply("Fine."))
    chat = chat_for(scripted_server, provider, tmp_path, tools=[add])
    chat.instructions = "Always answer in French."
    thread = chat.new_thread(system="You are terse.")
    chat.ask(thread, "First question?")
    df = pd.DataFrame({"price": [1.5, 2.5], "city": ["a", "b"]})
    context = [describe(df, "df"), describe(figure, "fig")]
    requests = len(scripted_server.chat_requests)
    preview = chat.preview(thread, "Why?", context=context, options={"max_tokens": 50})
    assert len(scripted_server.chat_requests) == requests  # nothing went out
    chat.ask(thread, "Why?", context=context, options={"max_tokens": 50})
    sent = scripted_server.chat_requests[requests]
    assert preview.content == sent.raw
    assert preview.url.endswith(sent.path)
    sources = [part.source for part in preview.parts]
    assert sources == [
        "system prompt", "project instructions", "earlier turn 1 (question)",
        "earlier turn 1 (answer)", "the question", "context note", "@df", "figure @fig",
        "tool schemas (ask_user, choose, confirm, add)",
    ]
    assert [p.image for p in preview.parts].count(True) == 1
    assert preview.tokens == sum(p.tokens for p in preview.parts) > 0
    assert preview.left_out == ()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_windowed_thread_says_which_turns_it_leaves_out(scripted_server, tmp_path, provider,
                                                          monkeypatch):  # fmt: skip
    monkeypatch.setenv("NBCHAT_CONTEXT_SIZE", "1500")
    scripted_server.script(Reply("An answer of a few words."))
    chat = chat_for(scripted_server, provider, tmp_path, builtin_tools=False)
    thread = chat.new_thread()
    chat.update_thread_title(thread, "Long")
    for n in range(30):
        chat.append_response(thread, f"question {n} " + "word " * 40, "answer " * 40)
    preview, sent = sent_after(chat, scripted_server, thread, "And now?")
    assert preview.content == sent.raw
    assert preview.left_out and preview.left_out == tuple(range(len(preview.left_out)))
    kept = {p.turn for p in preview.parts if p.turn is not None}
    assert kept == set(range(len(preview.left_out), 30))
    assert preview.context_size == 1500 and 0 < preview.share <= 1


def test_cost_at_the_configured_prices(scripted_server, tmp_path, monkeypatch):
    monkeypatch.setenv("NBCHAT_PRICES", '{"scripted-small": [2.0, 8.0]}')
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    thread = chat.new_thread()
    preview = chat.preview(thread, "How much?", options={"max_tokens": 100})
    assert preview.cost == pytest.approx(preview.tokens * 2.0 / 1e6)
    assert preview.max_cost == pytest.approx((preview.tokens * 2.0 + 100 * 8.0) / 1e6)
    assert chat.preview(thread, "How much?").max_cost is None
    chat.prices = {}
    assert chat.preview(thread, "How much?").cost is None


def test_secrets_are_named_never_shown(scripted_server, tmp_path, monkeypatch):
    monkeypatch.setenv("WAREHOUSE_TOKEN", SECRET)
    scripted_server.script(Reply("Ok."))
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    thread = chat.new_thread()
    config = {"url": "db://warehouse", "token": SECRET}
    with noting_scrubs() as noted:
        item = describe(config, "config")
    preview, sent = sent_after(chat, scripted_server, thread, "Is @config right?",
                               context=[item], scrubbed=noted)  # fmt: skip
    assert preview.content == sent.raw
    assert SECRET.encode() not in preview.content and REDACTED.encode() in preview.content
    assert preview.scrubs == [("@config", "WAREHOUSE_TOKEN")]
    assert SECRET not in repr(preview) and all(SECRET not in p.text for p in preview.parts)


def test_objects_described_by_the_preview_name_their_scrubs(scripted_server, tmp_path,
                                                            monkeypatch):  # fmt: skip
    monkeypatch.setenv("DB_PASSWORD", SECRET)
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    preview = chat.preview(None, "Check this", context={"settings": {"password": SECRET}})
    assert preview.scrubs == [("@settings", "DB_PASSWORD")]
    assert chat.threads() == []  # previewing without a thread makes none


def test_a_secret_typed_into_the_question_is_named_as_sent_as_typed(scripted_server, tmp_path,
                                                                    monkeypatch):  # fmt: skip
    monkeypatch.setenv("MY_API_KEY", SECRET)
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    preview = chat.preview(None, f"Is {SECRET} a valid key?")
    question = next(p for p in preview.parts if p.source == "the question")
    assert question.unscrubbed == ("MY_API_KEY",)


def test_a_pending_call_is_closed_in_the_preview_as_the_question_closes_it(scripted_server,
                                                                           tmp_path):  # fmt: skip
    scripted_server.script(
        Reply(tool_calls=[("ask_user", '{"question": "Which year?"}')], when="year"),
        Reply("Done."),
    )
    chat = Chat(base_url=scripted_server.url, model="scripted-small", store=tmp_path / "s")
    thread = chat.new_thread()
    assert chat.ask(thread, "Plot the year").status == "suspended"
    preview, sent = sent_after(chat, scripted_server, thread, "Never mind, what is 2+2?")
    assert preview.content == sent.raw
    assert chat.store.get(thread).turns[0].status == "interrupted"
