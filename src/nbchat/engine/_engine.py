"""What Chat and LLM share: settings, the endpoint, the tools offered, building a turn.

:class:`_Engine` is the base of both. It resolves settings and the endpoint
client (lazily: that may start the demo model), chooses the tools a turn
offers, fits the context to the model (:mod:`._endings`) and builds the
:class:`~._turn.TurnSpec` that :func:`~._turn.run_turn` runs, so every way of
asking goes through the same few steps.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..base._secrets import Scrubbed, noting_scrubs, remember
from ..base.config import ENV_TOOLLESS_MODELS, Settings, resolve
from ..base.errors import InputError, NbchatError
from ..base.options import Options, check_options, env_options, merge_options
from ..base.policy import budget_cap
from ..context import as_items
from ..llm import LLMClient
from ..llm._stop import StopSignal
from ..llm.local import BUNDLED_ALIAS
from ..llm.routed import client_for
from ..mcp.tools import Selection, mcp_tool_named, mcp_tools
from ..store.base import Thread, Turn
from ..tools import BUILTIN_CLIENT_TOOLS, ClientTool, Toolbox, ToolContext
from ._answer import Answer
from ._budget import Budget, Spending
from ._endings import fit_history, refit_history, request_tokens
from ._kernel_spending import PROCESS, Ledger
from ._preview import Preview, Sources, preview_of
from ._recorders import HistoryRecorder
from ._turn import NullRecorder, TurnSpec, round_request, run_turn
from ._usage import Price, dearest_prices, prices_from_env
from .history import ChatHistory


class _Engine:
    """What Chat and LLM share: settings, the lazily resolved endpoint, tools."""

    def __init__(
        self,
        *,
        model: str | None,
        base_url: str | None,
        api_key: str | None,
        provider: str | None,
        tools: Iterable[Any],
        builtin_tools: bool | None,
        permissions: Iterable[str],
        max_tool_rounds: int,
        store: str | os.PathLike[str] | None = None,
        user: str | None = None,
        options: Mapping[str, Any] | None = None,
        mcp: Selection = None,
        budget: float | None = None,
        kernel_budget: float | None = None,
        answering: Iterable[Any] | Callable[[], Iterable[Any]] = (),
    ) -> None:
        self._explicit = dict(
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            model=model,
            store=store,
            user=user,
        )
        self.settings: Settings = resolve(**self._explicit)  # type: ignore[arg-type]
        remember(self.settings.api_key)  # kept out of what the notebook tools send from now on
        self.user_tools = list(tools)
        self.toolbox = Toolbox([*BUILTIN_CLIENT_TOOLS, *self.user_tools])
        # Client tools that answer stored calls (an outside agent's) but are never offered,
        # made when a call first needs one.
        self._answering_from = answering
        self._answering: Toolbox | None = None
        self.builtin_tools = builtin_tools
        self.options: Options = check_options(options)
        self.permissions = frozenset(permissions)
        self.max_tool_rounds = max_tool_rounds
        self.mcp = mcp
        self.instructions = ""  # project instructions added to every turn's system prompt
        self.prices: Mapping[str, Price] | None = None  # None: NBCHAT_PRICES
        self.budget = budget  # dollars a thread may cost before a question asks; None: env
        self.kernel_budget = kernel_budget  # dollars this process may spend before that
        self._llm: LLMClient | None = None

    @property
    def answering(self) -> Toolbox:
        """The tools that answer stored calls but are never offered (made on first use)."""
        if self._answering is None:
            source = self._answering_from
            self._answering = Toolbox(source() if callable(source) else source)
        return self._answering

    @property
    def llm(self) -> LLMClient:
        """The endpoint client, resolved on first use (this may start the demo model)."""
        if self._llm is None:
            self._llm = client_for(self._explicit)
            self.settings = self._llm.settings
        return self._llm

    def list_models(self) -> list[str]:
        """The models the endpoint offers."""
        return self.llm.list_models()

    def _options(self, *layers: Mapping[str, Any] | None) -> Options:
        """NBCHAT_OPTIONS, then this object's options, then ``layers`` (thread, call)."""
        return merge_options(env_options(), self.options, *layers)

    def _turn_options(self, thread: Thread, turn: Turn) -> Options:
        """The options a turn was asked with (resuming it uses them again)."""
        if turn.options is not None:
            return dict(turn.options)
        return self._options(thread_options(thread))

    def _is_small(self, model: str) -> bool:
        """Whether ``model`` is too small for tools and titles.

        The bundled model, a model named in ``NBCHAT_TOOLLESS_MODELS``, or one
        whose server says its chat template has no tools.
        """
        if self.llm.settings.origin == "local" or model == BUNDLED_ALIAS:
            return True
        patterns = os.environ.get(ENV_TOOLLESS_MODELS, "").split(",")
        if any(fnmatch.fnmatch(model, p.strip()) for p in patterns if p.strip()):
            return True
        return self.llm.template_has_tools() is False  # the server says: never taught tools

    def _offered(self, model: str, builtin: bool | None = None, mcp: Selection = None) -> Toolbox:
        """The tools offered in a turn: the user's, the built-ins where they help, MCP's.

        Built-ins are off by default for the local model and for models named in
        ``NBCHAT_TOOLLESS_MODELS``: small models call them instead of answering.
        ``mcp`` chooses the MCP servers for this turn (None: this object's choice).
        """
        if builtin is None:
            builtin = self.builtin_tools
        if builtin is None:
            builtin = not self._is_small(model)
        offered = [*(BUILTIN_CLIENT_TOOLS if builtin else ()),
                   *(t for t in self.user_tools if getattr(t, "is_offered", _always)())]
        names = {getattr(item, "name", None) or getattr(item, "__name__", None) for item in offered}
        servers = [t for t in mcp_tools(self.mcp if mcp is None else mcp) if t.name not in names]
        return Toolbox([*offered, *servers])  # a tool of your own wins over a server's

    def _with_instructions(self, history: ChatHistory) -> ChatHistory:
        """``history`` whose system prompt ends with the project instructions, if any."""
        if self.instructions:
            history.system = "\n\n".join(p for p in (history.system, self.instructions) if p)
        return history

    def _client_tool(self, name: str) -> ClientTool:
        """The client tool that answers a saved call: offered here, or an MCP server's."""
        if name in self.answering and name not in self.toolbox:
            return self.answering.client_tool(name)
        if name not in self.toolbox:
            found = mcp_tool_named(name)
            if found is not None:
                return found
        return self.toolbox.client_tool(name)

    def _spec(
        self,
        history: ChatHistory,
        model: str,
        options: Options,
        toolbox: Toolbox,
        **fields: Any,
    ) -> TurnSpec:
        """A TurnSpec whose context is the window of ``history`` that fits the model."""
        llm = self.llm
        tools = toolbox.schemas() or None
        size = llm.context_size(model, options)
        fitted = fit_history(history, size, options, tools, llm.token_scale(model))

        def refit(error: NbchatError) -> tuple[ChatHistory, int] | None:
            size = getattr(error, "context_size", None)
            if size:
                llm.learn_context_size(model, size)
            sent = getattr(error, "prompt_tokens", None)
            if sent:
                calibrate(sent)
            shorter = refit_history(history, spec.context, size or fitted.context_size,
                                    options, tools, sent, llm.token_scale(model))  # fmt: skip
            return None if shorter is None else (shorter.history, shorter.dropped_turns)

        def calibrate(counted: int) -> None:
            """Learn the model's tokens per estimated one from its count of this request."""
            llm.learn_token_count(model, request_tokens(spec.context, tools), counted)

        spec = TurnSpec(
            llm=llm, model=model, context=fitted.history, toolbox=toolbox, options=options,
            refit=refit, dropped_turns=fitted.dropped_turns, context_size=fitted.context_size,
            max_rounds=self.max_tool_rounds, calibrate=calibrate if size else None, **fields,
        )  # fmt: skip
        return spec

    def price(self, model: str) -> Price | None:
        """The configured price of ``model`` (``prices``, else ``NBCHAT_PRICES``), if any."""
        return self._prices().get(model)

    def _prices(self) -> Mapping[str, Price]:
        return prices_from_env() if self.prices is None else self.prices

    def _cap_prices(self) -> Mapping[str, Price]:
        """Prices for the administrator's caps: the dearest known (see ``dearest_prices``)."""
        return dearest_prices(self.prices or {})

    def _ledger(self) -> Ledger:
        """What this kernel has spent: in this process only (a Chat keeps it in its store)."""
        return PROCESS

    def _spending_for(
        self,
        earlier: Iterable[Turn] = (),
        current: Turn | None = None,
        *,
        raised: Mapping[str, float] | None = None,
        thread_id: int | None = None,
    ) -> Spending:
        """What a question may spend: the budgets and caps now, what was spent before it."""
        return Spending(
            Budget.resolve(self.budget, self.kernel_budget), budget_cap(),
            (self._prices(), self._cap_prices()), self._ledger(), earlier=earlier,
            current=current, raised=raised, thread_id=thread_id,
        )  # fmt: skip

    def _check_budget(
        self,
        preview: Callable[[], Preview],
        spending: Spending,
        options: Mapping[str, Any],
        *,
        confirmed: bool,
    ) -> None:
        """Raise OverBudget when the first request ``preview`` builds would cross a budget."""
        if not spending.limited:
            return
        built = preview()
        spending.check_first(built.tokens, options, built.model, confirmed=confirmed)

    def _preview(
        self, spec: TurnSpec, sources: Sources, noted: Sequence[Scrubbed] = ()
    ) -> Preview:
        """The preview of the request the turn ``spec`` would send first."""
        sent = round_request(spec)
        request = self.llm.request(sent.messages, model=spec.model, tools=sent.tools,
                                   options=sent.options)  # fmt: skip
        return preview_of(spec, request, self.llm.settings.provider,
                          sources, self.price(request.model), noted)  # fmt: skip

    def _history_turn(
        self,
        question: str,
        history: ChatHistory,
        model: str | None,
        update: bool,
        options: Mapping[str, Any] | None = None,
        attached: Iterable[Any] = (),
        mcp: Selection = None,
        over_budget: bool = False,
    ) -> Answer:
        spec = self._history_spec(question, history, model, update, options, attached, mcp)
        spec.spending = self._spending_for()
        self._check_budget(lambda: self._preview(spec, Sources()), spec.spending, spec.options,
                           confirmed=over_budget)  # fmt: skip
        return Answer.streaming(run_turn(spec), spec.stop)

    def preview_with_history(
        self,
        question: str,
        history: ChatHistory,
        model: str | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        context: Any = (),
        mcp: Selection = None,
        scrubbed: Sequence[Scrubbed] = (),
    ) -> Preview:
        """The request ``ask_with_history`` would send now, built and not sent (see ``preview``)."""
        with noting_scrubs() as noted:
            spec = self._history_spec(question, history, model, False, options, context, mcp)
        turns = range(len(history.turns()))
        kept = len(spec.context.turns()) - 1
        sources = Sources(turns, self.instructions, left_out=tuple(turns[: len(turns) - kept]))
        return self._preview(spec, sources, [*scrubbed, *noted])

    def _history_spec(
        self,
        question: str,
        history: ChatHistory,
        model: str | None,
        update: bool,
        options: Mapping[str, Any] | None = None,
        attached: Iterable[Any] = (),
        mcp: Selection = None,
    ) -> TurnSpec:
        check_text(question, "question")
        if not isinstance(history, ChatHistory):
            raise InputError(
                f"history must be a ChatHistory, got {type(history).__name__}; "
                f"build one with nbchat.ChatHistory()"
            )
        context = self._with_instructions(history.copy())
        context.chat_as_user(question, context=as_items(attached))
        model = model or self.llm.default_model()
        chosen, offered = self._options(check_options(options)), self._offered(model, mcp=mcp)
        check_tool_choice(chosen, offered)
        spec = self._spec(
            context, model, chosen, offered,
            tool_context=ToolContext(self.settings.user, self.settings.user, self.permissions),
            recorder=HistoryRecorder(history, question) if update else NullRecorder(),
            suspendable=False, stop=StopSignal(),
        )  # fmt: skip
        return spec


def thread_options(thread: Thread) -> Options:
    """The generation options saved with a thread."""
    options = (thread.settings or {}).get("options")
    return dict(options) if isinstance(options, dict) else {}


def provider_only(options: Options) -> Options:
    """Options that are about the endpoint, not the answer (kept for side requests)."""
    answer_keys = {"max_tokens", "temperature", "top_p", "seed", "stop", "tool_choice"}
    return {k: v for k, v in options.items() if k not in answer_keys}


def check_text(value: object, what: str) -> None:
    """Refuse a question or query that is not text, or is empty."""
    if not isinstance(value, str):
        raise InputError(f"the {what} must be text (str), got {type(value).__name__}")
    if not value.strip():
        raise InputError(f"the {what} is empty; type something to ask")


def check_tool_choice(options: Mapping[str, Any], toolbox: Toolbox) -> None:
    """Refuse a tool choice naming a tool this turn does not offer, before anything is sent."""
    choice = options.get("tool_choice")
    if not isinstance(choice, Mapping):
        return
    name = (choice.get("function") or {}).get("name")
    if name not in toolbox.names:
        offered = ", ".join(toolbox.names) or "none"
        raise InputError(
            f"tool_choice names {name!r}, which is not offered in this turn (offered: "
            f"{offered}); name one of those, or leave --tool-choice out"
        )


def _always() -> bool:
    return True
