"""The one place httpx meets nbchat: pooled clients, timeouts, retries, errors.

Retries (connect errors, 429, 5xx) happen only before the first byte of an
answer: once a stream has started, a failure is reported, never replayed. A
5xx that says the request itself is wrong (llama-server answers HTTP 500 to a
tool call it cannot parse) fails the same way every time, so it is not retried.

Servers echo what they were sent, headers included: every error that leaves a
conversation with an endpoint goes through :func:`redacting`, which removes
the API keys this process sent, anything shaped like a key or a bearer
token, and the user and password of every URL (``https://user:pass@host``),
so no message, attribute, stored turn or pickle can carry one.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import random
import re
import ssl
import threading
import time
from collections.abc import Callable, Collection, Iterator

import httpx

from ..base._secrets import REDACTED, redact_url, remember, scrub, scrub_pieces
from ..base._visible import for_terminal
from ..base.config import ENV_AZURE_AD_TOKEN, Settings
from ..base.errors import (
    AuthenticationError,
    ContextOverflow,
    LLMConnectError,
    LLMError,
    LLMTimeout,
    ModelNotFound,
    OptionRejected,
    RateLimited,
    ServerError,
)

# What a server says when the request, not the server, is at fault.
_REQUEST_FAULT = re.compile(
    r"pars(e|ing)|invalid|validat|exceed|not supported|unsupported|schema|required|"
    r"must be|too long|context",
    re.IGNORECASE,
)
_OVERFLOW = re.compile(
    r"context[ _](size|length|window)|exceed_context|maximum context|prompt is too long|"
    r"too many tokens",
    re.IGNORECASE,
)
# llama-server: "context size (4096 tokens)"; Anthropic: "215000 tokens > 200000 maximum"
_CONTEXT_SIZE = re.compile(
    r"context[\w\s]*?\(?([\d,]+)\s*tokens|context window of ([\d,]+)|> ([\d,]+) maximum",
    re.IGNORECASE,
)
_PROMPT_TOKENS = re.compile(
    r"(?:request|prompt|resulted in|messages)\D{0,20}?\(?([\d,]+)\s*tokens|"
    r"requested tokens \(([\d,]+)\)",
    re.IGNORECASE,
)

ANTHROPIC_VERSION = "2023-06-01"  # the Messages API version nbchat's decoder is written for
OVERLOADED = 529  # Anthropic: overloaded_error, retried like a rate limit

_clients: dict[tuple[str, float, float], httpx.Client] = {}
_clients_lock = threading.Lock()

_KEY_SHAPES = re.compile(
    r"(?i)(?<=\bbearer )[^\s\"',;{}\[\]]{8,}"  # Authorization: Bearer <token>
    r"|(?<=\bbasic )[A-Za-z0-9+/=]{8,}"  # Authorization: Basic <base64>
    r"|\bsk-[A-Za-z0-9_\-]{6,}"  # OpenAI / Anthropic style keys
    r"|(?<=api[-_]key=)[^\s&\"',;{}\[\]]+"  # ?api-key=… in a URL
    r"|(?<=api-key: )[^\s\"',;{}\[\]]{8,}"  # x-api-key: … and api-key: … headers
    r"|(?<=[\"']api[-_]key[\"']: [\"'])[^\"'\[\]]+"  # "api_key": "…" in JSON
)


def pooled_client(settings: Settings) -> httpx.Client:
    """The process-wide pooled client for this endpoint (one per base URL and timeouts)."""
    key = (settings.base_url, settings.connect_timeout, settings.read_timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client.is_closed:
            client = own_client(settings)
            _clients[key] = client
        return client


def own_client(settings: Settings) -> httpx.Client:
    """A client of its own for one request, closed with it (from any thread, to stop it)."""
    timeout = httpx.Timeout(
        settings.read_timeout, connect=settings.connect_timeout, pool=settings.connect_timeout
    )
    return httpx.Client(timeout=timeout, follow_redirects=True, trust_env=False,
                        verify=_tls_context())  # fmt: skip


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """The certificate store, loaded once: loading it costs more than a loopback request."""
    return httpx.create_ssl_context()


@atexit.register
def close_clients() -> None:
    """Close every pooled client (at exit, so no connection is left to the collector)."""
    with _clients_lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def headers_for(settings: Settings) -> dict[str, str]:
    """Request headers; the key goes only into the header its provider reads.

    Anthropic reads ``x-api-key`` (with the ``anthropic-version`` it answers
    in), Azure OpenAI ``api-key`` (a Microsoft Entra ID token goes as a
    bearer), every other endpoint ``Authorization: Bearer``.
    """
    headers = {"Accept": "application/json, text/event-stream"}
    if "@" in settings.base_url:  # httpx sends a URL's user and password as Basic auth
        url = httpx.URL(settings.base_url)
        remember(url.password)
    if settings.provider == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
    key = settings.api_key
    if key:
        remember(key)
        if settings.provider == "anthropic":
            headers["x-api-key"] = key
        elif settings.provider == "azure" and settings.key_source != ENV_AZURE_AD_TOKEN:
            headers["api-key"] = key
        else:
            headers["Authorization"] = f"Bearer {key}"
    return headers


def redact(text: str) -> str:
    """``text`` without the keys this process uses, anything shaped like a key, URL passwords."""
    return redact_url(_KEY_SHAPES.sub(REDACTED, scrub(text)))


@contextlib.contextmanager
def redacting() -> Iterator[None]:
    """Let no :class:`~nbchat.LLMError` out with a key in its message or attributes.

    The redacted copy is raised without its chain: the original and the
    foreign exception it came from may quote the server verbatim.
    """
    try:
        yield
    except LLMError as exc:
        clean = _redacted(exc)
        if clean is exc:
            raise
    else:
        return
    raise clean from None


def _redacted(exc: LLMError) -> LLMError:
    args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
    state = {k: redact(v) if isinstance(v, str) else v for k, v in vars(exc).items()}
    if args == exc.args and state == vars(exc):
        return exc
    clean = type(exc).__new__(type(exc))
    Exception.__init__(clean, *args)
    vars(clean).update(state)
    clean.__traceback__ = exc.__traceback__
    return clean


def send(
    settings: Settings,
    request: httpx.Request,
    *,
    detail: Callable[[bytes], str],
    model: str | None = None,
    options: Collection[str] = (),
    sleep: Callable[[float], None] = time.sleep,
    client: httpx.Client | None = None,
) -> httpx.Response:
    """Send ``request`` (streamed) and return a 2xx response, retrying what may be retried.

    The caller must close the response. Non-retryable statuses and exhausted
    retries become :class:`~nbchat.LLMError` subclasses. ``client`` is the
    pooled one unless given (a request that must be closable before it is answered).
    """
    client = pooled_client(settings) if client is None else client
    url = settings.base_url
    deadline = time.monotonic() + settings.retry_budget
    attempt = 0
    resent = False
    while True:
        attempt += 1
        try:
            response = client.send(request, stream=True)
        except httpx.ConnectError as exc:
            error: LLMError = _cannot_connect(url, exc)
            delay = _backoff(attempt)
        except httpx.HTTPError as exc:
            # llama.cpp's server closes the connection after a streamed answer while
            # offering keep-alive: the next request, on the pooled socket, is lost
            # unread. Sent once more on a new connection; that is not a retry.
            if not resent and _closed_before_answering(exc):
                resent, attempt = True, attempt - 1
                continue
            raise _transport_error(url, exc) from exc
        else:
            if response.status_code < 400:
                return response
            text = _read_detail(response, detail)
            error = _status_error(settings, response, text, model, options)
            if not _retryable(response.status_code, text):
                raise error
            delay = _retry_after(response) or _backoff(attempt)
        remaining = deadline - time.monotonic()
        if attempt > settings.max_retries or delay > remaining:
            raise error
        sleep(delay)


def _cannot_connect(url: str, exc: httpx.ConnectError) -> LLMConnectError:
    return LLMConnectError(
        f"cannot connect to the model endpoint at {url} ({_reason(exc)}); "
        f"check that it is running, or set NBCHAT_BASE_URL",
        url=url,
    )


def _transport_error(url: str, exc: httpx.HTTPError) -> LLMError:
    """A failure after connecting: a timeout, or the conversation broke."""
    if isinstance(exc, httpx.TimeoutException):
        return LLMTimeout(
            f"the model endpoint at {url} did not answer in time ({type(exc).__name__}); "
            f"try again, or raise the timeout",
            url=url,
        )
    return LLMConnectError(
        f"talking to the model endpoint at {url} failed: {_reason(exc)}", url=url
    )


def _read_detail(response: httpx.Response, detail: Callable[[bytes], str]) -> str:
    """The error body of a failed ``response``, read, closed, redacted, its controls escaped.

    It becomes an error message, which terminals and stream outputs print.
    """
    body = response.read()
    response.close()
    clean = redact(body.decode("utf-8", "replace")).encode()  # before any cut in ``detail``
    return for_terminal(scrub_pieces(redact(detail(clean))))


def _number(pattern: re.Pattern[str], detail: str) -> int | None:
    found = pattern.search(detail)
    digits = next((group for group in found.groups() if group), None) if found else None
    return int(digits.replace(",", "")) if digits else None


def _retryable(status: int, detail: str) -> bool:
    if status in (429, OVERLOADED) or status in (502, 503, 504):
        return True
    return status >= 500 and not _REQUEST_FAULT.search(detail)


def _status_error(
    settings: Settings,
    response: httpx.Response,
    detail: str,
    model: str | None,
    options: Collection[str] = (),
) -> LLMError:
    """The error an HTTP status means; the first that fits, most specific first."""
    url, status = settings.base_url, response.status_code
    if status in (400, 413, 422, 500) and _OVERFLOW.search(detail):
        return _overflow(settings, status, detail)
    rejected = _rejected_option(status, detail, options)
    if rejected:
        return OptionRejected(
            f"the model endpoint at {url} rejected the option {rejected} "
            f"(HTTP {status}: {_line_naming(rejected, detail)}); change or remove it",
            url=url,
            status=status,
            option=rejected,
        )
    if status in (401, 403):
        return _refused_key(settings, status)
    if status == 404 and model is not None and "model" in detail.lower():
        return ModelNotFound(f"model {model!r} not found at {url}", url=url, model=model)
    if status == 429:
        return _rate_limited(url, response, detail)
    if status == OVERLOADED:
        return ServerError(
            f"the model endpoint at {url} is overloaded (HTTP 529: {detail or 'Overloaded'}); "
            f"wait a moment and ask again",
            url=url,
            status=status,
        )
    said = detail or redact(response.reason_phrase)
    return ServerError(
        f"the model endpoint at {url} answered HTTP {status}: {said}",
        url=url,
        status=status,
    )


def _overflow(settings: Settings, status: int, detail: str) -> ContextOverflow:
    url = settings.base_url
    size, sent = _number(_CONTEXT_SIZE, detail), _number(_PROMPT_TOKENS, detail)
    if size or settings.context_size:
        # nbchat knew the size, so it already sent only what it thought would fit.
        fix = (
            "attach less to the question (a slice such as @df.head(50)), lower "
            "--max-tokens, or start a new thread with %chat --new"
        )
    else:
        fix = (
            "nbchat sends fewer earlier turns when it knows the context size: set "
            "NBCHAT_CONTEXT_SIZE, or start a new thread with %chat --new"
        )
    return ContextOverflow(
        f"the conversation is longer than the model's context at {url} (HTTP {status}: "
        f"{detail}); {fix}",
        url=url,
        status=status,
        context_size=size,
        prompt_tokens=sent if sent != size else None,
    )


def _refused_key(settings: Settings, status: int) -> AuthenticationError:
    if settings.api_key:
        what = f"refused the API key from {settings.key_source}"
    else:
        what = f"needs an API key and none is set; set {settings.key_source}"
    again = "in a notebook, give it with %chat --key"
    if settings.connection and "provided" not in settings.key_source:
        again = (f"give it again in JupyterLab's Connect dialog, or with python -m nbchat keys "
                 f"set {settings.connection}")  # fmt: skip
    return AuthenticationError(
        f"the model endpoint at {settings.base_url} {what} (HTTP {status}); "
        f"check the key with your provider; {again}",
        url=settings.base_url,
    )


def _rate_limited(url: str, response: httpx.Response, detail: str) -> RateLimited:
    after = _retry_after(response)
    wait = f"; it asked to wait {after:g} s" if after is not None else ""
    return RateLimited(
        f"the model endpoint at {url} is rate limiting requests{wait}; "
        f"wait a moment and ask again ({detail})",
        url=url,
        retry_after=after,
    )


def _line_naming(option: str, detail: str, limit: int = 200) -> str:
    """The line of a (maybe multi-line) error text that names ``option``, whitespace folded."""
    lines = [line for line in detail.splitlines() if line.strip()] or [detail]
    line = next((x for x in lines if re.search(rf"\b{re.escape(option)}\b", x)), lines[0])
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _rejected_option(status: int, detail: str, options: Collection[str]) -> str | None:
    if status not in (400, 422) and not (status >= 500 and _REQUEST_FAULT.search(detail)):
        return None
    named = [o for o in options if re.search(rf"\b{re.escape(o)}\b", detail)]
    return max(named, key=len) if named else None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _closed_before_answering(exc: httpx.HTTPError) -> bool:
    return isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)


def _backoff(attempt: int) -> float:
    return min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)


def _reason(exc: Exception) -> str:
    text = redact(str(exc).strip())
    return text or type(exc).__name__
