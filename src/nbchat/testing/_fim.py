"""Fill-in-the-middle (code completion) as the servers speak it: four forms, whole and streamed.

Pure like :mod:`._protocols`: an :class:`Answer` and the request body go in,
JSON or the pre-encoded bytes of a stream come out.

- llama.cpp's ``POST /infill`` (``input_prefix``, ``input_suffix``,
  ``input_extra``, ``prompt``, ``n_predict``): its native completion object,
  streamed as ``data:`` events ``{"content": …, "stop": false}`` and a final
  ``"stop": true`` one carrying ``stop_type``, timings and counts; no ``[DONE]``.
- OpenAI's legacy ``POST /v1/completions`` with a ``suffix`` (DeepSeek's FIM
  at ``/beta/completions`` is the same): ``text_completion`` objects, then
  ``data: [DONE]``.
- Mistral's ``POST /v1/fim/completions`` (Codestral): shaped as chat
  completions, ``message.content`` or ``delta.content``, then ``[DONE]``.
- Ollama's ``POST /api/generate`` with a ``suffix``: NDJSON ``response``
  pieces and a final ``done`` line.

The prefix a rule's ``when`` sees is the text before the cursor: ``prompt``,
or llama.cpp's ``input_prefix`` followed by its ``prompt``. A request's limit
(``max_tokens``, ``n_predict``, ``options.num_predict``) cuts the reply to that
many chunks with the form's ``length`` ending, and its ``stop`` strings cut it
where the first one begins.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ._protocols import Answer, Ollama, OpenAI, StreamPlan, _now, _reason, dumps
from ._script import Body, Reply

NOTHING = Reply("")  # the answer when no rule matches: an empty middle
# llama-server's answer to /infill when the model's vocabulary has no FIM tokens (HTTP 501).
NO_FIM_TOKENS = (
    "Infill is not supported by this model: "
    "prefix token is missing. suffix token is missing. middle token is missing. "
)
# OpenAI's answer when a chat model is asked at /v1/completions (HTTP 404).
CHAT_MODEL_ONLY = (
    "This is a chat model and not supported in the v1/completions endpoint. "
    "Did you mean to use v1/chat/completions?"
)
_LLAMA_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    500: "server_error",
    501: "not_supported_error",
    503: "unavailable_error",
}
_LLAMA_MESSAGES = {401: "Invalid API Key", 404: "File Not Found", 501: NO_FIM_TOKENS,
                   503: "Loading model"}  # fmt: skip
_STOP_TYPES = {"stop": "eos", "length": "limit"}  # finish reason → llama.cpp's stop_type


class Fim:
    """What the four forms share: where a request keeps its prefix, suffix, limit and stops.

    The forms are also :class:`OpenAI` or :class:`Ollama` protocols, for their
    error bodies and model checks.
    """

    name: str
    paths: tuple[str, ...]
    prefix_fields: tuple[str, ...] = ("prompt",)
    suffix_field = "suffix"
    limit_fields: tuple[str, ...] = ("max_tokens",)
    model_required = True

    def prefix(self, body: Body) -> str:
        """The text before the cursor, as ``when`` matches it."""
        return "".join(_text(body.get(name)) for name in self.prefix_fields)

    def suffix(self, body: Body) -> str:
        return _text(body.get(self.suffix_field))

    def limit(self, body: Body) -> int | None:
        """How many chunks the request lets the answer have; None when unlimited."""
        for name in self.limit_fields:
            value = body.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                return value if value >= 0 else None
        return None

    def stops(self, body: Body) -> list[str]:
        return _strings(body.get("stop"))

    def problem(self, body: Body) -> str | None:
        """What the real server would refuse in this request (HTTP 400), or None."""
        return None

    def refusal(self, status: int, body: Body) -> str | None:
        """The message a scripted ``Reply(status=...)`` gets when it names none."""
        return None

    def fit(self, answer: Answer, body: Body) -> tuple[Answer, str]:
        """The answer cut to the request's limit and stop strings, and the stop string met."""
        chunks, finish = list(answer.chunks), answer.finish_reason
        limit = self.limit(body)
        if limit is not None and len(chunks) > limit:
            chunks, finish = chunks[:limit], "length"
        text, word = "".join(chunks), ""
        found = [(text.find(stop), stop) for stop in self.stops(body) if stop and stop in text]
        if found:
            at, word = min(found)
            chunks, finish = _cut(chunks, at), "stop"
        words = f"{self.prefix(body)} {self.suffix(body)}".split()
        fitted = replace(answer, chunks=chunks, finish_reason=finish, tool_calls=[],
                         reasoning=[], prompt_tokens=max(1, len(words)))  # fmt: skip
        return fitted, word


def fim_messages(form: Fim, body: Body) -> list[dict[str, Any]]:
    """The request as the scripts see it: one user message holding the prefix."""
    return [{"role": "user", "content": form.prefix(body)}]


class LlamaInfill(Fim, OpenAI):
    """llama.cpp's ``/infill``: no model needed, errors as ``{"error": {code, message, type}}``."""

    name = "llama-infill"
    paths = ("/infill",)
    prefix_fields = ("input_prefix", "prompt")
    suffix_field = "input_suffix"
    limit_fields = ("n_predict", "max_tokens")
    model_required = False

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        text = message or _LLAMA_MESSAGES.get(status) or _reason(status)
        return {"error": {"code": status, "message": text,
                          "type": _LLAMA_TYPES.get(status, "server_error")}}  # fmt: skip

    def bad_json(self) -> Any:
        return self.error(400, "Invalid JSON in request body")

    def not_found(self, method: str, path: str) -> Any:
        return self.error(404)

    def problem(self, body: Body) -> str | None:
        if "prompt" in body and not isinstance(body["prompt"], str):
            return '"prompt" must be a string'
        for name in ("input_prefix", "input_suffix"):
            if name not in body:
                return f'"{name}" is required'
        extra = body.get("input_extra", [])
        if not isinstance(extra, list):
            return '"input_extra" must be an array of {"filename": string, "text": string}'
        for chunk in extra:
            if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
                return 'extra_context chunk must contain a "text" field with a string value'
            if "filename" in chunk and not isinstance(chunk["filename"], str):
                return 'extra_context chunk\'s "filename" field must be a string'
        return None

    def whole(self, answer: Answer, body: Body | None = None) -> Any:
        answer, word = self.fit(answer, body or {})
        return self._final(answer, body or {}, word, answer.text)

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        answer, word = self.fit(answer, body)
        pieces = [
            _event({"index": 0, "content": chunk, "tokens": [], "stop": False, "id_slot": 0,
                    "tokens_predicted": number, "tokens_evaluated": answer.prompt_tokens})
            for number, chunk in enumerate(answer.chunks, 1)
        ]  # fmt: skip
        closing = b"" if answer.no_finish else _event(self._final(answer, body, word, ""))
        return StreamPlan(
            content_type="text/event-stream",
            preamble=b"",
            pieces=pieces,
            closing=closing,
            malformed=b'data: {"index":0,"content":\n\n',
            failure=f"error: {dumps(self.error(500)['error'])}\n\n".encode(),
        )

    def _final(self, answer: Answer, body: Body, word: str, content: str) -> dict[str, Any]:
        """The last object: the whole text when not streamed, "" when it was."""
        prompt, predicted = answer.prompt_tokens, len(answer.chunks)
        reason = answer.finish_reason or "stop"
        extra = "".join(c.get("text", "") for c in body.get("input_extra") or []
                        if isinstance(c, dict))  # fmt: skip
        final: dict[str, Any] = {
            "index": 0,
            "content": content,
            "tokens": [],
            "id_slot": 0,
            "stop": True,
            "model": body.get("model") or "scripted.gguf",
            "tokens_predicted": predicted,
            "tokens_evaluated": prompt,
            "generation_settings": {
                "n_predict": self.limit(body) if self.limit(body) is not None else -1,
                "temperature": body.get("temperature", 0.8),
                "stop": self.stops(body),
                "stream": body.get("stream") is True,
            },
            "prompt": f"{extra}<|fim_prefix|>{_text(body.get('input_prefix'))}<|fim_suffix|>"
            f"{self.suffix(body)}<|fim_middle|>{_text(body.get('prompt'))}",
            "has_new_line": "\n" in answer.text,
            "truncated": False,
            "stop_type": "word" if word else _STOP_TYPES.get(reason, reason),
            "stopping_word": word,
            "tokens_cached": prompt + predicted,
            "timings": {
                "cache_n": 0,
                "prompt_n": prompt,
                "prompt_ms": prompt * 0.5,
                "prompt_per_token_ms": 0.5,
                "prompt_per_second": 2000.0,
                "predicted_n": predicted,
                "predicted_ms": predicted * 10.0,
                "predicted_per_token_ms": 10.0,
                "predicted_per_second": 100.0,
            },
        }
        return {**final, **answer.usage_fields}


class Completions(Fim, OpenAI):
    """OpenAI's legacy ``/v1/completions`` (and DeepSeek's ``/beta/completions``)."""

    name = "openai-completions"
    paths = ("/v1/completions", "/beta/completions")

    def refusal(self, status: int, body: Body) -> str | None:
        return CHAT_MODEL_ONLY if status == 404 else None

    def whole(self, answer: Answer, body: Body | None = None) -> Any:
        answer, _ = self.fit(answer, body or {})
        choice = {"text": answer.text, "index": 0, "logprobs": None,
                  "finish_reason": answer.finish_reason or "stop"}  # fmt: skip
        result: dict[str, Any] = {
            "id": _completion_id(answer),
            "object": "text_completion",
            "created": int(time.time()),
            "model": answer.model,
            "choices": [choice],
        }
        if answer.usage:
            result["usage"] = self._usage(answer)
        return result

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        answer, _ = self.fit(answer, body)
        options = body.get("stream_options")
        wants_usage = isinstance(options, dict) and options.get("include_usage") is True
        head = (
            f'data: {{"id":{dumps(_completion_id(answer))},"object":"text_completion",'
            f'"created":{int(time.time())},"model":{dumps(answer.model)},'
        )
        tail = ',"usage":null}\n\n' if wants_usage else "}\n\n"

        def event(text: str, finish: str = "null") -> bytes:
            choice = f'{{"text":{dumps(text)},"index":0,"logprobs":null,"finish_reason":{finish}}}'
            return f'{head}"choices":[{choice}]{tail}'.encode()

        closing = b"" if answer.no_finish else event("", dumps(answer.finish_reason or "stop"))
        if wants_usage and answer.usage and not answer.no_finish:
            closing += f'{head}"choices":[],"usage":{dumps(self._usage(answer))}}}\n\n'.encode()
        return StreamPlan(
            content_type="text/event-stream; charset=utf-8",
            preamble=b"",
            pieces=[event(chunk) for chunk in answer.chunks],
            closing=closing + b"data: [DONE]\n\n",
            malformed=head.encode() + b'"choices":[{"text":\n\n',
            failure=f"data: {dumps(self.error(503))}\n\n".encode(),
        )


class MistralFim(Fim, OpenAI):
    """Mistral's ``/v1/fim/completions`` (Codestral): chat-completion shapes, usage always."""

    name = "mistral-fim"
    paths = ("/v1/fim/completions",)

    def error(self, status: int, message: str | None = None, code: str | None = None) -> Any:
        inner = super().error(status, message, code)["error"]
        return {"object": "error", **inner}

    def whole(self, answer: Answer, body: Body | None = None) -> Any:
        answer, _ = self.fit(answer, body or {})
        message = {"role": "assistant", "tool_calls": None, "content": answer.text,
                   "prefix": False}  # fmt: skip
        result: dict[str, Any] = {
            "id": _completion_id(answer).removeprefix("cmpl-"),
            "object": "chat.completion",
            "model": answer.model,
            "created": int(time.time()),
            "choices": [
                {"index": 0, "message": message, "finish_reason": answer.finish_reason or "stop"}
            ],
        }
        if answer.usage:
            result["usage"] = self._usage(answer)
        return result

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        answer, _ = self.fit(answer, body)
        head = (
            f'data: {{"id":{dumps(_completion_id(answer).removeprefix("cmpl-"))},'
            f'"object":"chat.completion.chunk","created":{int(time.time())},'
            f'"model":{dumps(answer.model)},'
        )

        def event(delta: dict[str, Any], finish: str | None = None, usage: str = "") -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return f'{head}"choices":[{dumps(choice)}]{usage}}}\n\n'.encode()

        usage = f',"usage":{dumps(self._usage(answer))}' if answer.usage else ""
        finish = event({"content": ""}, answer.finish_reason or "stop", usage)
        return StreamPlan(
            content_type="text/event-stream; charset=utf-8",
            preamble=event({"role": "assistant", "content": ""}),
            pieces=[event({"content": chunk}) for chunk in answer.chunks],
            closing=(b"" if answer.no_finish else finish) + b"data: [DONE]\n\n",
            malformed=head.encode() + b'"choices":[{"index":0,"delta":{"content":\n\n',
            failure=f"data: {dumps(self.error(503))}\n\n".encode(),
        )


class OllamaGenerate(Fim, Ollama):
    """Ollama's ``/api/generate``: the limit and stops in ``options``, streamed by default."""

    name = "ollama-generate"
    paths = ("/api/generate",)
    limit_fields = ("num_predict",)

    def limit(self, body: Body) -> int | None:
        """``options.num_predict``; -1 (the default) and -2 are unlimited."""
        options = body.get("options")
        return super().limit(options) if isinstance(options, dict) else None

    def stops(self, body: Body) -> list[str]:
        options = body.get("options")
        return _strings(options.get("stop")) if isinstance(options, dict) else []

    def refusal(self, status: int, body: Body) -> str | None:
        """A model whose template has no suffix: ``… does not support insert`` (HTTP 400)."""
        if status == 400 and self.suffix(body):
            return f"{registry_name(str(body.get('model')))} does not support insert"
        return None

    def whole(self, answer: Answer, body: Body | None = None) -> Any:
        answer, _ = self.fit(answer, body or {})
        return self._done(answer, body or {}, answer.text, _now())

    def stream(self, answer: Answer, body: Body) -> StreamPlan:
        answer, _ = self.fit(answer, body)
        created = _now()
        head = f'{{"model":{dumps(answer.model)},"created_at":{dumps(created)},"response":'
        final = self._done(answer, body, "", created)
        return StreamPlan(
            content_type="application/x-ndjson",
            preamble=b"",
            pieces=[f'{head}{dumps(chunk)},"done":false}}\n'.encode() for chunk in answer.chunks],
            closing=b"" if answer.no_finish else (dumps(final) + "\n").encode(),
            malformed=head.encode() + b'"\n',
            failure=(dumps(self.error(500)) + "\n").encode(),
        )

    def _done(self, answer: Answer, body: Body, response: str, created: str) -> dict[str, Any]:
        final: dict[str, Any] = {
            "model": answer.model,
            "created_at": created,
            "response": response,
            "done": True,
            "done_reason": "length" if answer.finish_reason == "length" else "stop",
        }
        if body.get("raw") is not True:  # the conversation so far, as tokens (deprecated)
            final["context"] = list(range(1, answer.prompt_tokens + len(answer.chunks) + 1))
        if answer.usage:
            prompt, completion = answer.prompt_tokens, len(answer.chunks)
            final.update(
                total_duration=1_000_000 + prompt * 100_000 + completion * 1_000_000,
                load_duration=1_000_000,
                prompt_eval_count=prompt,
                prompt_eval_duration=prompt * 100_000,
                eval_count=completion,
                eval_duration=completion * 1_000_000,
            )
            final.update(answer.usage_fields)
        return final


LLAMA_INFILL = LlamaInfill()
COMPLETIONS = Completions()
MISTRAL_FIM = MistralFim()
OLLAMA_GENERATE = OllamaGenerate()
FimForm = LlamaInfill | Completions | MistralFim | OllamaGenerate
FIM_FORMS: tuple[FimForm, ...] = (LLAMA_INFILL, COMPLETIONS, MISTRAL_FIM, OLLAMA_GENERATE)
FIM_CLASSES = (LlamaInfill, Completions, MistralFim, OllamaGenerate)
FIM_PATHS: dict[str, FimForm] = {path: form for form in FIM_FORMS for path in form.paths}


def registry_name(model: str) -> str:
    """The model as Ollama's errors name it: ``registry.ollama.ai/library/NAME:TAG``."""
    name = model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"
    parts = name.split("/")
    if len(parts) == 1:
        parts = ["library", *parts]
    if len(parts) == 2 or "." not in parts[0]:
        parts = ["registry.ollama.ai", *parts]
    return "/".join(parts)


def _completion_id(answer: Answer) -> str:
    return answer.response_id.replace("chatcmpl-", "cmpl-")


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {dumps(data)}\n\n".encode()


def _text(value: Any) -> str:
    """A text field: a str, or the first str of a list (OpenAI takes a list of prompts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return next((item for item in value if isinstance(item, str)), "")
    return ""


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _cut(chunks: list[str], at: int) -> list[str]:
    """The chunks up to character ``at`` of their text."""
    kept: list[str] = []
    size = 0
    for chunk in chunks:
        if size + len(chunk) >= at:
            if at > size:
                kept.append(chunk[: at - size])
            break
        kept.append(chunk)
        size += len(chunk)
    return kept
