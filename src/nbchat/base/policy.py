"""Administrator policy: what the hub decides for every user, above every other setting.

A JupyterHub sets these variables in each user's server environment
(``c.Spawner.environment``); arguments, magic options and ``%config`` cannot
override them:

``NBCHAT_ALLOWED_MODELS``
    Comma-separated model names: listings show only these, and asking for any
    other raises :class:`~nbchat.base.errors.ModelNotAllowed`.
``NBCHAT_FORCE_BASE_URL``
    Every request goes to this endpoint, whatever ``base_url`` says.
``NBCHAT_FORCE_MODEL``
    Every request uses this model, whatever the thread or the call asks for.
``NBCHAT_DISABLE_LOCAL_MODEL``
    ``1``/``true``/``yes``: never start the bundled local model as a fallback.
``NBCHAT_MAX_APPROVAL``
    The loosest approval policy anyone may choose for the model's code and
    tools (``always``, ``risky``, ``never-ask``): :func:`effective_approval`.
``NBCHAT_MAX_BUDGET``, ``NBCHAT_MAX_KERNEL_BUDGET``
    Dollars one thread, and one kernel, may cost at most: a question whose
    estimate would cross either asks first, as a user's own budget does
    (:func:`budget_cap`). Nothing a user sets raises them.
``NBCHAT_HARD_BUDGET``
    ``1``/``true``/``yes``: those caps refuse the question instead of asking,
    and a question to a model with no price refuses too (its cost is unknown).

Read at each use, so a server started with them keeps them. They bind
nbchat's own code paths; code a user runs in the kernel can still change its
own process's environment, so an endpoint that must not be used should also be
unreachable (or its key withheld) for the users' servers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

from ._secrets import redacted_repr
from .errors import InputError, ModelNotAllowed

__all__ = [
    "APPROVALS", "Approval", "BudgetCap", "Policy", "budget_cap", "check_approval",
    "effective_approval", "max_approval",
]

ENV_ALLOWED_MODELS = "NBCHAT_ALLOWED_MODELS"
ENV_FORCE_BASE_URL = "NBCHAT_FORCE_BASE_URL"
ENV_FORCE_MODEL = "NBCHAT_FORCE_MODEL"
ENV_DISABLE_LOCAL_MODEL = "NBCHAT_DISABLE_LOCAL_MODEL"
ENV_MAX_APPROVAL = "NBCHAT_MAX_APPROVAL"
ENV_MAX_BUDGET = "NBCHAT_MAX_BUDGET"
ENV_MAX_KERNEL_BUDGET = "NBCHAT_MAX_KERNEL_BUDGET"
ENV_HARD_BUDGET = "NBCHAT_HARD_BUDGET"
ENV_AGENTS = "NBCHAT_AGENTS"  # "off": no outside agent reaches nbchat's MCP endpoint
ENV_AGENT_HOSTS = "NBCHAT_AGENT_HOSTS"  # host names agents may use beyond loopback (a hub's)
ENV_AGENT_ORIGINS = "NBCHAT_AGENT_ORIGINS"  # web origins allowed to call the endpoint

_TRUE = ("1", "true", "yes", "on")

# Who may run the model's code without asking, strictest first; the cap is the
# administrator's NBCHAT_MAX_APPROVAL.
Approval = Literal["always", "risky", "never-ask"]
APPROVALS: tuple[Approval, ...] = get_args(Approval)  # strictest first


@dataclass(frozen=True)
class Policy:
    """The administrator's settings, as the environment gives them now."""

    allowed_models: tuple[str, ...] = ()
    force_base_url: str | None = None
    force_model: str | None = None
    disable_local_model: bool = False

    def __repr__(self) -> str:
        return redacted_repr(self)

    @classmethod
    def from_env(cls) -> Policy:
        """The policy the environment sets (empty when none of its variables is set)."""
        env = os.environ
        allowed = tuple(
            name.strip() for name in env.get(ENV_ALLOWED_MODELS, "").split(",") if name.strip()
        )
        return cls(
            allowed_models=allowed,
            force_base_url=env.get(ENV_FORCE_BASE_URL, "").strip() or None,
            force_model=env.get(ENV_FORCE_MODEL, "").strip() or None,
            disable_local_model=env.get(ENV_DISABLE_LOCAL_MODEL, "").strip().lower() in _TRUE,
        )

    def model(self, asked: str | None) -> str | None:
        """The model to use when *asked* is asked for: the forced one, or *asked* if allowed."""
        if self.force_model:
            return self.force_model
        if asked is None or not self.allowed_models or asked in self.allowed_models:
            return asked
        raise ModelNotAllowed(
            f"model {asked!r} is not allowed here; the administrator allows "
            f"{', '.join(self.allowed_models)} ({ENV_ALLOWED_MODELS}); pick one with -m MODEL",
            model=asked,
        )

    def models(self, offered: Iterable[str]) -> list[str]:
        """The models of *offered* that may be used, in their order."""
        if self.force_model:
            return [self.force_model]
        offered = list(offered)
        if not self.allowed_models:
            return offered
        return [name for name in offered if name in self.allowed_models]


def _cap(environ: Mapping[str, str]) -> Approval:
    value = environ.get(ENV_MAX_APPROVAL, "").strip()
    if not value:
        return "never-ask"
    return next((policy for policy in APPROVALS if policy == value), "always")


_CAP_AT_IMPORT: Final[Approval] = _cap(os.environ)


def _stricter(*policies: Approval) -> Approval:
    return APPROVALS[min(APPROVALS.index(policy) for policy in policies)]


def effective_approval(requested: str, cap: str | None = None) -> Approval:
    """The strictest of the user's ``requested`` policy, ``cap`` and the administrator's cap."""
    ceiling = max_approval() if cap is None else _stricter(check_approval(cap), max_approval())
    return _stricter(check_approval(requested), ceiling)


def max_approval(environ: Mapping[str, str] | None = None) -> Approval:
    """The administrator's cap, ``NBCHAT_MAX_APPROVAL``; unset: no cap.

    Without ``environ``: the stricter of its value when nbchat was first
    imported and its value now, so changing ``os.environ`` cannot lift it. A
    value that is not a policy name caps at ``always``: a typo in a guard must
    not open it.
    """
    if environ is not None:
        return _cap(environ)
    return _stricter(_CAP_AT_IMPORT, _cap(os.environ))


def check_approval(value: object) -> Approval:
    """``value`` as a policy name, or InputError naming the choices."""
    if value not in APPROVALS:
        raise InputError(f"unknown approval policy {value!r}; use one of: {', '.join(APPROVALS)}")
    return next(a for a in APPROVALS if a == value)


@dataclass(frozen=True)
class BudgetCap:
    """The administrator's caps in dollars, per thread and per kernel, and whether they refuse."""

    thread: float | None = None
    kernel: float | None = None
    hard: bool = False

    @property
    def is_set(self) -> bool:
        return self.thread is not None or self.kernel is not None


def _dollars(environ: Mapping[str, str], name: str) -> float | None:
    """A cap in dollars; a value that is not a number of 0 or more caps at 0 (fails closed)."""
    value = environ.get(name, "").strip().lstrip("$")
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if number >= 0 and number == number else 0.0  # NaN: 0 too


def _budget_cap(environ: Mapping[str, str]) -> BudgetCap:
    hard = environ.get(ENV_HARD_BUDGET, "").strip().lower() in _TRUE
    return BudgetCap(_dollars(environ, ENV_MAX_BUDGET), _dollars(environ, ENV_MAX_KERNEL_BUDGET),
                     hard)  # fmt: skip


_BUDGET_AT_IMPORT: Final[BudgetCap] = _budget_cap(os.environ)


def _lower(*limits: float | None) -> float | None:
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None


def budget_cap(environ: Mapping[str, str] | None = None) -> BudgetCap:
    """The administrator's budget caps; unset: none.

    Without ``environ``: the stricter of their values when nbchat was first
    imported and now (the lower cap, hard if either is), so changing
    ``os.environ`` in the notebook cannot lift them.
    """
    if environ is not None:
        return _budget_cap(environ)
    then, now = _BUDGET_AT_IMPORT, _budget_cap(os.environ)
    return BudgetCap(_lower(then.thread, now.thread), _lower(then.kernel, now.kernel),
                     then.hard or now.hard)  # fmt: skip
