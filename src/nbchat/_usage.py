"""What a turn cost: tokens in and out, time, and a price estimate when prices are known.

Prices are US dollars per million tokens (the way providers publish them), per
model, from ``NBCHAT_PRICES`` or ``%config ChatMagics.prices``: a JSON object
such as ``{"gpt-4o-mini": [0.15, 0.60]}`` or
``{"gpt-4o-mini": {"input": 0.15, "output": 0.60}}``. Endpoints that report
no usage get no usage line at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .config import ENV_PRICES
from .errors import ConfigError
from .store import Turn

__all__ = [
    "Price", "dollars", "parse_prices", "prices_from_env", "thread_cost", "thread_usage_line",
    "turn_usage_line",
]

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens."""

    input: float
    output: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / PER_TOKENS


def parse_prices(value: object, *, source: str = ENV_PRICES) -> dict[str, Price]:
    """Prices by model from a mapping or its JSON text; ConfigError naming ``source`` if wrong."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigError(f"{source} is not valid JSON ({exc}); {_EXAMPLE}") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source} must map model names to prices; {_EXAMPLE}")
    return {str(model): _price(model, entry, source) for model, entry in value.items()}


def prices_from_env() -> dict[str, Price]:
    """The prices in ``NBCHAT_PRICES`` (none when it is unset)."""
    return parse_prices(os.environ.get(ENV_PRICES, ""))


_EXAMPLE = 'e.g. {"gpt-4o-mini": [0.15, 0.6]} (dollars per million input and output tokens)'


def _price(model: object, entry: object, source: str) -> Price:
    if isinstance(entry, Price):
        return entry
    if isinstance(entry, Mapping):
        entry = [entry.get("input"), entry.get("output")]
    numbers = list(entry) if isinstance(entry, (list, tuple)) else []
    if len(numbers) != 2 or not all(
        isinstance(n, (int, float)) and not isinstance(n, bool) and n >= 0 for n in numbers
    ):
        raise ConfigError(
            f"{source}: the price of {model!r} must be two numbers, input and output; {_EXAMPLE}"
        )
    return Price(float(numbers[0]), float(numbers[1]))


@dataclass(frozen=True)
class _Counts:
    prompt: int
    completion: int
    cost: float | None


def _counts(turn: Turn, prices: Mapping[str, Price]) -> _Counts | None:
    usage = turn.usage or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    prompt = prompt if isinstance(prompt, int) else 0
    completion = completion if isinstance(completion, int) else 0
    price = prices.get(turn.model or "")
    return _Counts(prompt, completion, None if price is None else price.cost(prompt, completion))


def turn_usage_line(turn: Turn, prices: Mapping[str, Price] | None = None) -> str:
    """``model · 12 in · 34 out · 1.2 s · ≈ $0.0001``, or "" when the endpoint reported no usage."""
    counts = _counts(turn, prices or {})
    if counts is None:
        return ""
    parts = [turn.model] if turn.model else []
    parts += [f"{counts.prompt:,} in", f"{counts.completion:,} out"]
    if turn.finished and turn.started and turn.finished >= turn.started:
        parts.append(f"{turn.finished - turn.started:.1f} s")
    if counts.cost is not None:
        parts.append(f"≈ {_dollars(counts.cost)}")
    return " · ".join(parts)


def thread_usage_line(turns: Iterable[Turn], prices: Mapping[str, Price] | None = None) -> str:
    """Totals over a thread's turns, or "" when no turn has usage."""
    counted = [c for c in (_counts(turn, prices or {}) for turn in turns) if c is not None]
    if not counted:
        return ""
    prompt = sum(c.prompt for c in counted)
    completion = sum(c.completion for c in counted)
    answers = f"{len(counted)} answer{'s' if len(counted) != 1 else ''}"
    line = f"{answers} · {prompt:,} in · {completion:,} out"
    costs = [c.cost for c in counted if c.cost is not None]
    if costs:
        partial = "" if len(costs) == len(counted) else " (priced models only)"
        line += f" · ≈ {_dollars(sum(costs))}{partial}"
    return line


def thread_cost(turns: Iterable[Turn], prices: Mapping[str, Price] | None = None) -> float | None:
    """What the priced turns cost together, or None when no turn has a price and usage."""
    costs = [c.cost for c in (_counts(turn, prices or {}) for turn in turns)
             if c is not None and c.cost is not None]
    return sum(costs) if costs else None


def dollars(amount: float) -> str:
    """``$0.0012`` under a cent, ``$1.23`` above."""
    return _dollars(amount)


def _dollars(amount: float) -> str:
    if amount == 0:
        return "$0"
    if amount < 0.01:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"
