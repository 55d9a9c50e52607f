"""No API key leaves through an error, even when the server echoes it back."""

from __future__ import annotations

import pickle
import traceback

import pytest

from nbchat import Chat
from nbchat.config import Settings
from nbchat.errors import LLMError, ServerError
from nbchat.llm import LLMClient
from nbchat.testing import Reply

SECRET = "sk-proj-Planted0123456789abcdef"
OTHER_TOKEN = "eyJhbGciOiJIUzI1NiJ9.payload.signature"
ECHO = (
    f"upstream failed; request headers were Authorization: Bearer {SECRET}, "
    f"X-Forwarded-Auth: bearer {OTHER_TOKEN}; retry with api_key={SECRET[::-1]}"
)
LEAKS = (SECRET, OTHER_TOKEN, SECRET[::-1], SECRET[8:20])


def _assert_clean(error: BaseException) -> None:
    texts = [
        str(error),
        repr(error),
        repr(vars(error)),
        "".join(traceback.format_exception(error)),
        pickle.dumps(error).decode("latin-1"),
        str(pickle.loads(pickle.dumps(error))),
    ]
    for text in texts:
        for leak in LEAKS:
            assert leak not in text


def test_a_server_that_echoes_the_key_in_a_500_does_not_leak_it(scripted_server, tmp_path):
    scripted_server.script(Reply(status=500, error_message=ECHO))
    chat = Chat(
        base_url=scripted_server.url, api_key=SECRET, store=tmp_path, model="scripted-small"
    )
    thread = chat.new_thread()
    with pytest.raises(ServerError) as caught:
        chat.ask(thread, "hello")
    assert scripted_server.chat_requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    error = caught.value
    assert str(error).startswith(
        f"the model endpoint at {scripted_server.url} answered HTTP 500: upstream failed; "
        "request headers were Authorization: Bearer [redacted], "
        "X-Forwarded-Auth: bearer [redacted]; retry with api_key=[redacted]"
    )
    _assert_clean(error)
    stored = chat.store.get(thread).turns[-1]
    assert stored.status == "failed" and "[redacted]" in (stored.error or "")
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert files
    for path in files:
        for leak in LEAKS:
            assert leak not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_every_client_call_redacts(scripted_server, provider):
    url = scripted_server.url if provider == "openai" else scripted_server.ollama_url
    settings = Settings(base_url=url, provider=provider, api_key=SECRET, max_retries=0)
    client = LLMClient(settings)
    messages = [{"role": "user", "content": "hi"}]
    for call in (
        lambda: list(client.stream(messages, model="scripted-small")),
        lambda: client.complete(messages, model="scripted-small"),
    ):
        scripted_server.script(Reply(status=400, error_message=ECHO))
        with pytest.raises(LLMError) as caught:
            call()
        assert "[redacted]" in str(caught.value)
        _assert_clean(caught.value)


def test_redact_keeps_ordinary_text() -> None:
    from nbchat.llm._http import redact

    text = "the model 'basic chat' ran out of tokens: bearer of bad news; sk-1 is short"
    assert redact(text) == text
