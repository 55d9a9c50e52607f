"""RecordedRequest: one request as the scripted server received it, and the chat paths.

Its own module because both sides use it: the handler threads (_handler.py)
fill it in while they serve, and ScriptedServer (_server.py) keeps the log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ._anthropic import ANTHROPIC
from ._fim import FIM_PATHS
from ._gemini import path_method
from ._protocols import OLLAMA, OPENAI
from ._responses import RESPONSES
from ._script import request_images

CHAT_PATHS = frozenset(
    {OPENAI.chat_path, OLLAMA.chat_path, ANTHROPIC.chat_path, RESPONSES.chat_path}
)
# Azure OpenAI: /openai/deployments/DEPLOYMENT/chat/completions?api-version=…
AZURE_CHAT = re.compile(r"^/openai/deployments/([^/]+)/chat/completions$")
# Body fields that are not generation options (the rest are, on the OpenAI wire).
_NOT_OPTIONS = frozenset({"model", "messages", "stream", "stream_options", "tools"})
_OLLAMA_FIELDS = ("format", "keep_alive", "think", "raw")  # options outside ``options``
_GEMINI_NOT_OPTIONS = frozenset({"contents", "systemInstruction", "tools", "generationConfig"})
# The text of a fill-in-the-middle request, not its options.
_FIM_TEXT = frozenset({"prompt", "suffix", "input_prefix", "input_suffix", "input_extra"})


@dataclass(eq=False)
class RecordedRequest:
    """One request as the server received it, and how serving it went.

    ``status``, ``completed``, ``disconnected`` and ``chunks_sent`` change
    while the response is written; wait for them with
    :meth:`ScriptedServer.wait_for`. ``chunks_sent`` counts the reply's text
    chunks and tool-call pieces, not the framing (OpenAI's role chunk, the
    finish, usage and ``[DONE]`` events, Ollama's final line).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # "openai", "ollama", "anthropic", "responses", "gemini", or a fill-in-the-middle form:
    # "llama-infill", "openai-completions", "mistral-fim", "ollama-generate"
    protocol: str
    connection: tuple[str, int]  # the client's (host, port): same tuple, same connection
    messages: list[Any] = field(default_factory=list)
    model: str | None = None
    status: int | None = None
    completed: bool = False
    disconnected: bool = False
    chunks_sent: int = 0
    raw: bytes = b""  # the body's bytes exactly as they arrived

    @property
    def is_chat(self) -> bool:
        """Whether this is a chat request (any protocol: Azure's deployment paths, OpenAI's
        Responses and Gemini's generateContent too)."""
        path = self.path.split("?", 1)[0]
        gemini = path_method(path) in ("generateContent", "streamGenerateContent")
        return path in CHAT_PATHS or gemini or AZURE_CHAT.match(path) is not None

    @property
    def is_fim(self) -> bool:
        """Whether this is a fill-in-the-middle (code completion) request, in any form."""
        return self.path.split("?", 1)[0] in FIM_PATHS

    @property
    def fim_prefix(self) -> str:
        """A fill-in-the-middle request's text before the cursor, as ``when`` matched it."""
        form = FIM_PATHS.get(self.path.split("?", 1)[0])
        return form.prefix(self.body) if form and isinstance(self.body, dict) else ""

    @property
    def fim_suffix(self) -> str:
        """A fill-in-the-middle request's text after the cursor."""
        form = FIM_PATHS.get(self.path.split("?", 1)[0])
        return form.suffix(self.body) if form and isinstance(self.body, dict) else ""

    @property
    def images(self) -> list[bytes]:
        """The images the request's messages carried, decoded, in order (both protocols)."""
        return request_images(self.messages)

    @property
    def options(self) -> dict[str, Any]:
        """The generation options the request carried, as the wire spelled them.

        OpenAI: every body field but model, messages, stream, stream_options
        and tools (``max_tokens``, ``temperature``, ``seed``, ``tool_choice``, …).
        Ollama: its ``options`` object plus ``format``, ``keep_alive``, ``think``.
        Anthropic: every body field but model, messages, stream, system and tools.
        Gemini: its ``generationConfig`` plus every body field but contents,
        systemInstruction, tools and generationConfig (``toolConfig``, ``safetySettings``).
        Fill-in-the-middle: the same, less the text (``prompt``, ``suffix``,
        ``input_prefix``, ``input_suffix``, ``input_extra``); Ollama's
        ``/api/generate`` adds ``raw``.
        """
        body = self.body if isinstance(self.body, dict) else {}
        if self.protocol == "anthropic":
            return {k: v for k, v in body.items() if k not in _NOT_OPTIONS | {"system"}}
        if self.protocol == "gemini":
            found = dict(body.get("generationConfig") or {})
            found.update({k: v for k, v in body.items() if k not in _GEMINI_NOT_OPTIONS})
            return found
        if self.protocol in ("ollama", "ollama-generate"):
            found = dict(body.get("options") or {})
            found.update({k: body[k] for k in _OLLAMA_FIELDS if k in body})
            return found
        if self.is_fim:
            return {k: v for k, v in body.items() if k not in _NOT_OPTIONS | _FIM_TEXT}
        return {k: v for k, v in body.items() if k not in _NOT_OPTIONS}
