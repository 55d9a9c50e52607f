"""ScriptedServer: a real loopback HTTP server that answers from a script."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ._anthropic import PromptCache
from ._anthropic import prompt_tokens as anthropic_prompt_tokens
from ._demo import default_answer
from ._handler import Handler
from ._http import HTTPServer
from ._protocols import Answer, count_prompt_tokens
from ._record import RecordedRequest
from ._script import Body, Reply, split_words

DEFAULT_MODELS = ("nbchat-demo", "scripted-small", "scripted-large")

T = TypeVar("T")


@dataclass
class _Rule:
    reply: Reply
    used: int = 0

    def is_available(self) -> bool:
        return self.reply.times is None or self.used < self.reply.times


class ScriptedServer:
    """An OpenAI-, Ollama-, Anthropic- and Gemini-compatible chat server on loopback, driven by a
    script.

    Each chat request is answered by the first :class:`Reply` rule that
    matches it, or by the offline demo model's default answer. Every request
    is recorded in :attr:`requests`.

    Parameters
    ----------
    *replies
        The initial rules, as :meth:`script` takes them.
    host, port
        Where to listen; port 0 picks a free port (see :attr:`url`).
    models
        The models offered and accepted; any other gets the protocol's 404.
        Empty accepts every model name.
    api_key
        When set, every request must carry ``Authorization: Bearer <api_key>``
        (Anthropic's ``x-api-key``, Azure's ``api-key`` and Gemini's
        ``x-goog-api-key`` headers count too, and Gemini's ``?key=``).
    text_only_models
        Models that refuse a request carrying images (HTTP 400, as a text-only
        model behind a real server does); every other model accepts them.
    context_size
        When set, the model's context in tokens: reported by ``GET /props``
        (llama.cpp) and ``POST /api/show`` (Ollama), and an OpenAI chat request
        whose prompt (counted in words) is longer gets llama-server's HTTP 400
        ``exceed_context_size_error``.
    template_tools
        When set, ``GET /props`` also says whether the chat template takes
        tools (llama.cpp's ``chat_template_caps.supports_tools``), as a small
        model that was never taught tools reports ``False``.

    Examples
    --------
    >>> with ScriptedServer(Reply("Hi!")) as server:
    ...     server.url.startswith("http://127.0.0.1:")
    True
    """

    def __init__(
        self,
        *replies: Reply,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Iterable[str] = DEFAULT_MODELS,
        api_key: str | None = None,
        text_only_models: Iterable[str] = (),
        context_size: int | None = None,
        template_tools: bool | None = None,
    ) -> None:
        self.host = host
        self.template_tools = template_tools
        self.text_only_models = tuple(text_only_models)
        self.context_size = context_size
        self.port = port
        self.models = tuple(models)
        self.api_key = api_key
        self._changed = threading.Condition(threading.RLock())
        self._rules: list[_Rule] = []
        self._log: list[RecordedRequest] = []
        self._calls = 0
        self._responses = 0
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cache = PromptCache()
        self.script(*replies)

    def __repr__(self) -> str:
        where = self.url if self.is_running else "stopped"
        return f"<ScriptedServer {where} rules={len(self._rules)}>"

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind and serve in a daemon thread; a running server is left as is."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = HTTPServer((self.host, self.port), Handler, owner=self)
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"nbchat-scripted-server-{httpd.server_port}",
            daemon=True,
        )
        thread.start()
        self._httpd, self._thread = httpd, thread
        return self

    def stop(self) -> None:
        """Stop serving: end open streams and stalls, close every connection."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()
        httpd.wait_closed(timeout=5.0)
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def is_running(self) -> bool:
        return self._httpd is not None

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"{self.ollama_url}/v1"

    @property
    def anthropic_url(self) -> str:
        """The Anthropic base URL, ``http://127.0.0.1:PORT``, as its SDK takes it (same server)."""
        return self.ollama_url

    @property
    def ollama_url(self) -> str:
        """The Ollama base URL, ``http://127.0.0.1:PORT`` (the same server)."""
        if self._httpd is None:
            raise RuntimeError("the scripted server is not running; call start() first")
        host, port = self._httpd.server_name, self._httpd.server_port
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}"

    # -- the script --------------------------------------------------------

    def script(self, *replies: Reply) -> ScriptedServer:
        """Append rules; the first matching rule answers."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"script() takes Reply objects, not {type(reply).__name__}")
        with self._changed:
            self._rules.extend(_Rule(reply) for reply in replies)
        return self

    def reset(self) -> None:
        """Forget all rules, the request log and the id counters."""
        with self._changed:
            self._rules.clear()
            self._log.clear()
            self._calls = self._responses = 0
            self._cache = PromptCache()
            self._changed.notify_all()

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, in order (a copy of the log)."""
        with self._changed:
            return list(self._log)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The chat requests of :attr:`requests`, whatever their protocol."""
        return [r for r in self.requests if r.is_chat]

    def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0) -> T:
        """Block until ``predicate()`` is truthy and return it.

        It is re-checked whenever a request arrives or changes state, e.g.
        ``server.wait_for(lambda: server.requests[-1].disconnected)``.
        Raises TimeoutError after ``timeout`` seconds.
        """
        with self._changed:
            result = self._changed.wait_for(predicate, timeout)
        if not result:
            raise TimeoutError(f"condition not met within {timeout} s: {self.requests!r}")
        return result

    # -- for the handler threads (_handler.py) ----------------------------

    def _record(self, **fields: Any) -> RecordedRequest:
        body = fields["body"]
        request = RecordedRequest(**fields)
        if isinstance(body, dict):
            messages = fields.get("messages", body.get("messages"))
            request.messages = messages if isinstance(messages, list) else []
            model = body.get("model", fields.get("model"))  # Gemini's is in the path
            request.model = model if isinstance(model, str) else None
        with self._changed:
            self._log.append(request)
            self._changed.notify_all()
        return request

    def _update(self, request: RecordedRequest, **changes: Any) -> None:
        with self._changed:
            for name, value in changes.items():
                setattr(request, name, value)
            self._changed.notify_all()

    def _progress(
        self, request: RecordedRequest, chunks: int, completed: bool | None = None
    ) -> None:
        with self._changed:
            request.chunks_sent += chunks
            if completed is not None:
                request.completed = completed
            self._changed.notify_all()

    def _pick(self, body: Body) -> Reply | None:
        """The first available rule matching ``body``, now counted as used."""
        with self._changed:
            for rule in self._rules:
                if rule.is_available() and rule.reply.matches(body):
                    rule.used += 1
                    return rule.reply
        return None

    def _answer(
        self, reply: Reply | None, body: Body, model: str, anthropic: Body | None = None
    ) -> Answer:
        """``reply`` (default: the demo answer) made concrete, with fresh ids.

        ``anthropic`` is the raw body of an Anthropic request: its prompt is
        counted in blocks and goes through the prompt cache.
        """
        if reply is None:
            reply = Reply(default_answer(body))
        prompt = count_prompt_tokens(body)
        read, write = min(reply.cached_tokens, prompt), 0
        with self._changed:
            if anthropic is not None:
                cached = self._cache.use(anthropic)
                prompt, read, write = anthropic_prompt_tokens(anthropic), cached.read, cached.write
            self._responses += 1
            response_id = f"chatcmpl-scripted-{self._responses}"
            first = self._calls + 1
            self._calls += len(reply.tool_calls)
        calls = [
            (f"call_{first + i}", name, arguments)
            for i, (name, arguments) in enumerate(reply.tool_calls)
        ]
        chunks = reply.content_chunks()
        reasoning = split_words(reply.reasoning)
        if reasoning and reply.reasoning_as == "think" and anthropic is None:
            chunks = ["<think>", *reasoning, "</think>\n\n", *chunks]
            reasoning = []
        return Answer(
            response_id=response_id,
            model=model,
            chunks=chunks,
            tool_calls=calls,
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            prompt_tokens=prompt,
            reasoning=reasoning,
            reasoning_field=reply.reasoning_as,
            no_finish=reply.no_finish,
            cache_read_tokens=read,
            cache_write_tokens=write,
            redacted_thinking=reply.redacted_thinking,
            usage_fields=dict(reply.usage_fields or {}),
        )


_demo: ScriptedServer | None = None
_demo_lock = threading.Lock()


def demo_server() -> ScriptedServer:
    """The process-wide offline demo model: started on first use, never stopped."""
    global _demo
    with _demo_lock:
        if _demo is None or not _demo.is_running:
            _demo = ScriptedServer().start()
        return _demo
