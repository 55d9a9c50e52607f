"""Fill-in-the-middle: a suggestion for the text between a prefix and a suffix.

Each endpoint in the form it offers: llama.cpp's ``/infill``, Ollama's
``/api/generate`` with a ``suffix``, OpenAI-compatible ``/completions`` with a
``suffix`` (DeepSeek's too), Codestral's ``/fim/completions``. Where none is
offered, or the model refuses the one tried (a llama.cpp model without FIM
tokens, an Ollama template without insert, a chat-only model), a chat request
asks for the middle alone. The form that answered is remembered per model.

The request goes through the client's endpoint, keys, retries and the
administrator's model policy; :func:`iter_infill` yields the suggestion's
pieces as they arrive, and a :class:`~nbchat.llm._stop.StopSignal` set from
another thread (the person typed on) shuts the connection down at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from ..base._secrets import excerpt, scrub_around
from ..base.errors import ModelNotFound, ServerError
from ..base.events import TextDelta
from ..base.policy import Policy
from . import _http
from ._body import body_bytes
from ._sse import LineDecoder, SSEDecoder
from ._stop import StopSignal, on_stop, send_until_stopped, shut_client

Form = Literal["infill", "ollama", "completions", "codestral", "chat"]
MAX_PREFIX = 8000  # characters before the cursor sent, the nearest kept
MAX_SUFFIX = 2000
MAX_CONTEXT = 4000
MAX_SUGGESTION = 4000  # characters of a suggestion; the rest is cut
_MARGIN = 1000  # characters beyond the bounds scrubbed with them: a secret across a bound
_NOT_OFFERED = (400, 404, 405, 422, 501)
CHAT_INSTRUCTIONS = (
    "You complete code in a Jupyter notebook. The user sends the code around the cursor, "
    "marked <FILL>. Reply with only the text that goes at <FILL>: no explanation, no code "
    "fences, nothing that repeats the code before or after it. Reply with nothing if "
    "nothing fits."
)
_FENCE = re.compile(r"\A\s*```[\w+-]*[ \t]*\n?")


@dataclass(frozen=True)
class Infill:
    """What a suggestion is asked for: the code around the cursor, and what else helps.

    ``context`` holds named texts sent before the code (earlier cells, the
    names and types of live variables). :meth:`bounded` scrubs what is sent.
    """

    prefix: str
    suffix: str = ""
    model: str = ""
    max_tokens: int = 64
    context: tuple[tuple[str, str], ...] = ()
    language: str = "python"
    temperature: float = 0.2

    def bounded(self) -> Infill:
        """The request cut to what is sent: the prefix's end, the suffix's start, some context.

        All of it scrubbed of secrets, the code around the cursor as one text: a
        key typed there is replaced, one that straddles the cursor too.
        """
        context, room = [], MAX_CONTEXT
        for name, text in self.context:
            if room <= 0:
                break
            context.append((name, excerpt(text, room)))
            room -= len(text)
        prefix, suffix = scrub_around(self.prefix[-MAX_PREFIX - _MARGIN:],
                                      self.suffix[:MAX_SUFFIX + _MARGIN])  # fmt: skip
        return Infill(prefix[-MAX_PREFIX:], suffix[:MAX_SUFFIX], self.model,
                      max(1, min(int(self.max_tokens), 512)), tuple(context), self.language,
                      self.temperature)  # fmt: skip

    def context_text(self) -> str:
        """The context as comment lines, for forms that take only the code."""
        lines = []
        for name, text in self.context:
            lines.append(f"# {name}:")
            lines += [f"#   {line}" for line in text.splitlines()]
        return "\n".join(lines) + "\n" if lines else ""


def forms_for(client: Any, model: str) -> list[Form]:
    """The forms to try for ``model`` at the client's endpoint, best first."""
    known = client.fim_forms.get(model)
    if known is not None:
        return [known]
    settings = client.settings
    if settings.provider == "ollama":
        return ["ollama", "chat"]
    if settings.provider != "openai":
        return ["chat"]
    if "mistral.ai" in settings.base_url or model.startswith("codestral"):
        return ["codestral", "chat"]
    if "default_generation_settings" in client.server_props():  # llama.cpp's server
        return ["infill", "chat"]
    return ["completions", "chat"]


def iter_infill(client: Any, asked: Infill, stop: StopSignal | None = None) -> Iterator[str]:
    """The suggestion's pieces, in the first form the endpoint answers; cut at MAX_SUGGESTION."""
    request = asked.bounded()
    model = Policy.from_env().model(request.model) or request.model or client.default_model()
    request = Infill(request.prefix, request.suffix, model, request.max_tokens, request.context,
                     request.language, request.temperature)  # fmt: skip
    forms = forms_for(client, model)
    for index, form in enumerate(forms):
        pieces = (piece for piece in _FORMS[form](client, request, stop) if piece)
        try:
            first = next(pieces, None)
        except (ServerError, ModelNotFound) as exc:
            # A 404 reads as an unknown model; the chat form says so if it really is.
            status = getattr(exc, "status", None) or 404
            if index == len(forms) - 1 or status not in _NOT_OFFERED:
                raise
            continue  # this endpoint or model does not take that form: the next one
        client.fim_forms[model] = form
        yield from _cut(first, pieces)
        return


def _cut(first: str | None, pieces: Generator[str, None, None]) -> Iterator[str]:
    sent = 0
    for piece in ([] if first is None else [first]):
        yield piece[:MAX_SUGGESTION]
        sent += len(piece)
    for piece in pieces:
        if sent >= MAX_SUGGESTION:
            pieces.close()  # what is left is not read: the connection closes
            return
        yield piece[: MAX_SUGGESTION - sent]
        sent += len(piece)


# -- the forms ------------------------------------------------------------------------
def _root(url: str) -> str:
    return re.sub(r"/v1/?$", "", url.rstrip("/"))


def _infill(
    client: Any, request: Infill, stop: StopSignal | None
) -> Generator[str, None, None]:
    body = {
        "input_prefix": request.prefix, "input_suffix": request.suffix, "prompt": "",
        "input_extra": [{"filename": name, "text": text} for name, text in request.context],
        "n_predict": request.max_tokens, "temperature": request.temperature,
        "stream": True, "cache_prompt": True,
    }  # fmt: skip
    url = _root(client.settings.base_url) + "/infill"
    for data in _events(client, url, body, request.model, stop, sse=True):
        if isinstance(data, dict) and isinstance(data.get("content"), str) and data["content"]:
            yield data["content"]


def _ollama(
    client: Any, request: Infill, stop: StopSignal | None
) -> Generator[str, None, None]:
    body = {
        "model": request.model, "prompt": request.context_text() + request.prefix,
        "suffix": request.suffix, "stream": True,
        "options": {"num_predict": request.max_tokens, "temperature": request.temperature},
    }  # fmt: skip
    url = client.settings.base_url.rstrip("/") + "/api/generate"
    for data in _events(client, url, body, request.model, stop, sse=False):
        if isinstance(data, dict) and isinstance(data.get("response"), str) and data["response"]:
            yield data["response"]


def _completions(
    client: Any, request: Infill, stop: StopSignal | None
) -> Generator[str, None, None]:
    """OpenAI-compatible ``/completions`` with a ``suffix`` (DeepSeek's beta too)."""
    for choice in _suffixed(client, "/completions", request, stop):
        yield choice.get("text") or ""


def _codestral(
    client: Any, request: Infill, stop: StopSignal | None
) -> Generator[str, None, None]:
    """Mistral's ``/fim/completions``: the same request, answered as chat deltas."""
    for choice in _suffixed(client, "/fim/completions", request, stop):
        delta = choice.get("delta")
        yield (delta.get("content") or "") if isinstance(delta, dict) else ""


def _suffixed(
    client: Any, path: str, request: Infill, stop: StopSignal | None
) -> Iterator[dict[str, Any]]:
    """The first choice of each event of a ``prompt`` + ``suffix`` request at ``path``."""
    body = {
        "model": request.model, "prompt": request.context_text() + request.prefix,
        "suffix": request.suffix, "max_tokens": request.max_tokens,
        "temperature": request.temperature, "stream": True,
    }  # fmt: skip
    url = client.settings.base_url.rstrip("/") + path
    for data in _events(client, url, body, request.model, stop, sse=True):
        yield _choice(data)


def _chat(
    client: Any, request: Infill, stop: StopSignal | None
) -> Generator[str, None, None]:
    context = "".join(f"{name}:\n{text}\n\n" for name, text in request.context)
    code = f"{request.prefix}<FILL>{request.suffix}"
    messages = [
        {"role": "system", "content": CHAT_INSTRUCTIONS},
        {"role": "user", "content": f"{context}The {request.language} code:\n{code}"},
    ]
    options = {"max_tokens": request.max_tokens, "temperature": request.temperature}
    texts = (event.text for event in client.stream(messages, model=request.model,
                                                   options=options, stop=stop)
             if type(event) is TextDelta)  # fmt: skip
    yield from _unfenced(texts)


def _unfenced(texts: Iterator[str]) -> Iterator[str]:
    """A chat model's reply without the code fence it may put around the middle."""
    head: str | None = ""
    for text in texts:
        if head is not None:
            head += text
            if "\n" not in head and len(head) < 12 and "```".startswith(head.lstrip()[:3]):
                continue  # may be the start of a fence: wait for the rest of its line
            text, head = _FENCE.sub("", head, count=1), None
        if text.rstrip().endswith("```"):
            text = text.rstrip()[:-3]
        if text:
            yield text
    if head:
        yield _FENCE.sub("", head, count=1)


def _choice(data: Any) -> dict[str, Any]:
    choices = data.get("choices") if isinstance(data, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _events(
    client: Any, url: str, body: dict[str, Any], model: str, stop: StopSignal | None, *,
    sse: bool,
) -> Iterator[Any]:
    """The JSON payloads of a streamed POST: SSE ``data`` lines or NDJSON lines."""
    settings = client.settings
    # A request of its own when it may be stopped: closing its client ends it, also
    # before the endpoint has answered (a model loading), which the pool cannot do.
    http = _http.pooled_client(settings) if stop is None else _http.own_client(settings)
    request = http.build_request(
        "POST", url, headers={**_http.headers_for(settings), "Content-Type": "application/json"},
        content=json.dumps(body).encode(),
    )  # fmt: skip

    def send() -> httpx.Response:
        return _http.send(settings.with_(max_retries=0), request, model=model, client=http,
                          detail=client.provider.error_detail)  # fmt: skip

    with _http.redacting(), on_stop(stop, lambda: shut_client(http)):
        try:
            response = send() if stop is None else send_until_stopped(send, stop)
            if response is None:
                return
            try:
                yield from _payloads(response, settings.base_url, sse, stop)
            finally:
                response.close()
        except Exception:
            if stop is not None and stop.is_set():
                return  # the stop broke the connection: the suggestion just ends
            raise
        finally:
            if stop is not None:
                http.close()


def _payloads(
    response: httpx.Response, url: str, sse: bool, stop: StopSignal | None
) -> Iterator[Any]:
    decoder: SSEDecoder | LineDecoder = SSEDecoder() if sse else LineDecoder()
    for chunk in body_bytes(response, url):
        for payload in decoder.feed(chunk):
            if payload.strip() == "[DONE]":
                return
            try:
                yield json.loads(payload)
            except ValueError:
                continue
        if stop is not None and stop.is_set():
            return


_FORMS: dict[Form, Callable[[Any, Infill, StopSignal | None], Generator[str, None, None]]] = {
    "infill": _infill, "ollama": _ollama, "completions": _completions,
    "codestral": _codestral, "chat": _chat,
}  # fmt: skip
