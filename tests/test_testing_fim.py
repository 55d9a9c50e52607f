"""The scripted server's fill-in-the-middle forms, through the official clients and raw HTTP.

llama.cpp's ``/infill``, OpenAI's legacy ``/v1/completions`` with a suffix
(DeepSeek's ``/beta/completions``), Mistral's ``/v1/fim/completions`` and
Ollama's ``/api/generate`` with a suffix: each whole and streamed, picked by
the prefix, cut by the request's limit, refused as a server without FIM
refuses, and a client hanging up mid-stream seen in the log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import openai
import pytest

from nbchat.testing import Reply, ScriptedServer, pytest_plugin

MODEL = "nbchat-demo"
ADD = Reply("a, b):\n    return a + b", when=re.compile(r"def add\($"))
ANY = Reply("pass")

scripted_server = pytest_plugin.scripted_server


@pytest.fixture
def sdk(scripted_server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=scripted_server.url, api_key="sk-test", max_retries=0) as client:
        yield client


@pytest.fixture
def ollama_client(scripted_server: ScriptedServer) -> Iterator[ollama.Client]:
    client = ollama.Client(host=scripted_server.ollama_url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


def sse_data(text: str) -> list[Any]:
    """The ``data:`` payloads of an SSE body, JSON-decoded ("[DONE]" kept as it is)."""
    payloads = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


# -- OpenAI's legacy completions (and DeepSeek's) -------------------------------------


def test_completions_whole_through_the_openai_sdk(scripted_server, sdk):
    scripted_server.script(ADD, ANY)
    completion = sdk.completions.create(
        model=MODEL, prompt="x = 1\ndef add(", suffix="\n\nprint(add(1, 2))", max_tokens=32
    )
    assert (completion.id, completion.object, completion.model) == (
        "cmpl-scripted-1", "text_completion", MODEL)  # fmt: skip
    assert [(c.index, c.text, c.finish_reason) for c in completion.choices] == [
        (0, "a, b):\n    return a + b", "stop")]  # fmt: skip
    assert completion.usage is not None
    usage = completion.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (7, 6, 13)
    (request,) = scripted_server.requests
    assert (request.method, request.path, request.protocol) == (
        "POST", "/v1/completions", "openai-completions")  # fmt: skip
    assert (request.is_fim, request.is_chat) == (True, False)
    assert (request.fim_prefix, request.fim_suffix) == ("x = 1\ndef add(", "\n\nprint(add(1, 2))")
    assert request.messages == [{"role": "user", "content": "x = 1\ndef add("}]
    assert request.options == {"max_tokens": 32}
    assert (request.status, request.completed, request.disconnected) == (200, True, False)


def test_completions_streamed_through_the_openai_sdk(scripted_server, sdk):
    scripted_server.script(ADD)
    chunks = list(
        sdk.completions.create(
            model=MODEL, prompt="def add(", suffix="\n", stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert [[(c.text, c.finish_reason) for c in chunk.choices] for chunk in chunks] == [
        [("a, ", None)], [("b):\n    ", None)], [("return ", None)], [("a ", None)],
        [("+ ", None)], [("b", None)], [("", "stop")], [],
    ]  # fmt: skip
    assert {chunk.id for chunk in chunks} == {"cmpl-scripted-1"}
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    (request,) = scripted_server.requests
    assert (request.chunks_sent, request.completed) == (6, True)


def test_deepseek_beta_completions_are_the_same_form(scripted_server):
    scripted_server.script(ADD)
    base = f"{scripted_server.ollama_url}/beta"
    with openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0) as deepseek:
        completion = deepseek.completions.create(model=MODEL, prompt="def add(", suffix="\n")
    assert completion.choices[0].text == "a, b):\n    return a + b"
    (request,) = scripted_server.requests
    assert (request.path, request.protocol) == ("/beta/completions", "openai-completions")


def test_the_raw_completions_stream_ends_with_done(scripted_server, http):
    scripted_server.script(Reply("one two"))
    body = {"model": MODEL, "prompt": "p", "suffix": "s", "stream": True}
    response = http.post(f"{scripted_server.url}/completions", json=body)
    events = sse_data(response.text)
    assert [e if e == "[DONE]" else e["choices"] for e in events] == [
        [{"text": "one ", "index": 0, "logprobs": None, "finish_reason": None}],
        [{"text": "two", "index": 0, "logprobs": None, "finish_reason": None}],
        [{"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "[DONE]",
    ]


# -- Ollama's generate --------------------------------------------------------------


def test_ollama_generate_streamed_through_the_ollama_client(scripted_server, ollama_client):
    scripted_server.script(ADD)
    parts = list(ollama_client.generate(MODEL, "def add(", suffix="\n", stream=True,
                                        options={"temperature": 0.2}))  # fmt: skip
    assert [(p.response, p.done, p.done_reason) for p in parts] == [
        ("a, ", False, None), ("b):\n    ", False, None), ("return ", False, None),
        ("a ", False, None), ("+ ", False, None), ("b", False, None), ("", True, "stop"),
    ]  # fmt: skip
    final = parts[-1]
    assert (final.model, final.prompt_eval_count, final.eval_count) == (MODEL, 2, 6)
    (request,) = scripted_server.requests
    assert (request.path, request.protocol, request.fim_suffix) == (
        "/api/generate", "ollama-generate", "\n")  # fmt: skip
    assert request.options == {"temperature": 0.2}


def test_ollama_generate_whole_cut_by_num_predict(scripted_server, ollama_client):
    scripted_server.script(ADD)
    answer = ollama_client.generate(MODEL, "def add(", suffix="\n", raw=True,
                                    options={"num_predict": 2})  # fmt: skip
    assert (answer.response, answer.done, answer.done_reason, answer.eval_count) == (
        "a, b):\n    ", True, "length", 2)  # fmt: skip
    assert answer.context is None  # raw: no context comes back
    assert scripted_server.requests[0].options == {"num_predict": 2, "raw": True}


def test_ollama_generate_with_an_unknown_model_is_refused_as_ollama_does(ollama_client):
    with pytest.raises(ollama.ResponseError) as caught:
        ollama_client.generate("no-such-model", "def add(", suffix="\n")
    assert (caught.value.status_code, caught.value.error) == (
        404, 'model "no-such-model" not found, try pulling it first')  # fmt: skip


# -- llama.cpp's /infill --------------------------------------------------------------


def test_infill_whole(scripted_server, http):
    scripted_server.script(ADD)
    body = {
        "input_prefix": "x = 1\n", "prompt": "def add(", "input_suffix": "\n",
        "input_extra": [{"filename": "util.py", "text": "import math\n"}],
        "n_predict": 16, "temperature": 0.1, "stream": False,
    }  # fmt: skip
    response = http.post(f"{scripted_server.ollama_url}/infill", json=body)
    assert response.status_code == 200
    answer = response.json()
    assert {k: answer[k] for k in ("content", "stop", "stop_type", "stopping_word",
                                   "tokens_predicted", "tokens_evaluated", "truncated")} == {
        "content": "a, b):\n    return a + b", "stop": True, "stop_type": "eos",
        "stopping_word": "", "tokens_predicted": 6, "tokens_evaluated": 5, "truncated": False,
    }  # fmt: skip
    assert answer["generation_settings"]["n_predict"] == 16
    assert answer["timings"]["predicted_n"] == 6
    (request,) = scripted_server.requests
    assert (request.path, request.protocol, request.model) == ("/infill", "llama-infill", None)
    assert request.fim_prefix == "x = 1\ndef add("  # input_prefix, then prompt
    assert request.options == {"n_predict": 16, "temperature": 0.1}


def test_infill_streamed_has_no_done_line(scripted_server, http):
    scripted_server.script(Reply("one two"))
    body = {"input_prefix": "p", "input_suffix": "s", "stream": True}
    response = http.post(f"{scripted_server.ollama_url}/infill", json=body)
    assert response.headers["content-type"] == "text/event-stream"
    events = sse_data(response.text)
    assert [(e["content"], e["stop"], e.get("stop_type")) for e in events] == [
        ("one ", False, None), ("two", False, None), ("", True, "eos")]  # fmt: skip
    assert "[DONE]" not in response.text


def test_infill_stop_strings_and_limits(scripted_server, http):
    scripted_server.script(Reply("a, b):\n    return a + b"))
    url = f"{scripted_server.ollama_url}/infill"
    worded = http.post(url, json={"input_prefix": "", "input_suffix": "", "stop": ["\n"]}).json()
    limited = http.post(url, json={"input_prefix": "", "input_suffix": "", "n_predict": 1}).json()
    assert [(a["content"], a["stop_type"], a["stopping_word"]) for a in (worded, limited)] == [
        ("a, b):", "word", "\n"), ("a, ", "limit", "")]  # fmt: skip


def test_infill_refuses_what_llama_cpp_refuses(scripted_server, http):
    url = f"{scripted_server.ollama_url}/infill"
    answers = [http.post(url, json=body) for body in (
        {"input_prefix": "p"},
        {"input_prefix": "p", "input_suffix": "s", "input_extra": "nope"},
        {"input_prefix": "p", "input_suffix": "s", "input_extra": [{"filename": "f"}]},
    )]  # fmt: skip
    assert [(a.status_code, a.json()) for a in answers] == [
        (400, {"error": {"code": 400, "message": '"input_suffix" is required',
                         "type": "invalid_request_error"}}),
        (400, {"error": {"code": 400, "message": '"input_extra" must be an array of '
                         '{"filename": string, "text": string}', "type": "invalid_request_error"}}),
        (400, {"error": {"code": 400, "message": 'extra_context chunk must contain a "text" field '
                         "with a string value", "type": "invalid_request_error"}}),
    ]  # fmt: skip


def test_infill_error_mid_stream_is_an_error_line(scripted_server, http):
    scripted_server.script(Reply("one two three", error_after=1))
    body = {"input_prefix": "p", "input_suffix": "s", "stream": True}
    text = http.post(f"{scripted_server.ollama_url}/infill", json=body).text
    assert text.splitlines() == [
        'data: {"index":0,"content":"one ","tokens":[],"stop":false,"id_slot":0,'
        '"tokens_predicted":1,"tokens_evaluated":2}', "",
        'error: {"code":500,"message":"Internal Server Error","type":"server_error"}', "",
    ]  # fmt: skip


# -- Mistral's /v1/fim/completions ----------------------------------------------------


def test_mistral_fim_whole_and_streamed(scripted_server, http):
    scripted_server.script(Reply("one two", times=1), Reply("three four"))
    url = f"{scripted_server.url}/fim/completions"
    body = {"model": MODEL, "prompt": "def f(", "suffix": "\n", "max_tokens": 64}
    whole = http.post(url, json=body).json()
    streamed = sse_data(http.post(url, json={**body, "stream": True}).text)
    message = {"role": "assistant", "content": "one two", "tool_calls": None, "prefix": False}
    assert whole["choices"] == [{"index": 0, "finish_reason": "stop", "message": message}]
    assert (whole["object"], whole["usage"]["completion_tokens"]) == ("chat.completion", 2)
    assert [e if e == "[DONE]" else e["choices"][0] for e in streamed] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None},
        {"index": 0, "delta": {"content": "three "}, "finish_reason": None},
        {"index": 0, "delta": {"content": "four"}, "finish_reason": None},
        {"index": 0, "delta": {"content": ""}, "finish_reason": "stop"},
        "[DONE]",
    ]
    assert streamed[-2]["usage"] == {"prompt_tokens": 2, "completion_tokens": 2,
                                     "total_tokens": 4}  # fmt: skip
    assert [r.protocol for r in scripted_server.requests] == ["mistral-fim", "mistral-fim"]


# -- every form ---------------------------------------------------------------------


def complete(server: ScriptedServer, form: str, prefix: str, **limits: Any) -> tuple[str, str]:
    """(text, ending) of a whole completion in ``form``, over raw HTTP."""
    root = server.ollama_url
    with httpx.Client(timeout=10, trust_env=False) as http:
        if form == "infill":
            body = {"input_prefix": prefix, "input_suffix": "\n", **limits}
            answer = http.post(f"{root}/infill", json=body).json()
            return answer["content"], answer["stop_type"]
        if form == "ollama":
            body = {"model": MODEL, "prompt": prefix, "suffix": "\n", "stream": False,
                    "options": limits}  # fmt: skip
            answer = http.post(f"{root}/api/generate", json=body).json()
            return answer["response"], answer["done_reason"]
        path = {"completions": "/v1/completions", "mistral": "/v1/fim/completions"}[form]
        body = {"model": MODEL, "prompt": prefix, "suffix": "\n", **limits}
        choice = http.post(root + path, json=body).json()["choices"][0]
        text = choice["text"] if form == "completions" else choice["message"]["content"]
        return text, choice["finish_reason"]


FORMS = ["infill", "completions", "mistral", "ollama"]
LIMIT = {"infill": "n_predict", "completions": "max_tokens", "mistral": "max_tokens",
         "ollama": "num_predict"}  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
def test_when_matches_the_text_before_the_cursor(scripted_server, form):
    scripted_server.script(ADD, Reply("0", when="total ="), ANY)
    answers = [complete(scripted_server, form, prefix) for prefix in (
        "import os\n\ndef add(", "total = ", "def add(x", "")]  # fmt: skip
    assert [text for text, _ in answers] == ["a, b):\n    return a + b", "0", "pass", "pass"]


@pytest.mark.parametrize(
    ("form", "ending"),
    [("infill", "limit"), ("completions", "length"), ("mistral", "length"), ("ollama", "length")],
)
def test_the_request_limit_cuts_the_reply(scripted_server, form, ending):
    scripted_server.script(Reply(tokens=10))
    assert complete(scripted_server, form, "x", **{LIMIT[form]: 3}) == ("word0 word1 word2 ",
                                                                       ending)  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
def test_no_rule_is_an_empty_middle(scripted_server, form):
    scripted_server.script(Reply("only for chat", when="hello"))
    text, _ = complete(scripted_server, form, "def f(")
    assert text == ""
    assert scripted_server.requests[0].chunks_sent == 0


# -- a server without FIM -------------------------------------------------------------


def test_a_model_without_fim_tokens_answers_infill_as_llama_cpp(scripted_server, http):
    scripted_server.script(Reply(status=501))
    response = http.post(f"{scripted_server.ollama_url}/infill",
                         json={"input_prefix": "p", "input_suffix": "s"})  # fmt: skip
    assert (response.status_code, response.json()) == (501, {"error": {
        "code": 501, "type": "not_supported_error",
        "message": "Infill is not supported by this model: prefix token is missing. "
                   "suffix token is missing. middle token is missing. ",
    }})  # fmt: skip


def test_an_ollama_model_without_insert_refuses_a_suffix(scripted_server, ollama_client):
    scripted_server.script(Reply(status=400))
    with pytest.raises(ollama.ResponseError) as caught:
        ollama_client.generate("scripted-small", "def add(", suffix="\n")
    refusal = "registry.ollama.ai/library/scripted-small:latest does not support insert"
    assert (caught.value.status_code, caught.value.error) == (400, refusal)


def test_a_chat_model_at_the_legacy_completions(scripted_server, sdk):
    scripted_server.script(Reply(status=404, times=1), Reply("in the chat"))
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.completions.create(model=MODEL, prompt="def add(", suffix="\n")
    assert caught.value.body == {
        "message": "This is a chat model and not supported in the v1/completions endpoint. "
                   "Did you mean to use v1/chat/completions?",
        "type": "invalid_request_error", "param": None, "code": "not_found",
    }  # fmt: skip
    chat = sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "q"}])
    assert chat.choices[0].message.content == "in the chat"  # the rule was used up


# -- slow streams and clients that hang up ----------------------------------------------


def test_a_cancelled_slow_completion_is_seen_as_a_disconnect(scripted_server, sdk):
    scripted_server.script(Reply(tokens=10, delay=3.0))
    stream = sdk.completions.create(model=MODEL, prompt="def f(", suffix="\n", stream=True)
    first = next(iter(stream))
    stream.close()  # the person typed on
    assert first.choices[0].text == "word0 "
    (request,) = scripted_server.requests
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=2.0) is True
    assert (request.protocol, request.chunks_sent, request.completed) == (
        "openai-completions", 1, False)  # fmt: skip


def test_an_ollama_client_hanging_up_mid_generate_is_seen(scripted_server, ollama_client):
    scripted_server.script(Reply(tokens=10, delay=3.0))
    parts = ollama_client.generate(MODEL, "def f(", suffix="\n", stream=True)
    first = next(parts)
    parts.close()
    assert first.response == "word0 "
    (request,) = scripted_server.requests
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=2.0) is True
    assert (request.protocol, request.chunks_sent, request.completed) == (
        "ollama-generate", 1, False)  # fmt: skip


@pytest.mark.parametrize("path", ["/infill", "/v1/fim/completions"])
def test_a_raw_client_hanging_up_mid_stream_is_seen(scripted_server, http, path):
    scripted_server.script(Reply(tokens=10, delay=3.0))
    body = {"model": MODEL, "prompt": "def f(", "suffix": "\n", "input_prefix": "def f(",
            "input_suffix": "\n", "stream": True}  # fmt: skip
    with http.stream("POST", scripted_server.ollama_url + path, json=body) as response:
        for line in response.iter_lines():
            if "word0" in line:
                break  # hang up after the first piece
    (request,) = scripted_server.requests
    assert scripted_server.wait_for(lambda: request.disconnected, timeout=2.0) is True
