"""Context and images on the wire: what the scripted server receives from each provider."""

from __future__ import annotations

import base64

import matplotlib
import pandas as pd
import pytest

from nbchat.base.config import Settings
from nbchat.base.events import TextDelta
from nbchat.context import CONTEXT_NOTE, describe
from nbchat.llm import LLMClient
from nbchat.testing import Reply
from provider_helpers import PROVIDERS, base_url

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture
def items():
    df = pd.DataFrame({"price": [1.0, 2.0], "units": [3, 4]})
    fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
    ax.plot([1, 2], [3, 4])
    yield [describe(df, "df"), describe(fig, "fig")]
    plt.close(fig)


def stream(server, provider, messages):
    url = base_url(server, provider)
    client = LLMClient(Settings(base_url=url, provider=provider, model="scripted-small"))
    return "".join(
        e.text for e in client.stream(messages, model="scripted-small") if isinstance(e, TextDelta)
    )


def test_openai_gets_the_question_then_context_and_image_parts(scripted_server, items):
    df, fig = items
    scripted_server.script(Reply("Seen."))
    message = {"role": "user", "content": "Why?", "context": [df.to_dict(), fig.to_dict()]}
    assert stream(scripted_server, "openai", [message]) == "Seen."
    assert scripted_server.chat_requests[-1].messages == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Why?"},
                {"type": "text", "text": CONTEXT_NOTE},
                {
                    "type": "text",
                    "text": f'<context name="df" kind="DataFrame 2×2">\n{df.text}\n</context>',
                },
                {
                    "type": "text",
                    "text": f'<context name="fig" kind="Figure 1 axes">\n{fig.text}\n</context>',
                },
                {"type": "image_url", "image_url": {"url": fig.image.data_url}},
            ],
        }
    ]
    assert scripted_server.chat_requests[-1].images == [base64.b64decode(fig.image.data)]


def test_ollama_gets_one_text_and_the_images_field(scripted_server, items):
    df, fig = items
    scripted_server.script(Reply("Seen."))
    message = {"role": "user", "content": "Why?", "context": [df.to_dict(), fig.to_dict()]}
    assert stream(scripted_server, "ollama", [message]) == "Seen."
    assert scripted_server.chat_requests[-1].messages == [
        {
            "role": "user",
            "content": f"Why?\n\n{CONTEXT_NOTE}\n\n{df.as_text()}\n\n{fig.as_text()}",
            "images": [fig.image.data],
        }
    ]
    assert scripted_server.chat_requests[-1].images == [base64.b64decode(fig.image.data)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_messages_without_context_are_sent_unchanged(scripted_server, provider):
    messages = [{"role": "user", "content": "hi"}]
    stream(scripted_server, provider, messages)
    assert scripted_server.chat_requests[-1].messages == messages
    assert scripted_server.chat_requests[-1].images == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_demo_model_says_which_context_it_received(scripted_server, provider, items):
    message = {"role": "user", "content": "Why?", "context": [i.to_dict() for i in items]}
    assert stream(scripted_server, provider, [message]) == (
        'You asked: "Why?" and attached `df` (DataFrame 2×2), `fig` (Figure 1 axes), 1 image. '
        "I am **nbchat's offline demo model**: I received that context but cannot reason "
        "about it; connect a real model for real answers."
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_refuses_images_gives_one_line_naming_it(provider, items):
    from nbchat.base.errors import ServerError
    from nbchat.testing import ScriptedServer

    message = {"role": "user", "content": "Why?", "context": [i.to_dict() for i in items]}
    with ScriptedServer(text_only_models=["scripted-small"]) as server:
        with pytest.raises(ServerError) as caught:
            stream(server, provider, [message])
        assert str(caught.value).startswith("model 'scripted-small' did not accept the image")
        assert str(caught.value).endswith(
            "ask a model that reads images with -m MODEL, or ask without the picture"
        )
        assert "\n" not in str(caught.value)
        text_only = [{"role": "user", "content": "Why?", "context": [items[0].to_dict()]}]
        assert stream(server, provider, text_only).startswith('You asked: "Why?" and attached')


def test_the_official_clients_send_images_the_scripted_server_records(scripted_server, items):
    import ollama
    import openai

    fig = items[1]
    png = base64.b64decode(fig.image.data)
    with openai.OpenAI(base_url=scripted_server.url, api_key="sk-test", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="scripted-small",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {"type": "image_url", "image_url": {"url": fig.image.data_url}},
                    ],
                }
            ],
        )
    assert reply.choices[0].message.content.startswith('You asked: "What is this?" and attached')
    assert scripted_server.chat_requests[-1].images == [png]
    client = ollama.Client(host=scripted_server.ollama_url)
    try:
        answer = client.chat(
            model="scripted-small",
            messages=[{"role": "user", "content": "And this?", "images": [png]}],
        )
    finally:
        client.close()
    assert answer.message.content.startswith('You asked: "And this?" and attached 1 image.')
    assert scripted_server.chat_requests[-1].images == [png]


def test_context_without_an_image_is_sent_as_one_string(scripted_server, items):
    """Local chat templates join only strings: parts are for images alone."""
    df, _ = items
    scripted_server.script(Reply("Seen."))
    message = {"role": "user", "content": "Why?", "context": [df.to_dict()]}
    assert stream(scripted_server, "openai", [message]) == "Seen."
    sent = scripted_server.chat_requests[-1].messages[0]["content"]
    assert sent == (
        f"Why?\n\n{CONTEXT_NOTE}\n\n"
        f'<context name="df" kind="DataFrame 2×2">\n{df.text}\n</context>'
    )


def test_text_only_content_parts_from_a_history_are_joined(scripted_server):
    scripted_server.script(Reply("Seen."))
    parts = [{"type": "text", "text": "One."}, {"type": "text", "text": "Two."}]
    assert stream(scripted_server, "openai", [{"role": "user", "content": parts}]) == "Seen."
    assert scripted_server.chat_requests[-1].messages[0]["content"] == "One.\n\nTwo."
