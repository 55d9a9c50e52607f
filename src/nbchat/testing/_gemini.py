"""Google's Gemini API as the server speaks it: ``generateContent``, streamed and whole.

Pure like :mod:`._protocols`. The model is in the path, not the body:
``POST /v1beta/models/MODEL:generateContent``, ``:streamGenerateContent``
(server-sent events with ``?alt=sse``, as the SDKs ask; else one JSON array
written as it grows) and ``:countTokens``; ``GET /v1beta/models`` lists the
models. ``v1`` and ``v1alpha`` paths are the same API.

A request's ``systemInstruction`` and ``contents`` become the OpenAI chat
shape (:func:`openai_messages`) so the same scripts pick the reply: a
``functionCall`` part is an assistant's tool call, a ``functionResponse``
part a tool message naming its function. Thought parts (``"thought": true``)
are left out of the text. The answer is a ``GenerateContentResponse``: one
candidate whose parts are the thoughts, the text and one ``functionCall``
part per call (whole, never split: the API sends a call in one chunk), then
``finishReason`` (``STOP`` for calls too, as the API says it) and
``usageMetadata``. A stream sends the same objects, a few parts each; the
last carries the finish reason and the whole usage. Errors are Google's
``{"error": {"code", "message", "status"}}``, in a stream as a ``data:``
event of that object.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any

from ._protocols import Answer, StreamPlan, _reason, dumps
from ._script import Body

# POST /v1beta/models/gemini-2.5-flash:streamGenerateContent; GET /v1beta/models[/NAME]
CALL = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):([A-Za-z]+)$")
MODELS = re.compile(r"^/(v1beta|v1alpha)/models(?:/([^/:]+))?$")
METHODS = ("generateContent", "streamGenerateContent", "countTokens")
FINISH_REASONS = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS",
                  "content_filter": "SAFETY"}  # fmt: skip
_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_MESSAGES = {
    401: "Request had invalid authentication credentials.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
}


def is_gemini_path(path: str) -> bool:
    """Whether ``path`` is one of the Gemini API's (a model call or the models list)."""
    return CALL.match(path) is not None or MODELS.match(path) is not None


def path_model(path: str) -> str | None:
    """The model a call's path names (``models/MODEL:method``)."""
    found = CALL.match(path)
    return found.group(2) if found else None


def path_method(path: str) -> str | None:
    """The method a call's path names: ``generateContent``, ``streamGenerateContent``, …"""
    found = CALL.match(path)
    return found.group(3) if found else None


def openai_messages(body: Body) -> list[dict[str, Any]]:
    """The request's conversation in OpenAI's chat shape, for scripts, logs and the demo answer.

    ``systemInstruction`` comes first as a system message; each content is a
    user or assistant message (``model`` is the assistant) of its text parts
    joined, ``inlineData`` images as ``image_url`` data-URL parts. A model
    turn's ``functionCall`` parts are its ``tool_calls`` (the call's ``id``,
    else its name, is the id); a user turn's ``functionResponse`` parts are
    tool messages carrying the function's ``name`` and the response as JSON.
    """
    out: list[dict[str, Any]] = []
    system = body.get("systemInstruction")
    if system:
        text = system if isinstance(system, str) else _text(_parts(system))
        out.append({"role": "system", "content": text})
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        parts = _parts(content)
        role = "assistant" if content.get("role") == "model" else "user"
        for part in parts:
            answer = part.get("functionResponse")
            if isinstance(answer, dict):
                out.append({"role": "tool", "tool_call_id": answer.get("id") or answer.get("name"),
                            "name": answer.get("name"),
                            "content": dumps(answer.get("response"))})  # fmt: skip
        rest = [p for p in parts if "functionResponse" not in p]
        if parts and not rest:
            continue
        entry: dict[str, Any] = {"role": role, "content": _content(rest)}
        calls = [p["functionCall"] for p in rest if isinstance(p.get("functionCall"), dict)]
        if calls:
            entry["tool_calls"] = [
                {"id": call.get("id") or call.get("name"), "type": "function",
                 "function": {"name": call.get("name"), "arguments": dumps(call.get("args") or {})}}
                for call in calls
            ]  # fmt: skip
        out.append(entry)
    return out


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _content(parts: list[dict[str, Any]]) -> Any:
    """Text parts joined (thoughts left out); with an image, chat-completions parts."""
    spoken = [p for p in parts if not p.get("thought")]
    if not any(isinstance(p.get("inlineData"), dict) for p in spoken):
        return _text(spoken)
    out: list[dict[str, Any]] = []
    for part in spoken:
        if isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif isinstance(part.get("inlineData"), dict):
            data = part["inlineData"]
            url = f"data:{data.get('mimeType')};base64,{data.get('data')}"
            out.append({"type": "image_url", "image_url": {"url": url}})
    return out


def _text(parts: list[dict[str, Any]]) -> str:
    said = (p["text"] for p in parts if isinstance(p.get("text"), str) and not p.get("thought"))
    return "".join(said)


def request_problem(body: Body) -> str | None:
    """What the real API would reject in this request (HTTP 400), or None."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return "* GenerateContentRequest.contents: contents is not specified\n"
    for index, content in enumerate(contents):
        if not isinstance(content, dict) or not _parts(content):
            where = f"GenerateContentRequest.contents[{index}].parts"
            return f"* {where}: contents.parts must not be empty.\n"
        if content.get("role", "user") not in ("user", "model"):
            return "Please use a valid role: user, model."
        answers = sum(1 for p in _parts(content) if "functionResponse" in p)
        if answers and answers != _calls_before(contents, index):
            return (
                "Please ensure that the number of function response parts is equal to the "
                "number of function call parts of the function call turn."
            )
    return None


def _calls_before(contents: list[Any], index: int) -> int:
    before = contents[index - 1] if index else None
    if not isinstance(before, dict) or before.get("role") != "model":
        return 0
    return sum(1 for p in _parts(before) if "functionCall" in p)


def prompt_tokens(body: Body) -> int:
    """A deterministic stand-in for the prompt's token count: the words of its text parts
    and of the JSON of every other part."""
    words = 0
    system = body.get("systemInstruction")
    contents = [system] if isinstance(system, dict) else []
    contents += [c for c in body.get("contents") or [] if isinstance(c, dict)]
    for content in contents:
        for part in _parts(content):
            text = part["text"] if isinstance(part.get("text"), str) else dumps(part)
            words += len(text.split())
    return max(words, 1)


class Gemini:
    """The Gemini API's model calls, models list and ``{"error": …}`` bodies."""

    name = "gemini"
    chat_path = "/v1beta/models/{model}:generateContent"  # the form; the model varies

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        default = _MESSAGES.get(status) or _reason(status)
        kind = code or _STATUSES.get(status, "UNKNOWN")
        return {"error": {"code": status, "message": message or default, "status": kind}}

    def unknown_model(self, model: str) -> Any:
        return self.error(404, f"models/{model} is not found for API version v1beta, or is not "
                          "supported for generateContent. Call ListModels to see the list of "
                          "available models and their supported methods.")  # fmt: skip

    def missing_model(self) -> Any:
        return self.error(400, "* GenerateContentRequest.model: unexpected model name format\n")

    def no_images(self, model: str) -> Any:
        return self.error(400, f"Image input modality is not enabled for models/{model}")

    def bad_json(self) -> Any:
        return self.error(400, "Invalid JSON payload received. Unexpected token.")

    def not_found(self, method: str, path: str) -> Any:
        return self.error(404, f"Method not found: {method} {path}")

    def unknown_method(self, method: str) -> Any:
        return self.error(404, f"Method not found: models.{method}")

    def model_entry(self, model: str) -> dict[str, Any]:
        return {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model,
            "description": "A scripted model on loopback.",
            "inputTokenLimit": 1_048_576,
            "outputTokenLimit": 65_536,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
            "temperature": 1.0,
            "topP": 0.95,
            "topK": 64,
            "thinking": True,
        }

    def models(self, models: Sequence[str]) -> Any:
        return {"models": [self.model_entry(m) for m in models]}

    def count_tokens(self, body: Body) -> Any:
        """``countTokens``: of ``contents``, or of a whole ``generateContentRequest``."""
        inner = body.get("generateContentRequest")
        tokens = prompt_tokens(inner if isinstance(inner, dict) else body)
        return {"totalTokens": tokens,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": tokens}]}  # fmt: skip

    def whole(self, answer: Answer) -> Any:
        parts = [{"text": "".join(answer.reasoning), "thought": True}] if answer.reasoning else []
        if answer.text or not answer.tool_calls:
            parts.append({"text": answer.text})
        parts += [_call_part(name, arguments) for _, name, arguments in answer.tool_calls]
        finish = None if answer.no_finish else self._finish_reason(answer)
        return _response(answer, parts, finish, self._usage(answer))

    def stream(self, answer: Answer, path_query: str) -> StreamPlan:
        """The answer's chunks as server-sent events (``alt=sse``), else as a JSON array."""
        usage = self._usage(answer)
        opening = {k: v for k, v in usage.items() if k == "promptTokenCount"}
        chunks = [_response(answer, [{"text": c, "thought": True}], None, opening)
                  for c in answer.reasoning]  # fmt: skip
        chunks += [_response(answer, [{"text": c}], None, opening) for c in answer.chunks]
        chunks += [_response(answer, [_call_part(name, arguments)], None, opening)
                   for _, name, arguments in answer.tool_calls]  # fmt: skip
        final = _response(answer, [{"text": ""}], self._finish_reason(answer), usage)
        if "alt=sse" in path_query:
            return StreamPlan(
                content_type="text/event-stream",
                preamble=b"",
                pieces=[_event(chunk) for chunk in chunks],
                closing=b"" if answer.no_finish else _event(final),
                malformed=b'data: {"candidates": [{"content": {"parts": [{"text": \r\n\r\n',
                failure=_event(self.error(500)),
            )
        pieces = [f"{',' if i else ''}{dumps(c)}".encode() for i, c in enumerate(chunks)]
        comma = b"," if pieces else b""
        return StreamPlan(
            content_type="application/json; charset=UTF-8",
            preamble=b"[",
            pieces=pieces,
            closing=(b"" if answer.no_finish else comma + dumps(final).encode()) + b"]",
            malformed=b',{"candidates": [{"content": {"parts": [{"text": ',
            failure=b"," + dumps(self.error(500)).encode(),
        )

    def _finish_reason(self, answer: Answer) -> str:
        reason = answer.finish_reason or ("tool_calls" if answer.tool_calls else "stop")
        return FINISH_REASONS.get(reason, reason.upper())

    def _usage(self, answer: Answer) -> dict[str, Any]:
        prompt, thoughts = answer.prompt_tokens, len(answer.reasoning)
        candidates = len(answer.chunks) + len(answer.tool_calls)
        usage: dict[str, Any] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": candidates,
            "totalTokenCount": prompt + candidates + thoughts,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
        }
        if thoughts:
            usage["thoughtsTokenCount"] = thoughts
        if answer.cache_read_tokens:
            usage["cachedContentTokenCount"] = answer.cache_read_tokens
        return {**usage, **answer.usage_fields}


def _call_part(name: str, arguments: Any) -> dict[str, Any]:
    """A ``functionCall`` part; arguments that are not a JSON object go out as they are."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return {"functionCall": {"name": name, "args": arguments}}


def _response(answer: Answer, parts: list[Any], finish: str | None, usage: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        candidate["finishReason"] = finish
    candidate["index"] = 0
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": answer.model,
        "responseId": answer.response_id.removeprefix("chatcmpl-"),
    }


def _event(data: Any) -> bytes:
    return f"data: {dumps(data)}\r\n\r\n".encode()


GEMINI = Gemini()
