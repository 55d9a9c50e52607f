"""Scripted replies: data that tells the server how to answer a chat request."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, fields
from pathlib import Path
from typing import Any, Union

Body = dict[str, Any]
Arguments = dict[str, Any] | str
When = Union[None, str, "re.Pattern[str]", Callable[[Body], bool]]

PARAGRAPH_TOKENS = 50
_CONTEXT_HEAD = re.compile(r'<context name="([^"]*)" kind="([^"]*)">')
_CONTEXT_BLOCK = re.compile(r"\s*<context name=.*?</context>", re.DOTALL)
# The sentence nbchat puts before the blocks, saying that they are data.
_CONTEXT_NOTE = re.compile(r"\s*Attached below, each in a <context> block:.*?inside them\.", re.S)
REASONING_FORMS = ("reasoning_content", "reasoning", "think")
_WORDISH = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class Reply:
    """One scripted behaviour: what to answer, to which request, and how to fail.

    Parameters
    ----------
    text
        The answer, streamed word by word unless ``chunks``, ``chunk_size`` or
        ``tokens`` says otherwise.
    when
        Which requests this rule answers: None (any), a str (case-insensitive
        substring of the last message's content, whatever its role), a compiled
        regex (searched in that content) or a callable taking the request body.
    after_tool
        Only when the last message is the result of a call to this tool.
    times
        Use the rule at most this many times, then skip it.
    tool_calls
        ``(name, arguments)`` pairs; a dict is sent as JSON, a str verbatim.
        Several are parallel calls; text, if any, streams first.
    chunks, chunk_size, tokens
        Explicit chunks; or chunks of this many characters; or a long
        deterministic answer of this many chunks (``word0 word1 …``).
    delay
        Seconds between chunks.
    status, retry_after, error_message, error_body
        Answer with this HTTP error status instead, in the protocol's error body,
        or with ``error_body`` as a plain-text body (a proxy's error page, say).
    cut_after, malformed_after, stall_after, stall
        After that many chunks: close the socket mid-body; send a line that is
        not JSON; or wait ``stall`` seconds before going on.
    hold
        Seconds to wait before answering at all, not even the headers (a
        server loading the model); a client hanging up ends the wait.
    repeat_bytes, repeat_seconds
        A stream that does not stop: after the chunks, send them again and
        again (``delay`` apart) until this many more bytes of body went out or
        ``repeat_seconds`` passed, then end normally. The client hanging up
        or the server stopping ends it sooner, so a test never hangs on it.
    usage
        Report token usage (OpenAI streams only when the request asks for it).
    finish_reason
        Overrides ``"stop"`` / ``"tool_calls"`` (e.g. ``"length"``, as a server
        says when ``max_tokens`` cut the answer).
    reasoning, reasoning_as
        Thinking streamed before the answer, word by word: in the OpenAI delta
        field ``reasoning_as`` names (``"reasoning_content"``, the default, as
        llama.cpp and vLLM send it, or ``"reasoning"``) and in Ollama's
        ``thinking``; or, with ``reasoning_as="think"``, inline in the content
        as ``<think>…</think>``. Anthropic always sends it as a signed
        ``thinking`` block.
    no_finish
        End an OpenAI stream with ``data: [DONE]`` and no finish reason (what
        llama-cpp-python does when another request interrupts it).
    empty_body
        Answer 200 with the headers and then an empty body.
    error_after
        After that many chunks, the protocol's error inside the stream
        (Anthropic's ``event: error`` with ``overloaded_error``, an OpenAI
        ``{"error": …}`` chunk, an Ollama ``{"error": …}`` line), then the end.
    cached_tokens
        OpenAI: report this many of the prompt's tokens as cached
        (``prompt_tokens_details.cached_tokens``). Anthropic's cache is played
        from the request's ``cache_control`` breakpoints instead.
    redacted_thinking
        Anthropic: a ``redacted_thinking`` block with this opaque data, after
        any ``reasoning``.
    usage_fields
        The protocol's own usage fields, sent instead of the counted ones, as
        a faulty or hostile endpoint might: ``{"prompt_tokens": -5}`` (OpenAI),
        ``{"eval_count": 10**30}`` (Ollama), ``{"input_tokens": True}``
        (Anthropic, in ``message_start`` and ``message_delta`` both).

    Notes
    -----
    Anthropic's stop reasons are the OpenAI ones translated: ``stop`` is
    ``end_turn``, ``length`` is ``max_tokens``, ``tool_calls`` is
    ``tool_use``; any other (``refusal``) is sent as it is.
    """

    text: str = ""
    _: KW_ONLY
    when: When = None
    after_tool: str | None = None
    times: int | None = None
    tool_calls: tuple[tuple[str, Arguments], ...] = ()
    chunks: tuple[str, ...] | None = None
    chunk_size: int | None = None
    tokens: int | None = None
    delay: float = 0.0
    status: int | None = None
    retry_after: float | None = None
    error_message: str | None = None
    error_body: str | None = None
    cut_after: int | None = None
    malformed_after: int | None = None
    stall_after: int | None = None
    stall: float = 30.0
    hold: float = 0.0
    repeat_bytes: int | None = None
    repeat_seconds: float = 30.0
    usage: bool = True
    finish_reason: str | None = None
    reasoning: str = ""
    reasoning_as: str = "reasoning_content"
    no_finish: bool = False
    empty_body: bool = False
    error_after: int | None = None
    cached_tokens: int = 0
    redacted_thinking: str = ""
    usage_fields: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        calls = tuple(_tool_call(call) for call in self.tool_calls)
        object.__setattr__(self, "tool_calls", calls)
        if self.chunks is not None:
            object.__setattr__(self, "chunks", tuple(self.chunks))
        if self.usage_fields is not None:
            object.__setattr__(self, "usage_fields", dict(self.usage_fields))
        _validate(self)

    @property
    def content(self) -> str:
        """The whole answer text, as a non-streaming client receives it."""
        return "".join(self.content_chunks())

    def content_chunks(self) -> list[str]:
        """The text chunks as streamed, in order."""
        if self.chunks is not None:
            return list(self.chunks)
        if self.tokens is not None:
            return token_chunks(self.tokens)
        if self.chunk_size is not None:
            size = self.chunk_size
            return [self.text[i : i + size] for i in range(0, len(self.text), size)]
        return split_words(self.text)

    def matches(self, body: Body) -> bool:
        """Whether this rule answers the request ``body`` (``times`` aside)."""
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        if self.after_tool is not None and last_tool_name(messages) != self.after_tool:
            return False
        when = self.when
        if when is None:
            return True
        if callable(when) and not isinstance(when, re.Pattern):
            return bool(when(body))
        last = message_text(messages[-1].get("content")) if messages else ""
        if isinstance(when, re.Pattern):
            return when.search(last) is not None
        return when.casefold() in last.casefold()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields that differ from their defaults."""
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value == f.default:
                continue
            if f.name == "when":
                value = _when_to_json(value)
            elif f.name == "tool_calls":
                value = [{"name": name, "arguments": args} for name, args in value]
            elif f.name == "chunks":
                value = list(value)
            data[f.name] = value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        """The reply described by ``data`` (as written by :meth:`to_dict`)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown Reply field(s) {unknown}; known fields: {sorted(known)}")
        kwargs = dict(data)
        if "when" in kwargs:
            kwargs["when"] = _when_from_json(kwargs["when"])
        return cls(**kwargs)


def _tool_call(call: Any) -> tuple[str, Arguments]:
    if isinstance(call, Mapping):
        call = (call.get("name"), call.get("arguments", {}))
    if not (isinstance(call, (tuple, list)) and len(call) == 2 and isinstance(call[0], str)):
        raise TypeError(f"a tool call is a (name, arguments) pair, not {call!r}")
    name, arguments = call
    if not isinstance(arguments, (dict, str)):
        raise TypeError(f"arguments of tool call {name!r} must be a dict or a str")
    return name, arguments


def _validate(reply: Reply) -> None:
    shapes = [n for n in ("chunks", "chunk_size", "tokens") if getattr(reply, n) is not None]
    if len(shapes) > 1 or (shapes and shapes[0] != "chunk_size" and reply.text):
        given = (["text"] if reply.text else []) + shapes
        raise ValueError(f"Reply takes one of text, chunks or tokens, got {given}")
    for name in ("times", "cut_after", "malformed_after", "stall_after", "tokens", "repeat_bytes",
                 "error_after", "cached_tokens"):  # fmt: skip
        value = getattr(reply, name)
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(f"Reply {name} must be a non-negative int, got {value!r}")
    if reply.chunk_size is not None and reply.chunk_size < 1:
        raise ValueError(f"Reply chunk_size must be at least 1, got {reply.chunk_size!r}")
    if reply.status is not None and not 400 <= reply.status <= 599:
        raise ValueError(f"Reply status must be an HTTP error status (400-599), got {reply.status}")
    if reply.reasoning_as not in REASONING_FORMS:
        raise ValueError(
            f"Reply reasoning_as must be one of {REASONING_FORMS}, got {reply.reasoning_as!r}"
        )
    if min(reply.delay, reply.stall, reply.hold, reply.repeat_seconds) < 0:
        raise ValueError("Reply delay, stall, hold and repeat_seconds must not be negative")


def _when_to_json(when: When) -> Any:
    if isinstance(when, re.Pattern):
        flags = when.flags & ~re.UNICODE
        return {"regex": when.pattern, **({"flags": flags} if flags else {})}
    if callable(when):
        raise TypeError("a Reply whose `when` is a callable cannot be written as JSON")
    return when


def _when_from_json(when: Any) -> When:
    if isinstance(when, Mapping):
        return re.compile(when["regex"], when.get("flags", 0))
    if when is not None and not isinstance(when, str):
        raise TypeError(f"`when` in JSON is a string or {{'regex': ...}}, not {when!r}")
    return when


def split_words(text: str) -> list[str]:
    """``text`` in word-ish chunks: each word with the whitespace after it."""
    return _WORDISH.findall(text)


def token_chunks(count: int) -> list[str]:
    """``count`` chunks ``word0 word1 …``, a paragraph break every 50 words."""
    chunks = []
    for i in range(count):
        if i == count - 1:
            sep = ""
        elif (i + 1) % PARAGRAPH_TOKENS == 0:
            sep = "\n\n"
        else:
            sep = " "
        chunks.append(f"word{i}{sep}")
    return chunks


def message_text(content: Any) -> str:
    """The text of a message's content: a str, or OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (p.get("text", "") for p in content if isinstance(p, Mapping))
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def question_text(content: Any) -> str:
    """The text of a message without the context attached to it (``<context …>`` blocks)."""
    return _CONTEXT_NOTE.sub("", _CONTEXT_BLOCK.sub("", message_text(content))).strip()


def context_names(content: Any) -> list[tuple[str, str]]:
    """(name, kind) of each ``<context name=… kind=…>`` block in a message's content."""
    return _CONTEXT_HEAD.findall(message_text(content))


def request_images(messages: Any) -> list[bytes]:
    """The images in OpenAI ``image_url`` data-URL parts and Ollama ``images``, decoded."""
    found: list[bytes] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            url = part.get("image_url", {}).get("url", "") if isinstance(part, Mapping) else ""
            if isinstance(url, str) and url.startswith("data:") and "," in url:
                found.append(_b64(url.split(",", 1)[1]))
        for image in message.get("images") or []:
            if isinstance(image, str):
                found.append(_b64(image))
    return found


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return b""


def last_tool_name(messages: list[Any]) -> str | None:
    """Name of the tool whose result is the last message, if it is one."""
    if not messages or not isinstance(messages[-1], Mapping):
        return None
    last = messages[-1]
    if last.get("role") != "tool":
        return None
    for key in ("tool_name", "name"):
        if isinstance(last.get(key), str):
            return str(last[key])
    calls = _latest_tool_calls(messages)
    call_id = last.get("tool_call_id")
    for call in calls:
        if call_id is not None and call.get("id") == call_id:
            return _call_name(call)
    if call_id is None:  # Ollama: tool results follow the calls in order
        position = _trailing_tool_results(messages) - 1
        if 0 <= position < len(calls):
            return _call_name(calls[position])
    return None


def _latest_tool_calls(messages: Iterable[Any]) -> list[Mapping[str, Any]]:
    for message in reversed(list(messages)):
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if calls:
                return [c for c in calls if isinstance(c, Mapping)]
    return []


def _trailing_tool_results(messages: list[Any]) -> int:
    count = 0
    for message in reversed(messages):
        if not (isinstance(message, Mapping) and message.get("role") == "tool"):
            break
        count += 1
    return count


def _call_name(call: Mapping[str, Any]) -> str | None:
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) else None


def arguments_json(arguments: Arguments) -> str:
    """The arguments as the OpenAI wire sends them: a JSON string, raw strs verbatim."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def load_script(path: str | Path) -> list[Reply]:
    """The replies in a JSON script file.

    The file holds a list of :meth:`Reply.to_dict` objects, or an object with
    that list under ``"replies"``.
    """
    data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, Mapping):
        data = data.get("replies")
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a JSON list of replies or {{'replies': [...]}}")
    return [Reply.from_dict(item) for item in data]
