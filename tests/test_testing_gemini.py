"""The scripted server's Gemini API through Google's own `google-genai` SDK.

If the SDK accepts the server's responses, streams, function calls, thoughts,
usage and errors, the agents that speak this wire (Gemini CLI, whose bundle
carries the SDK's JavaScript twin) are tested against something true.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from google import genai
from google.genai import errors, types

from nbchat.testing import Reply, ScriptedServer

MODEL = "nbchat-demo"
KEY = "sk-gemini-test"
WEATHER = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="get_weather",
            description="Current weather in a city.",
            parameters_json_schema={
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        )
    ]
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key=KEY) as running:
        yield running


@pytest.fixture
def client(server: ScriptedServer) -> Iterator[genai.Client]:
    # v1beta, as Gemini CLI asks (the SDK's default v1 is the same API, but its
    # `GET /v1/models` is OpenAI's on this server).
    options = types.HttpOptions(base_url=server.ollama_url, api_version="v1beta", timeout=10_000)
    with genai.Client(api_key=KEY, http_options=options) as sdk:
        yield sdk


def test_a_whole_text_answer(server, client):
    server.script(Reply("Hello, wörld!"))
    config = types.GenerateContentConfig(system_instruction="Be brief.", temperature=0.2)
    response = client.models.generate_content(model=MODEL, contents="hi", config=config)
    assert response.text == "Hello, wörld!"
    (candidate,) = response.candidates
    assert (candidate.finish_reason, candidate.content.role) == (types.FinishReason.STOP, "model")
    usage = response.usage_metadata
    assert usage.candidates_token_count == 2
    assert usage.total_token_count == usage.prompt_token_count + 2
    assert response.model_version == MODEL
    (request,) = server.requests
    assert (request.method, request.path, request.protocol, request.model) == (
        "POST", f"/v1beta/models/{MODEL}:generateContent", "gemini", MODEL)  # fmt: skip
    assert request.headers["x-goog-api-key"] == KEY
    assert request.is_chat and request.options == {"temperature": 0.2}
    assert request.messages == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]  # fmt: skip


def test_the_sdks_default_v1_paths_are_the_same_api(server):
    server.script(Reply("Hi"))
    with genai.Client(api_key=KEY, http_options={"base_url": server.ollama_url}) as sdk:
        assert sdk.models.generate_content(model=MODEL, contents="hi").text == "Hi"
    assert server.requests[0].path == f"/v1/models/{MODEL}:generateContent"


def test_a_streamed_answer_comes_in_chunks_and_the_last_says_why_it_ended(server, client):
    server.script(Reply("One two three"))
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="count"))
    assert [c.text for c in chunks] == ["One ", "two ", "three", ""]
    assert [c.candidates[0].finish_reason for c in chunks] == [None, None, None,
                                                               types.FinishReason.STOP]  # fmt: skip
    assert chunks[-1].usage_metadata.candidates_token_count == 3
    assert server.requests[0].path == f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"


def test_the_stream_is_server_sent_events_of_whole_responses(server):
    server.script(Reply("Hi there"))
    url = f"{server.ollama_url}/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    reply = httpx.post(url, json=body, headers={"x-goog-api-key": KEY})
    assert reply.headers["content-type"] == "text/event-stream"
    events = reply.text.split("\r\n\r\n")
    assert events[-1] == "" and all(e.startswith("data: ") for e in events[:-1])
    objects = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    assert [o["candidates"][0]["content"]["parts"] for o in objects] == [
        [{"text": "Hi "}], [{"text": "there"}], [{"text": ""}]]  # fmt: skip
    assert objects[-1]["candidates"][0]["finishReason"] == "STOP"


def test_without_alt_sse_the_stream_is_one_json_array(server):
    server.script(Reply("Hi there"))
    url = f"{server.ollama_url}/v1beta/models/{MODEL}:streamGenerateContent?key={KEY}"
    reply = httpx.post(url, json={"contents": [{"parts": [{"text": "hi"}]}]})
    objects = reply.json()
    assert [o["candidates"][0]["content"]["parts"][0]["text"] for o in objects] == [
        "Hi ", "there", ""]  # fmt: skip


def test_a_function_call_and_its_response(server, client):
    server.script(
        Reply(tool_calls=[("get_weather", {"city": "Paris"})], when="weather"),
        Reply("Sunny in Paris.", after_tool="get_weather"),
    )
    config = types.GenerateContentConfig(tools=[WEATHER])
    question = types.Content(role="user", parts=[types.Part(text="What is the weather?")])
    response = client.models.generate_content(model=MODEL, contents=[question], config=config)
    (call,) = response.function_calls
    assert (call.name, call.args) == ("get_weather", {"city": "Paris"})
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    answer = types.Part.from_function_response(name="get_weather", response={"sky": "sunny"})
    reply = types.Content(role="user", parts=[answer])
    contents = [question, response.candidates[0].content, reply]
    follow_up = client.models.generate_content(model=MODEL, contents=contents, config=config)
    assert follow_up.text == "Sunny in Paris."
    messages = server.requests[1].messages
    assert messages[-2]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"city":"Paris"}'}  # fmt: skip
    assert messages[-1] == {"role": "tool", "tool_call_id": "get_weather", "name": "get_weather",
                            "content": '{"sky":"sunny"}'}  # fmt: skip
    tools = server.requests[0].body["tools"]
    assert tools[0]["functionDeclarations"][0]["name"] == "get_weather"


def test_a_streamed_function_call_comes_whole_in_one_chunk(server, client):
    server.script(Reply("Let me look.", tool_calls=[("get_weather", {"city": "Oslo"})]))
    config = types.GenerateContentConfig(tools=[WEATHER])
    chunks = list(client.models.generate_content_stream(model=MODEL, contents="w", config=config))
    calls = [c.function_calls for c in chunks if c.function_calls]
    assert [[(f.name, f.args) for f in found] for found in calls] == [
        [("get_weather", {"city": "Oslo"})]]  # fmt: skip
    assert "".join(c.text or "" for c in chunks) == "Let me look."


def test_thoughts_are_parts_marked_thought_and_counted_apart(server, client):
    server.script(Reply("Four.", reasoning="Two and two."))
    response = client.models.generate_content(model=MODEL, contents="2+2?")
    parts = response.candidates[0].content.parts
    assert [(p.text, bool(p.thought)) for p in parts] == [("Two and two.", True),
                                                          ("Four.", False)]  # fmt: skip
    assert response.text == "Four."
    assert response.usage_metadata.thoughts_token_count == 3


def test_a_length_finish_is_max_tokens(server, client):
    server.script(Reply("Cut", finish_reason="length"))
    response = client.models.generate_content(model=MODEL, contents="long")
    assert response.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS


def test_a_scripted_error_is_googles_error_object(server, client):
    server.script(Reply(status=429))
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model=MODEL, contents="hi")
    assert (caught.value.code, caught.value.status) == (429, "RESOURCE_EXHAUSTED")


def test_an_unknown_model_a_wrong_key_and_a_bad_request_are_refused_as_the_api_refuses(server):
    options = types.HttpOptions(base_url=server.ollama_url, api_version="v1beta")
    with (
        genai.Client(api_key="wrong", http_options=options) as stranger,
        pytest.raises(errors.ClientError) as caught,
    ):
        stranger.models.generate_content(model=MODEL, contents="hi")
    assert (caught.value.code, caught.value.status) == (401, "UNAUTHENTICATED")
    with genai.Client(api_key=KEY, http_options=options) as sdk:
        with pytest.raises(errors.ClientError) as caught:
            sdk.models.generate_content(model="gemini-9", contents="hi")
        assert (caught.value.code, caught.value.status) == (404, "NOT_FOUND")
        assert "models/gemini-9 is not found" in str(caught.value.message)
        answer = types.Part.from_function_response(name="get_weather", response={})
        with pytest.raises(errors.ClientError) as caught:
            sdk.models.generate_content(
                model=MODEL, contents=[types.Content(role="user", parts=[answer])])
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert "number of function response parts" in str(caught.value.message)


def test_an_error_mid_stream_is_raised_after_the_chunks_before_it(server, client):
    server.script(Reply("one two three", error_after=1))
    seen = []
    with pytest.raises(errors.ServerError) as caught:
        for chunk in client.models.generate_content_stream(model=MODEL, contents="hi"):
            seen.append(chunk.text)
    assert seen == ["one "]
    assert (caught.value.code, caught.value.status) == (500, "INTERNAL")


def test_count_tokens_and_the_models_list(server, client):
    assert client.models.count_tokens(model=MODEL, contents="one two three").total_tokens == 3
    names = [m.name for m in client.models.list()]
    assert names == ["models/nbchat-demo", "models/scripted-small", "models/scripted-large"]
    model = client.models.get(model=MODEL)
    assert (model.name, "generateContent" in model.supported_actions) == (
        "models/nbchat-demo", True)  # fmt: skip
    assert not [r for r in server.requests if r.is_chat]
