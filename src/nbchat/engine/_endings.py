"""How a model reply ended, what fits in the request, and tool calls safe to send back.

Pure decisions the turn engine makes between requests, kept apart so each is
tested on its own: whether a reply is complete or was cut (``finish_reason``),
how many tokens the thread's window may take, and what a malformed tool call
becomes when it goes back to the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..base.events import ToolCall
from .history import ChatHistory, estimate_tokens, history_tokens, sent_tokens

Ending = Literal["complete", "length", "incomplete", "refused"]
COMPLETE_REASONS = frozenset({"stop", "tool_calls", "function_call", "end_turn", "eos"})
REFUSALS = frozenset({"refusal", "content_filter"})  # Anthropic's; OpenAI's and Gemini's filter
BUDGET_REASON = "budget"  # the finish reason kept for a turn a budget stopped or suspended
ANSWER_RESERVE = 1024  # tokens kept free for the answer when max_tokens is not set
SAFETY = 0.9  # the token estimate is rough: use 90% of what is left


def ending_of(finish_reason: str | None) -> Ending:
    """``length`` when the token limit cut the reply, ``refused`` when the model or the
    endpoint's filter declined to go on, ``incomplete`` when the endpoint never said it
    finished (``[DONE]`` without a finish reason), else ``complete``."""
    if finish_reason == "length":
        return "length"
    if finish_reason in REFUSALS:
        return "refused"
    if finish_reason is None:
        return "incomplete"
    return "complete"


def cut_note(ending: Ending, options: Mapping[str, Any]) -> str:
    """The line shown under an answer that did not end on its own ("" when it did)."""
    if ending == "length":
        limit = options.get("max_tokens")
        where = f"the {limit}-token limit" if limit else "the model's token limit"
        return f"stopped at {where} — `%chat --continue` to go on"
    if ending == "refused":
        return "the model declined to answer this (refusal); rephrase the question or ask another"
    if ending == "incomplete":
        return "the answer ended before the model said it was done — `%chat --continue` to go on"
    return ""


def prompt_budget(
    context_size: int,
    options: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Tokens the messages may take in a request to a model with ``context_size``.

    What is left after the answer's room (``max_tokens``, else a quarter of the
    context up to 1,024) and the tool schemas, with a margin for the estimate.
    """
    limit = options.get("max_tokens")
    reserve = limit if isinstance(limit, int) else min(ANSWER_RESERVE, context_size // 4)
    return max(0, int((context_size - reserve - _schema_tokens(tools)) * SAFETY))


@dataclass(frozen=True)
class SentCall:
    """A tool call as it goes back to the endpoint, and why it was changed."""

    call: ToolCall
    error: str | None = None  # set when the raw arguments were not a JSON object


def sendable_call(call: ToolCall) -> SentCall:
    """``call`` with arguments an endpoint accepts in a later request.

    Servers reject a history holding a call whose arguments are not a JSON
    object (llama-server answers HTTP 500 to every retry), so such a call goes
    back with ``{}``; the error says what was wrong and becomes the tool's result.
    """
    try:
        parsed = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        problem = f"not valid JSON ({exc.msg} at character {exc.pos})"
    else:
        if isinstance(parsed, dict):
            return SentCall(call)
        problem = f"a JSON {type(parsed).__name__}, not an object"
    raw = call.arguments if len(call.arguments) <= 200 else call.arguments[:197] + "..."
    error = (
        f"error: the arguments of this {call.name} call were {problem}: {raw!r}; "
        f"call it again with a JSON object that fits its parameters"
    )
    return SentCall(ToolCall(call.id, call.name, "{}"), error)


@dataclass(frozen=True)
class Fitted:
    """The history one request sends, and how many earlier turns it leaves out."""

    history: ChatHistory
    dropped_turns: int = 0
    context_size: int | None = None


def fit_history(
    history: ChatHistory,
    context_size: int | None,
    options: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    scale: float = 1.0,
) -> Fitted:
    """``history`` (system prompt, earlier turns, the question) cut to the context's window.

    ``scale`` is the model's tokens per estimated token (see ``LLMClient.token_scale``).
    """
    if not context_size:
        return Fitted(history)
    window = history.window(int(prompt_budget(context_size, options, tools) / scale))
    return Fitted(window.history, window.dropped_turns, context_size)


def request_tokens(
    history: ChatHistory, tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """The estimated prompt of a request: its history and its tool schemas."""
    return history_tokens(history) + _schema_tokens(tools)


def wire_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """:func:`request_tokens` of a request as sent: its message dicts and its tool schemas."""
    return sent_tokens(messages) + _schema_tokens(tools)


def _schema_tokens(tools: Sequence[Mapping[str, Any]] | None) -> int:
    return estimate_tokens(json.dumps(list(tools))) if tools else 0


def refit_history(
    history: ChatHistory,
    sent: ChatHistory,
    context_size: int | None,
    options: Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    prompt_tokens: int | None = None,
    scale: float = 1.0,
) -> Fitted | None:
    """A smaller window after the endpoint refused ``sent`` as too long; None if none is smaller.

    Within the context the endpoint named; when it also said what ``sent`` took
    (``prompt_tokens``), the estimate is scaled by its count, else halved.
    """
    estimated = history_tokens(sent)
    budget = estimated // 2
    if context_size:
        fits = prompt_budget(context_size, options, tools)
        if prompt_tokens and prompt_tokens > fits:
            budget = fits * estimated // prompt_tokens
        else:
            budget = min(budget, int(fits / scale))
    window = history.window(budget)
    if len(window.history) >= len(sent):
        return None
    return Fitted(window.history, window.dropped_turns, context_size)
