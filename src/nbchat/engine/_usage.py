"""What a turn cost: tokens in and out, time, and a price estimate when prices are known.

Prices are US dollars per million tokens (the way providers publish them), per
model, from ``NBCHAT_PRICES`` or ``%config ChatMagics.prices``: a JSON object
such as ``{"gpt-4o-mini": [0.15, 0.60]}`` or
``{"gpt-4o-mini": {"input": 0.15, "output": 0.60}}``; the object form may add
``cache_read`` and ``cache_write`` (``{"claude-sonnet-4-5": {"input": 3, "output": 15,
"cache_read": 0.3, "cache_write": 3.75}}``), the prices of prompt tokens read
from and written to the endpoint's prompt cache; without them those tokens cost
the input price. Endpoints that report no usage get no usage line at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..base.config import ENV_PRICES
from ..base.errors import ConfigError
from ..base.records import Usage
from ..store.base import Turn

__all__ = [
    "Price", "dearest_prices", "dollars", "parse_prices", "prices_from_env", "thread_cost",
    "thread_usage_line", "turn_usage_line",
]

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens.

    ``cache_read`` and ``cache_write`` price the prompt tokens read from and
    written to a prompt cache; None means the input price.
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(
        self, prompt_tokens: int, completion_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> float:
        """Dollars for these counts; the cached tokens are part of ``prompt_tokens``."""
        fresh = max(0, prompt_tokens - cache_read - cache_write)
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        total = fresh * self.input + cache_read * read + cache_write * write
        return (total + completion_tokens * self.output) / PER_TOKENS


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


_PRICES_AT_IMPORT = os.environ.get(ENV_PRICES, "")


def dearest_prices(*lists: Mapping[str, Price]) -> dict[str, Price]:
    """Per model, the dearest of the prices ``NBCHAT_PRICES`` gave when nbchat was imported,
    gives now, and ``lists`` give: what an administrator's cap counts, so no cheaper price
    set from the notebook lowers what a question is counted to cost."""
    found: dict[str, Price] = {}
    for prices in (parse_prices(_PRICES_AT_IMPORT), prices_from_env(), *lists):
        for model, price in prices.items():
            if model not in found or price.input + price.output > (
                    found[model].input + found[model].output):  # fmt: skip
                found[model] = price
    return found


_EXAMPLE = (
    'e.g. {"gpt-4o-mini": [0.15, 0.6]} (dollars per million input and output tokens) or '
    '{"claude-sonnet-4-5": {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}'
)
_CACHE_PRICES = ("cache_read", "cache_write")


def _price(model: object, entry: object, source: str) -> Price:
    if isinstance(entry, Price):
        return entry
    cached: list[object] = []
    if isinstance(entry, Mapping):
        unknown = sorted(set(map(str, entry)) - {"input", "output", *_CACHE_PRICES})
        if unknown:
            raise ConfigError(f"{source}: the price of {model!r} has unknown keys {unknown}; "
                              f"{_EXAMPLE}")  # fmt: skip
        cached = [entry.get(name) for name in _CACHE_PRICES]
        entry = [entry.get("input"), entry.get("output")]
    numbers = list(entry) if isinstance(entry, (list, tuple)) else []
    if len(numbers) != 2 or not all(map(_is_price, numbers)):
        raise ConfigError(
            f"{source}: the price of {model!r} must be two numbers, input and output; {_EXAMPLE}"
        )
    if not all(n is None or _is_price(n) for n in cached):
        raise ConfigError(
            f"{source}: the cache prices of {model!r} must be numbers of 0 or more; {_EXAMPLE}"
        )
    read, write = (_number(n) for n in cached or (None, None))
    return Price(float(numbers[0]), float(numbers[1]), read, write)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _is_price(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class _Counts:
    prompt: int
    completion: int
    cost: float | None
    cache_read: int = 0
    cache_write: int = 0


def _counts(turn: Turn, prices: Mapping[str, Price]) -> _Counts | None:
    """A stored turn's counts, checked as :class:`Usage` checks them; None when none is known."""
    usage = Usage.from_dict(turn.usage)
    if usage.prompt_tokens is None and usage.completion_tokens is None:
        return None
    prompt, completion = usage.prompt_tokens or 0, usage.completion_tokens or 0
    read, write = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    price = prices.get(turn.model or "")
    cost = None if price is None else price.cost(prompt, completion, read, write)
    return _Counts(prompt, completion, cost, read, write)


def _inputs(prompt: int, read: int, write: int) -> str:
    """``1,200 in``, with the cached parts when there are any: ``(1,000 from cache)``."""
    cached = [f"{read:,} from cache"] if read else []
    cached += [f"{write:,} to cache"] if write else []
    return f"{prompt:,} in" + (f" ({', '.join(cached)})" if cached else "")


def turn_usage_line(
    turn: Turn, prices: Mapping[str, Price] | None = None, *, named: bool = True
) -> str:
    """``model · 12 in · 34 out · 1.2 s · ≈ $0.12``, or "" when the endpoint reported no usage.

    ``named=False`` leaves the model out, for a view that names it already.
    Under a tenth of a second no time is shown; under a cent, ``< $0.01``.
    """
    counts = _counts(turn, prices or {})
    if counts is None:
        return ""
    parts = [turn.model] if turn.model and named else []
    parts += [_inputs(counts.prompt, counts.cache_read, counts.cache_write),
              f"{counts.completion:,} out"]  # fmt: skip
    if turn.finished and turn.started and turn.finished - turn.started >= 0.1:
        parts.append(f"{turn.finished - turn.started:.1f} s")
    if counts.cost is not None:
        parts.append(_about(counts.cost))
    return " · ".join(parts)


def thread_usage_line(turns: Iterable[Turn], prices: Mapping[str, Price] | None = None) -> str:
    """Totals over a thread's turns, or "" when no turn has usage."""
    counted = [c for c in (_counts(turn, prices or {}) for turn in turns) if c is not None]
    if not counted:
        return ""
    prompt = sum(c.prompt for c in counted)
    completion = sum(c.completion for c in counted)
    read, write = sum(c.cache_read for c in counted), sum(c.cache_write for c in counted)
    answers = f"{len(counted)} answer{'s' if len(counted) != 1 else ''}"
    line = f"{answers} · {_inputs(prompt, read, write)} · {completion:,} out"
    costs = [c.cost for c in counted if c.cost is not None]
    if costs:
        partial = "" if len(costs) == len(counted) else " (priced models only)"
        line += f" · {_about(sum(costs))}{partial}"
    return line


def thread_cost(turns: Iterable[Turn], prices: Mapping[str, Price] | None = None) -> float | None:
    """What the priced turns cost together, or None when no turn has a price and usage."""
    costs = [c.cost for c in (_counts(turn, prices or {}) for turn in turns)
             if c is not None and c.cost is not None]
    return sum(costs) if costs else None


def dollars(amount: float) -> str:
    """``$0.0012`` under a cent, ``$1.23`` above."""
    return _dollars(amount)


def _about(amount: float) -> str:
    """A usage line's cost: ``≈ $1.23``, or ``< $0.01`` where four decimals would be noise."""
    return "< $0.01" if 0 < amount < 0.01 else f"≈ {_dollars(amount)}"


def _dollars(amount: float) -> str:
    if amount == 0:
        return "$0"
    if amount < 0.01:
        return f"${amount:.4f}"
    return f"${amount:,.2f}"
