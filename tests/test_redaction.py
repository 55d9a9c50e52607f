"""No API key leaves through an error, even when the server echoes it back."""

from __future__ import annotations

import pickle
import traceback

import pytest

from nbchat import Chat
from nbchat.base.config import Settings
from nbchat.base.errors import LLMError, ServerError
from nbchat.llm import LLMClient
from nbchat.testing import Reply

SECRET = "sk-proj-Planted0123456789abcdef"
OTHER_TOKEN = "eyJhbGciOiJIUzI1NiJ9.payload.signature"
ECHO = (
    f"upstream failed; request headers were Authorization: Bearer {SECRET}, "
    f"X-Forwarded-Auth: bearer {OTHER_TOKEN}; retry with api_key={SECRET[::-1]}"
)
LEAKS = (SECRET, OTHER_TOKEN, SECRET[::-1], SECRET[8:20])


def _assert_clean(error: BaseException, leaks: tuple[str, ...] = LEAKS) -> None:
    texts = [
        str(error),
        repr(error),
        repr(vars(error)),
        "".join(traceback.format_exception(error)),
        pickle.dumps(error).decode("latin-1"),
        str(pickle.loads(pickle.dumps(error))),
    ]
    for text in texts:
        for leak in leaks:
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


PASSWORD = "Pa55-word-planted"


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _stored_text(location: str) -> str:
    """Everything the store holds, as raw text: the TinyDB files, or the PostgreSQL rows."""
    from pathlib import Path

    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as conn:
            rows = conn.execute(
                "SELECT t::text FROM nbchat_turns t UNION ALL SELECT h::text FROM nbchat_threads h"
            ).fetchall()
        return "\n".join(row[0] for row in rows)
    files = [path for path in Path(location).rglob("*") if path.is_file()]
    return "\n".join(path.read_text(errors="replace") for path in files)


@pytest.mark.parametrize("failure", ["connection refused", "HTTP 400"])
def test_a_password_in_the_endpoint_url_is_never_shown_nor_stored(
    run, ip, scripted_server, location, monkeypatch, failure
):
    from IPython.core.error import UsageError

    if failure == "connection refused":
        host = f"127.0.0.1:{_closed_port()}"
    else:
        host = scripted_server.url.split("//", 1)[1].split("/", 1)[0]
        scripted_server.script(Reply(status=400, error_message="the request was invalid"))
    monkeypatch.setenv("NBCHAT_BASE_URL", f"http://ana:{PASSWORD}@{host}/v1")
    monkeypatch.setenv("NBCHAT_STORE", location)
    ran = run("%chat hello")
    assert type(ran.error) is UsageError
    message = str(ran.error)
    assert f"the model endpoint at http://[redacted]@{host}/v1 " in message
    if failure == "HTTP 400":
        assert scripted_server.chat_requests[-1].headers["Authorization"].startswith("Basic ")
    chat = ip.magics_manager.registry["ChatMagics"].chat
    error = ran.error.__cause__
    assert error is not None
    _assert_clean(error, (PASSWORD,))
    shown = run("%chat --show")
    assert shown.error is None and "[redacted]" in shown.out
    stored = chat.store.get(chat.threads()[0].id).turns[-1]
    assert stored.status == "failed" and stored.error is not None
    for text in (message, repr(chat.settings), repr(chat.llm), repr(chat.llm.settings),
                 shown.out, stored.error, _stored_text(location)):  # fmt: skip
        assert PASSWORD not in text
        assert "ana:" not in text


def test_redact_removes_the_user_and_password_of_any_url() -> None:
    from nbchat.base.config import redact_url
    from nbchat.llm._http import redact

    text = "at https://ana:secret@host.example/v1 and http://token@10.0.0.1:8000/x?a=b@c"
    expected = "at https://[redacted]@host.example/v1 and http://[redacted]@10.0.0.1:8000/x?a=b@c"
    assert redact_url(text) == expected
    assert redact(text) == expected
    plain = "mail ana@example.com or see https://example.com/@user"
    assert redact_url(plain) == plain


def test_the_policy_repr_hides_a_password_in_the_forced_url() -> None:
    from nbchat.base.policy import Policy

    shown = repr(Policy(force_base_url="https://ana:s3cret-pass@llm.example.org/v1"))
    assert "s3cret-pass" not in shown and "ana" not in shown
    assert "llm.example.org/v1" in shown
