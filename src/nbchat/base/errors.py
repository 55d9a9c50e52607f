"""Every error nbchat raises, in one tree.

::

    NbchatError
    ├── ConfigError                    a setting is missing or malformed
    │   ├── ModelNotAllowed            the administrator's policy excludes that model
    │   ├── EndpointMismatch           a model or thread belongs to another provider
    │   └── KeyStoreError              a kept API key cannot be read or written where it is kept
    ├── InputError (ValueError)        bad argument: wrong type, empty title, unknown role
    ├── LLMError                       talking to the model endpoint failed
    │   ├── LLMConnectError            nothing answers at the URL
    │   ├── LLMTimeout                 the endpoint stopped answering
    │   ├── AuthenticationError        key missing or refused
    │   ├── ModelNotFound (LookupError)
    │   ├── RateLimited                429; ``.retry_after`` in seconds
    │   ├── ServerError                5xx or another unexpected status
    │   │   ├── OptionRejected (ValueError)  the endpoint refused a generation option
    │   │   └── ContextOverflow        the request does not fit the model's context
    │   ├── MalformedStream            the stream is not the protocol
    │   └── StreamCutOff               the stream ended before its end marker
    │       └── EmptyAnswer            the endpoint accepted the request, then sent nothing
    ├── StoreError                     the thread store
    │   ├── ThreadNotFound (LookupError)
    │   ├── StoreCorrupt               a file is not a store we wrote; never overwritten
    │   ├── StoreVersionError          written by a newer nbchat
    │   ├── StoreLocked                another process held the lock too long
    │   ├── StoreUnsafe                a store folder or file someone else owns or may write
    │   └── StoreUnavailable (ConnectionError)  the database server is unreachable
    ├── ToolError                      tools the LLM calls
    │   ├── ToolDefinitionError        a function cannot become a tool
    │   ├── InvalidToolArguments       what the LLM sent breaks the schema (told to the LLM)
    │   ├── InvalidToolAnswer          the person's answer is not acceptable (told to the person)
    │   │   └── StaleProposal          the cell changed since the proposal: shown again, rebased
    │   ├── ToolRequirementsNotMet     the caller may not make or answer this call
    │   ├── NoPendingCall (LookupError)
    │   │   └── AlreadyAnswered        another answer to the call won the race
    │   └── McpServerError             an MCP server did not start, died or did not answer
    ├── AgentRefused (PermissionError)  an outside agent's request is refused; ``.status``
    ├── AgentError                     a coding agent hosted in the chat: not installed, refused
    │   └── AgentGone                  its process ended while a request of it waited
    ├── OverBudget                     a question's estimated cost would cross a budget
    └── TurnInterrupted                the user stopped a turn; the partial answer is kept

Messages say what was wrong, naming the thing, then what to do. Structured
attributes are keyword-only so that errors pickle across processes. No message,
attribute or repr ever holds an API key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class NbchatError(Exception):
    """Base of every error nbchat raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only attributes survive pickling (multiprocessing, kernels).
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[NbchatError], args: tuple[Any, ...], state: dict[str, Any]) -> NbchatError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class ConfigError(NbchatError):
    """A setting is missing or malformed."""


class EndpointMismatch(ConfigError):
    """A model or a thread belongs to another provider than the one the session talks to."""

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider


class ModelNotAllowed(ConfigError):
    """The administrator's policy (``NBCHAT_ALLOWED_MODELS``) does not allow that model."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        super().__init__(message)
        self.model = model


class KeyStoreError(ConfigError):
    """An endpoint's API key cannot be read or kept: the system keyring refused, or the keys file.

    ``.name`` is the endpoint's name; ``.reason`` one word: ``locked`` (the
    keyring is locked), ``refused``, ``missing`` (no keyring works here),
    ``broken`` (the keyring failed), ``damaged`` (the keys file is not one
    nbchat wrote), ``busy`` (another process held the file's lock) or
    ``unusable`` (a name, a key or a setting is not one nbchat can keep).
    Never the key.
    """

    def __init__(self, message: str, *, name: str | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.name = name
        self.reason = reason


class InputError(NbchatError, ValueError):
    """An argument is of the wrong type or out of range."""


class LLMError(NbchatError):
    """Talking to the model endpoint failed."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class LLMConnectError(LLMError):
    """Nothing answers at the endpoint's URL."""


class LLMTimeout(LLMError):
    """The endpoint accepted the request but stopped answering."""


class AuthenticationError(LLMError):
    """The API key is missing or the endpoint refused it."""


class ModelNotFound(LLMError, LookupError):
    """The endpoint does not offer the requested model."""

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        model: str | None = None,
        available: Sequence[str] = (),
    ) -> None:
        super().__init__(message, url=url)
        self.model = model
        self.available = list(available)


class RateLimited(LLMError):
    """The endpoint answered 429 Too Many Requests after every retry."""

    def __init__(self, message: str, *, url: str | None = None, retry_after: float | None = None):
        super().__init__(message, url=url)
        self.retry_after = retry_after


class ServerError(LLMError):
    """The endpoint answered with an unexpected HTTP status."""

    def __init__(self, message: str, *, url: str | None = None, status: int | None = None):
        super().__init__(message, url=url)
        self.status = status


class OptionRejected(ServerError, ValueError):
    """The endpoint refused the request because of one generation option (``.option``)."""

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        status: int | None = None,
        option: str = "",
    ) -> None:
        super().__init__(message, url=url, status=status)
        self.option = option


class ContextOverflow(ServerError):
    """The request is longer than the model's context.

    ``.context_size`` and ``.prompt_tokens`` (what the request took) are set
    when the endpoint said them.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        status: int | None = None,
        context_size: int | None = None,
        prompt_tokens: int | None = None,
    ) -> None:
        super().__init__(message, url=url, status=status)
        self.context_size = context_size
        self.prompt_tokens = prompt_tokens


class MalformedStream(LLMError):
    """The endpoint sent something that is not the protocol."""


class StreamCutOff(LLMError):
    """The stream ended before the endpoint said it was done: the answer is incomplete."""


class EmptyAnswer(StreamCutOff):
    """The endpoint accepted the request and then closed the answer without a byte."""


class StoreError(NbchatError):
    """The thread store cannot do what was asked."""


class ThreadNotFound(StoreError, LookupError):
    """No thread with that id for this user (another user's thread is 'not found' too)."""

    def __init__(self, message: str, *, thread_id: object = None, user: str | None = None):
        super().__init__(message)
        self.thread_id = thread_id
        self.user = user


class StoreCorrupt(StoreError):
    """A store file cannot be read as a store nbchat wrote; it is left untouched."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreVersionError(StoreError):
    """The store was written by a newer nbchat."""


class StoreLocked(StoreError):
    """Another process held the store's lock for too long."""


class StoreUnsafe(StoreError):
    """A store folder or file is owned by someone else, or others may write it; it is not used.

    Threads someone else planted there would pass for the user's own, so
    nbchat refuses it, as ssh refuses a ``~/.ssh`` that others can write.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class StoreUnavailable(StoreError, ConnectionError):
    """The store's database server cannot be reached, or dropped the connection.

    What the call would have written may or may not have been saved; the next
    call opens a fresh connection.
    """


class ToolError(NbchatError):
    """A tool the LLM may call went wrong."""


class ToolDefinitionError(ToolError, TypeError):
    """A Python function or ClientTool cannot be offered to the LLM as it is."""


class InvalidToolArguments(ToolError):
    """The LLM's arguments break the tool's schema; the message goes back to the LLM."""


class InvalidToolAnswer(ToolError):
    """The person's answer is not acceptable; the call stays pending."""


class StaleProposal(InvalidToolAnswer):
    """The cell a proposal would change is no longer the text it was made on.

    Nothing was changed; the proposal is shown again on the cell's new text
    (``prompt``, the call's new prompt), to be answered again.
    """

    def __init__(self, message: str, *, prompt: dict | None = None) -> None:
        super().__init__(message)
        self.prompt = prompt


class ToolRequirementsNotMet(ToolError):
    """The current user may not make, or answer, this tool call."""


class NoPendingCall(ToolError, LookupError):
    """There is no pending client-tool call with that id."""


class AlreadyAnswered(NoPendingCall):
    """Another answer to the same call was recorded first; this one changed nothing."""

    def __init__(
        self, message: str, *, thread_id: int | None = None, call_id: str | None = None,
        answer: str = "",
    ) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.call_id = call_id
        self.answer = answer  # the answer that was recorded, in words ("" if unknown)


class OverBudget(NbchatError):
    """A question's estimated cost would cross a budget; nothing was saved or sent.

    ``hard`` is true for the administrator's hard cap, which no yes lifts;
    otherwise asking again with ``over_budget=True`` (``--over-budget``) sends it.
    """

    def __init__(
        self,
        message: str,
        *,
        scope: str = "thread",
        budget: float | None = None,
        spent: float = 0.0,
        estimate: float | None = None,
        hard: bool = False,
    ) -> None:
        super().__init__(message)
        self.scope = scope
        self.budget = budget
        self.spent = spent
        self.estimate = estimate
        self.hard = hard


class TurnInterrupted(NbchatError):
    """The user interrupted the turn; the partial answer is kept in the thread."""

    def __init__(self, message: str, *, thread_id: int | None = None, partial: str = "") -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.partial = partial


class McpServerError(ToolError):
    """An MCP server did not start, died or did not answer; ``.server`` names it."""

    def __init__(self, message: str, *, server: str = "", log: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.log = log


class AgentError(NbchatError):
    """A coding agent hosted in the chat (ACP) is not installed, refused, or failed."""


class AgentGone(AgentError):
    """The agent whose request waited has ended; the request was answered as cancelled."""


class AgentRefused(NbchatError, PermissionError):
    """An outside agent's request to nbchat's MCP endpoint is refused.

    ``.status`` is the HTTP status it gets (401 no or unknown token, 403 not
    allowed, 404 no such notebook or call); the message says why and what to do.
    """

    def __init__(self, message: str, *, status: int = 403) -> None:
        super().__init__(message)
        self.status = status
