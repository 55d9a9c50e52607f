"""Budgets: every request a question sends is checked against what is left before it goes.

A person's budget is in dollars per thread (``NBCHAT_BUDGET``,
``ChatMagics.budget``, ``Chat(budget=…)``) and per kernel
(``NBCHAT_KERNEL_BUDGET``, ``ChatMagics.kernel_budget``); the administrator's
caps (:func:`nbchat.base.policy.budget_cap`) bound both and cannot be raised
from the notebook. A question's requests are its answer's rounds (one per
tool result sent back), a retry, the summary a long thread sends
(:mod:`._compaction`) and a new thread's title. Each request is estimated as
its prompt plus an answer of ``max_tokens`` (:data:`ANSWER_GUESS` tokens when
that is unset), at the model's price; what was spent is what the thread's
turns, this question's requests so far and the kernel's (its
:mod:`._kernel_spending` ledger) actually cost, per their usage.

The first request of a question over a budget raises
:class:`~nbchat.base.errors.OverBudget` before the question is saved; asking
again with ``over_budget=True`` (``--over-budget``) is the yes. A later request
over a budget suspends the turn on a pending call of :data:`GO_ON`, which asks
the person (see :func:`budget_call`). A yes covers the request it was shown:
the limits it crossed rise, for this question, to what was spent then plus that
estimate. The administrator's hard cap (``NBCHAT_HARD_BUDGET``) takes no yes:
the turn stops there, saved, and refuses a model without a price, whose cost
is unknown. With ``max_tokens`` unset and less than :data:`BOUND_CEILING`
tokens of answer left under a limit, the request carries ``max_tokens`` bounded
by what is left, so that it cannot cross the limit on its own.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..base.config import ENV_BUDGET, ENV_KERNEL_BUDGET, ENV_PRICES
from ..base.errors import ConfigError, OverBudget
from ..base.events import Usage
from ..base.policy import ENV_MAX_BUDGET, ENV_MAX_KERNEL_BUDGET, BudgetCap
from ..base.records import BUDGET_CALL_ID, BUDGET_TOOL, PendingCall, Prompt
from ..store.base import Turn
from ..tools import Confirm
from ._kernel_spending import Ledger
from ._usage import Price, dollars, thread_cost

ANSWER_GUESS = 1024  # the answer's tokens in an estimate when max_tokens is not set
# With max_tokens unset, a request carries the bound only below this: every chat model
# accepts it as max_tokens (a bigger one some refuse), and an answer that long is rare.
BOUND_CEILING = 4096


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


def usage_cost(usage: Usage | None, price: Price | None) -> float:
    """What ``usage`` cost at ``price`` (0 without either)."""
    if usage is None or price is None:
        return 0.0
    return price.cost(usage.prompt_tokens or 0, usage.completion_tokens or 0,
                      usage.cache_read_tokens or 0, usage.cache_write_tokens or 0)  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """A request's estimated cost (None: the model has no price) and what it counts."""

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


@dataclass(frozen=True)
class Limit:
    """One limit in force: whose it is, what it bounds, and whether a yes lifts it."""

    scope: str  # "thread" or "kernel"
    dollars: float
    admin: bool = False  # the administrator's cap, counted at the dearest prices
    hard: bool = False

    @property
    def key(self) -> str:
        """How a yes that raised this limit names it (in a budget call's arguments)."""
        return f"{self.scope}-cap" if self.admin else self.scope


@dataclass(frozen=True)
class _Crossing:
    limit: Limit
    guess: Estimate
    spent: float
    ceiling: float  # the limit as this question has it (raised by a yes)


class Spending:
    """What one question may still spend and has spent, checked before each request it sends.

    ``earlier`` are the thread's turns before this question's; ``current`` its
    own turn as stored, whose usage counts as spent (a resumed turn);
    ``raised`` the limits an earlier yes raised for it (see :class:`Limit.key`).
    After a refused request, :attr:`crossed` is what a yes to it raises.
    """

    def __init__(
        self,
        budget: Budget,
        cap: BudgetCap,
        prices: tuple[Mapping[str, Price], Mapping[str, Price]],
        ledger: Ledger,
        *,
        earlier: Iterable[Turn] = (),
        current: Turn | None = None,
        raised: Mapping[str, float] | None = None,
        thread_id: int | None = None,
    ) -> None:
        self.limits = _limits(budget, cap)
        self.prices, self.ledger, self.thread_id = prices, ledger, thread_id
        counted = bool(self.limits)  # without a limit nothing reads what was spent
        turns = list(earlier) if counted else []
        mine = [current] if counted and current is not None else []
        self._thread = [thread_cost(turns, p) or 0.0 for p in prices]
        self._question = [thread_cost(mine, p) or 0.0 for p in prices]
        self.raised = {k: v for k, v in (raised or {}).items() if _is_dollars(v)}
        self.crossed: dict[str, float] = {}
        self.side: Usage | None = None  # what the question's side requests reported
        self.first_admitted = False  # the question's first request passed its check already

    @property
    def limited(self) -> bool:
        """Whether any budget or cap is in force (otherwise nothing is checked)."""
        return bool(self.limits)

    def check_first(self, prompt_tokens: int, options: Mapping[str, Any], model: str,
                    *, confirmed: bool) -> None:  # fmt: skip
        """The first request's check, before the question is saved: OverBudget unless it fits
        or ``confirmed`` says yes (never to a hard cap)."""
        crossed = self._crossings(prompt_tokens, options, model)
        hard = [c for c in crossed if c.limit.hard]
        if hard or (crossed and not confirmed):
            crossing = (hard or crossed)[0]
            raise over_budget(crossing.guess, crossing.spent, crossing.ceiling, crossing.limit,
                              self.thread_id, first=True)  # fmt: skip
        self.say_yes(self.raises(crossed))
        self.first_admitted = True

    def admit(self, prompt_tokens: int, options: Mapping[str, Any], model: str, *,
              first: bool = False, room: int | None = None,
              purpose: str = "answer") -> Mapping[str, Any]:  # fmt: skip
        """The options a request goes with (``max_tokens`` bounded when unset), or OverBudget.

        ``first`` is the question's first request, checked already when
        :attr:`first_admitted`; ``room`` the tokens the model's window leaves
        for the answer, when known; ``purpose`` what the request is for
        (``"answer"``, or a side request: ``"summary"``, ``"title"``).
        """
        if not self.limits:
            return options
        crossed = self._crossings(prompt_tokens, options, model)
        if crossed and not (first and self.first_admitted):
            self.crossed = {**self.raised, **self.raises(crossed)}
            hard = [c for c in crossed if c.limit.hard]
            crossing = (hard or crossed)[0]
            raise over_budget(crossing.guess, crossing.spent, crossing.ceiling, crossing.limit,
                              self.thread_id, first=False, purpose=purpose)  # fmt: skip
        return self._bounded(prompt_tokens, options, model, room)

    def check_hard(self, prompt_tokens: int, options: Mapping[str, Any], model: str) -> None:
        """OverBudget when going on with a request would cross a hard cap, before a person's
        answer is taken (a soft limit asks once the turn goes on)."""
        hard = [c for c in self._crossings(prompt_tokens, options, model) if c.limit.hard]
        if hard:
            crossing = hard[0]
            raise over_budget(crossing.guess, crossing.spent, crossing.ceiling, crossing.limit,
                              self.thread_id, first=False, purpose="resume")  # fmt: skip

    def raises(self, crossed: Iterable[_Crossing]) -> dict[str, float]:
        """What a yes to ``crossed`` raises each soft limit to: spent plus the estimate."""
        return {c.limit.key: c.spent + (c.guess.cost or 0.0) for c in crossed if not c.limit.hard}

    def say_yes(self, raises: Mapping[str, float]) -> None:
        """Take a yes: the soft limits it names rise for the rest of this question."""
        for key, value in raises.items():
            if _is_dollars(value):
                self.raised[key] = max(value, self.raised.get(key, 0.0))

    def add(self, usage: Usage, model: str, *, side: bool = False) -> None:
        """A request's reported usage: this question's spending, and the kernel's.

        ``side`` is a request beside the answer's (its summary): its usage is
        kept in :attr:`side` too, for the turn to count as its own.
        """
        if side:
            self.side = usage if self.side is None else self.side + usage
        mine, theirs = (usage_cost(usage, p.get(model)) for p in self.prices)
        self._question = [self._question[0] + mine, self._question[1] + theirs]
        if theirs > 0:
            self.ledger.add(theirs)

    def spent(self, limit: Limit, kernel: float | None = None) -> float:
        """What counts against ``limit`` now (``kernel``: the ledger, read already)."""
        if limit.scope == "kernel":
            return self.ledger.spent if kernel is None else kernel
        whose = 1 if limit.admin else 0
        return self._thread[whose] + self._question[whose]

    def _kernel(self) -> float | None:
        """The kernel's spending, read once per check (from the store), if a limit needs it."""
        return self.ledger.spent if any(limit.scope == "kernel" for limit in self.limits) else None

    def _ceiling(self, limit: Limit) -> float:
        return limit.dollars if limit.hard else max(limit.dollars, self.raised.get(limit.key, 0.0))

    def _crossings(self, prompt_tokens: int, options: Mapping[str, Any],
                   model: str) -> list[_Crossing]:  # fmt: skip
        found, kernel = [], self._kernel()
        for limit in self.limits:
            guess = estimate(prompt_tokens, options, model, self.prices[limit.admin].get(model))
            spent, ceiling = self.spent(limit, kernel), self._ceiling(limit)
            unknown = guess.cost is None and limit.hard
            if unknown or (guess.cost is not None and spent + guess.cost > ceiling):
                found.append(_Crossing(limit, guess, spent, ceiling))
        return found

    def _bounded(self, prompt_tokens: int, options: Mapping[str, Any], model: str,
                 room: int | None) -> Mapping[str, Any]:  # fmt: skip
        if isinstance(options.get("max_tokens"), int):
            return options
        ceiling = min(BOUND_CEILING, room) if room and room > 0 else BOUND_CEILING
        bound, kernel = ceiling, self._kernel()
        for limit in self.limits:
            price = self.prices[limit.admin].get(model)
            if price is None or price.output <= 0:
                continue
            left = self._ceiling(limit) - self.spent(limit, kernel) - price.cost(prompt_tokens, 0)
            bound = min(bound, math.floor(left * 1_000_000 / price.output))
        return options if bound >= ceiling else {**options, "max_tokens": max(1, bound)}


def _limits(budget: Budget, cap: BudgetCap) -> list[Limit]:
    """The limits in force, the administrator's first (a hard one must be met first)."""
    limits = [Limit(scope, value, admin=True, hard=cap.hard)
              for scope, value in (("thread", cap.thread), ("kernel", cap.kernel))
              if value is not None]  # fmt: skip
    limits += [Limit(scope, value) for scope, value in
               (("thread", budget.thread), ("kernel", budget.kernel)) if value is not None]
    return limits


def _is_dollars(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e12


def _cap_name(scope: str) -> str:
    return ENV_MAX_BUDGET if scope == "thread" else ENV_MAX_KERNEL_BUDGET


_WHAT = {"first": "this question would cost", "answer": "going on would cost",
         "resume": "going on after this answer would cost",
         "summary": "the summary of the thread's oldest turns would cost",
         "title": "the thread's title would cost"}


def over_budget(guess: Estimate, spent: float, ceiling: float, limit: Limit,
                thread_id: int | None, *, first: bool, purpose: str = "answer") -> OverBudget:
    """The OverBudget for a request ``guess`` that would cross ``limit``: what, why, the fix."""
    scope, sent = limit.scope, "was" if first else "more was"
    if guess.cost is None:
        return OverBudget(
            f"the administrator caps what a {scope} may cost ({_cap_name(scope)}, a hard "
            f"limit here), and {guess.model} has no price, so its cost is unknown; nothing "
            f"{sent} sent. Ask the administrator to price it in {ENV_PRICES}",
            scope=scope, budget=ceiling, spent=spent, hard=True,
        )  # fmt: skip
    where = f"thread {thread_id}" if scope == "thread" and thread_id else f"this {scope}"
    whose = f"the administrator's cap ({_cap_name(scope)})" if limit.admin else (
        "your budget (ChatMagics.budget / NBCHAT_BUDGET)" if scope == "thread"
        else "your budget (ChatMagics.kernel_budget / NBCHAT_KERNEL_BUDGET)")  # fmt: skip
    return OverBudget(
        f"{_WHAT['first' if first else purpose]} ≈ {dollars(guess.cost)} (~"
        f"{guess.prompt_tokens:,} tokens in, up to {guess.answer_tokens:,} out, at "
        f"{guess.model}'s price); with {dollars(spent)} spent in {where} that crosses {whose} "
        f"of {dollars(ceiling)}; nothing {sent} sent: {_fix(limit, first, thread_id, purpose)}",
        scope=scope, budget=ceiling, spent=spent, estimate=guess.cost, hard=limit.hard,
    )  # fmt: skip


def _fix(limit: Limit, first: bool, thread_id: int | None, purpose: str) -> str:
    if limit.hard and purpose == "resume":
        return ("it is a hard limit here; nothing ran and the call still waits: answer it "
                "again once the administrator has raised it")
    if limit.hard:
        goes_on = not first and thread_id and purpose == "answer"
        later = "; once they have, %chat --retry goes on from here" if goes_on else ""
        return f"it is a hard limit here; ask the administrator to raise it{later}"
    if first:
        return "to send it anyway, ask again with --over-budget (over_budget=True in Python)"
    if purpose != "answer":
        return "a budget's yes is asked for answers only; raise the budget to send it"
    if thread_id:
        return "answer yes to go on (%chat --answer yes)"
    return "ask again with --over-budget (over_budget=True in Python) to start over"


class GoOnPastBudget(Confirm):
    """The budget's own question, answered yes or no: go on past the budget the turn met?

    Never offered to a model: a turn suspended by a budget waits on a call of
    it (:func:`budget_call`), which the person answers as any other.
    """

    name = BUDGET_TOOL
    description = "Ask the person whether to go on past a budget the turn would cross."
    parameters = {
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "raise": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["question", "raise"],
        "additionalProperties": False,
    }

    def output(self, arguments: dict[str, Any], answer: object) -> str:
        return "go on past the budget" if answer else "stop at the budget"


GO_ON = GoOnPastBudget()


def budget_call(error: OverBudget, raises: Mapping[str, float], thread_id: int,
                turn: int) -> PendingCall:  # fmt: skip
    """The pending call a turn over a budget waits on; its yes raises the limits ``raises``
    names (what :attr:`Spending.crossed` held when ``error`` was raised)."""
    question = f"{str(error).split('; nothing more was sent')[0]}. Go on?"
    question = question[0].upper() + question[1:]
    arguments = {"question": question, "raise": dict(raises)}
    call_id = f"{BUDGET_CALL_ID}{secrets.token_hex(4)}"  # one turn may ask more than once
    return PendingCall(thread_id, turn, call_id, BUDGET_TOOL, arguments,
                       Prompt.from_dict(GO_ON.prompt(arguments)))  # fmt: skip
