"""Budgets: a question whose estimated cost would cross one asks first; nothing is sent before.

A person's budget is in dollars per thread (``NBCHAT_BUDGET``,
``ChatMagics.budget``, ``Chat(budget=…)``) and per kernel
(``NBCHAT_KERNEL_BUDGET``, ``ChatMagics.kernel_budget``); the administrator's
caps (:func:`nbchat.base.policy.budget_cap`) bound both and cannot be raised
from the notebook. A question's estimate is its preview's prompt plus an
answer of ``max_tokens`` (:data:`ANSWER_GUESS` tokens when that is unset), at
the model's price; a thread has spent what its turns' usage cost, a kernel
what the turns it ran cost (in memory: a restart starts again at 0).

Crossing a budget raises :class:`~nbchat.base.errors.OverBudget` before the
question is saved; asking again with ``over_budget=True`` (``--over-budget``)
is the yes. The administrator's hard cap (``NBCHAT_HARD_BUDGET``) takes no
yes, and refuses a model without a price, whose cost is unknown.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..base.config import ENV_BUDGET, ENV_KERNEL_BUDGET, ENV_PRICES
from ..base.errors import ConfigError, OverBudget
from ..base.events import Usage
from ..base.policy import ENV_MAX_BUDGET, ENV_MAX_KERNEL_BUDGET, BudgetCap
from ..store.base import Turn
from ._usage import Price, dollars, thread_cost

ANSWER_GUESS = 1024  # the answer's tokens in an estimate when max_tokens is not set


@dataclass(frozen=True)
class Budget:
    """A person's budget in dollars: per thread and per kernel (None: no limit)."""

    thread: float | None = None
    kernel: float | None = None

    @classmethod
    def resolve(cls, thread: float | None = None, kernel: float | None = None) -> Budget:
        """The budgets given, else ``NBCHAT_BUDGET`` and ``NBCHAT_KERNEL_BUDGET``."""
        return cls(
            _checked(thread, "budget") if thread is not None else _env(ENV_BUDGET),
            _checked(kernel, "kernel_budget") if kernel is not None else _env(ENV_KERNEL_BUDGET),
        )


def _env(name: str) -> float | None:
    value = os.environ.get(name, "").strip().lstrip("$")
    if not value:
        return None
    try:
        return _checked(float(value), name)
    except ValueError:
        raise ConfigError(f"{name} must be dollars, like 0.50; got {value!r}") from None


def _checked(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(f"{name} must be dollars of 0 or more, like 0.50; got {value!r}")
    return float(value)


class Ledger:
    """What this process (the kernel) has spent on turns, in dollars."""

    def __init__(self) -> None:
        self._spent = 0.0
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        return self._spent

    def add(self, amount: float) -> None:
        with self._lock:
            self._spent += amount


KERNEL = Ledger()


def usage_cost(usage: Usage | None, price: Price | None) -> float:
    """What ``usage`` cost at ``price`` (0 without either)."""
    if usage is None or price is None:
        return 0.0
    return price.cost(usage.prompt_tokens or 0, usage.completion_tokens or 0,
                      usage.cache_read_tokens or 0, usage.cache_write_tokens or 0)  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """A question's estimated cost (None: the model has no price) and what it counts."""

    cost: float | None
    prompt_tokens: int
    answer_tokens: int
    model: str


def estimate(prompt_tokens: int, options: Mapping[str, object], model: str,
             price: Price | None) -> Estimate:  # fmt: skip
    """The cost of a request of ``prompt_tokens`` and an answer as long as it may be."""
    limit = options.get("max_tokens")
    answer = limit if isinstance(limit, int) and not isinstance(limit, bool) else ANSWER_GUESS
    cost = None if price is None else price.cost(prompt_tokens, answer)
    return Estimate(cost, prompt_tokens, answer, model)


def check_budget(
    guess: Estimate,
    cap_guess: Estimate,
    turns: Iterable[Turn],
    prices: tuple[Mapping[str, Price], Mapping[str, Price]],
    budget: Budget,
    cap: BudgetCap,
    *,
    confirmed: bool = False,
    thread_id: int | None = None,
) -> None:
    """Raise OverBudget when the question would cross a budget (or a cap) without a yes.

    ``guess`` is at the person's prices, ``cap_guess`` at the dearest known
    (:func:`~._usage.dearest_prices`), and ``prices`` the two price lists the
    thread's spending is counted at.
    """
    turns = list(turns)
    spent = {
        "thread": (thread_cost(turns, prices[0]) or 0.0, thread_cost(turns, prices[1]) or 0.0),
        "kernel": (KERNEL.spent, KERNEL.spent),
    }
    for scope in ("thread", "kernel"):
        limit, ceiling = getattr(budget, scope), getattr(cap, scope)
        mine, theirs = spent[scope]
        if ceiling is not None:
            _check_cap(cap_guess, theirs, ceiling, cap.hard, scope, confirmed, thread_id)
        crossed = limit is not None and guess.cost is not None and mine + guess.cost > limit
        if crossed and not confirmed:
            assert limit is not None
            raise _over(guess, mine, limit, scope, thread_id, hard=False, admin=False)


def _check_cap(guess: Estimate, spent: float, ceiling: float, hard: bool, scope: str,
               confirmed: bool, thread_id: int | None) -> None:  # fmt: skip
    if guess.cost is None:
        if hard:
            raise OverBudget(
                f"the administrator caps what a {scope} may cost ({_cap_name(scope)}, a hard "
                f"limit here), and {guess.model} has no price, so its cost is unknown; nothing "
                f"was sent. Ask the administrator to price it in {ENV_PRICES}",
                scope=scope, budget=ceiling, spent=spent, hard=True,
            )  # fmt: skip
        return
    if spent + guess.cost > ceiling and (hard or not confirmed):
        raise _over(guess, spent, ceiling, scope, thread_id, hard=hard, admin=True)


def _cap_name(scope: str) -> str:
    return ENV_MAX_BUDGET if scope == "thread" else ENV_MAX_KERNEL_BUDGET


def _over(guess: Estimate, spent: float, limit: float, scope: str, thread_id: int | None, *,
          hard: bool, admin: bool) -> OverBudget:  # fmt: skip
    cost = guess.cost or 0.0
    where = f"thread {thread_id}" if scope == "thread" and thread_id else f"this {scope}"
    whose = f"the administrator's cap ({_cap_name(scope)})" if admin else (
        "your budget (ChatMagics.budget / NBCHAT_BUDGET)" if scope == "thread"
        else "your budget (ChatMagics.kernel_budget / NBCHAT_KERNEL_BUDGET)")  # fmt: skip
    fix = ("it is a hard limit here; ask the administrator to raise it" if hard else
           "to send it anyway, ask again with --over-budget (over_budget=True in Python)")
    return OverBudget(
        f"this question would cost ≈ {dollars(cost)} (~{guess.prompt_tokens:,} tokens in, up to "
        f"{guess.answer_tokens:,} out, at {guess.model}'s price); with {dollars(spent)} spent in "
        f"{where} that crosses {whose} of {dollars(limit)}; nothing was sent: {fix}",
        scope=scope, budget=limit, spent=spent, estimate=cost, hard=hard,
    )  # fmt: skip
