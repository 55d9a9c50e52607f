"""The one place httpx meets nbchat: pooled clients, timeouts, retries, errors.

Retries (connect errors, 429, 5xx) happen only before the first byte of an
answer: once a stream has started, a failure is reported, never replayed.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import httpx

from ..config import Settings
from ..errors import (
    AuthenticationError,
    LLMConnectError,
    LLMError,
    LLMTimeout,
    ModelNotFound,
    RateLimited,
    ServerError,
)

_clients: dict[tuple[str, float, float], httpx.Client] = {}
_clients_lock = threading.Lock()


def pooled_client(settings: Settings) -> httpx.Client:
    """The process-wide pooled client for this endpoint (one per base URL and timeouts)."""
    key = (settings.base_url, settings.connect_timeout, settings.read_timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client.is_closed:
            timeout = httpx.Timeout(
                settings.read_timeout,
                connect=settings.connect_timeout,
                pool=settings.connect_timeout,
            )
            client = httpx.Client(timeout=timeout, follow_redirects=True, trust_env=False)
            _clients[key] = client
        return client


def headers_for(settings: Settings) -> dict[str, str]:
    """Request headers; the key goes only into the Authorization header."""
    headers = {"Accept": "application/json, text/event-stream"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    return headers


def send(
    settings: Settings,
    request: httpx.Request,
    *,
    detail: Callable[[bytes], str],
    model: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> httpx.Response:
    """Send ``request`` (streamed) and return a 2xx response, retrying what may be retried.

    The caller must close the response. Non-retryable statuses and exhausted
    retries become :class:`~nbchat.LLMError` subclasses.
    """
    client = pooled_client(settings)
    url = settings.base_url
    deadline = time.monotonic() + settings.retry_budget
    attempt = 0
    while True:
        attempt += 1
        try:
            response = client.send(request, stream=True)
        except httpx.ConnectError as exc:
            error: LLMError = LLMConnectError(
                f"cannot connect to the model endpoint at {url} ({_reason(exc)}); "
                f"check that it is running, or set NBCHAT_BASE_URL",
                url=url,
            )
            delay = _backoff(attempt)
        except httpx.TimeoutException as exc:
            raise LLMTimeout(
                f"the model endpoint at {url} did not answer in time ({type(exc).__name__}); "
                f"try again, or raise the timeout",
                url=url,
            ) from exc
        except httpx.HTTPError as exc:
            raise LLMConnectError(
                f"talking to the model endpoint at {url} failed: {_reason(exc)}", url=url
            ) from exc
        else:
            if response.status_code < 400:
                return response
            body = response.read()
            response.close()
            error = _status_error(settings, response, detail(body), model)
            if not _retryable(response.status_code):
                raise error
            delay = _retry_after(response) or _backoff(attempt)
        remaining = deadline - time.monotonic()
        if attempt > settings.max_retries or delay > remaining:
            raise error
        sleep(delay)


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _status_error(
    settings: Settings, response: httpx.Response, detail: str, model: str | None
) -> LLMError:
    url, status = settings.base_url, response.status_code
    if status in (401, 403):
        if settings.api_key:
            what = f"refused the API key from {settings.key_source}"
        else:
            what = f"needs an API key and none is set; set {settings.key_source}"
        return AuthenticationError(
            f"the model endpoint at {url} {what} (HTTP {status}); "
            f"check the key with your provider, e.g. %env {settings.key_source}=...",
            url=url,
        )
    if status == 404 and model is not None and "model" in detail.lower():
        return ModelNotFound(f"model {model!r} not found at {url}", url=url, model=model)
    if status == 429:
        after = _retry_after(response)
        wait = f"; it asked to wait {after:g} s" if after is not None else ""
        return RateLimited(
            f"the model endpoint at {url} is rate limiting requests{wait}; "
            f"wait a moment and ask again ({detail})",
            url=url,
            retry_after=after,
        )
    return ServerError(
        f"the model endpoint at {url} answered HTTP {status}: {detail or response.reason_phrase}",
        url=url,
        status=status,
    )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _backoff(attempt: int) -> float:
    return min(8.0, 0.25 * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)


def _reason(exc: Exception) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
