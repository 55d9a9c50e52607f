"""``%chat`` / ``%%chat``: ask in threads, manage them, answer client tools.

``load(ipython)`` registers :class:`ChatMagics` (what ``%load_ext nbchat`` and
the auto-load startup file end up calling) and the input transformer that
keeps ``%chat What is Python?`` a question; ``unload`` removes both. Nothing
here talks to the network or imports ipywidgets before it is needed.

:meth:`ChatMagics._run` parses a line and hands it to one handler from
``HANDLERS`` (a command, a kind of question, or a plain question). What the
handlers share but does not need the magics' state lives beside this module:
the thread commands (:mod:`._thread_commands`), placing an ``--answer``
(:mod:`._answering`), what a question takes from the notebook
(:mod:`._context`), the declared options (:mod:`._options`) and
the line's syntax (:mod:`._syntax`), and what it reads of the shell
(:mod:`._shell`). What stays here needs the settings, the Chat they build, or
the current thread: the traits, the Chat's construction, asking and rendering,
and the key, panel and model commands. That keeps this module past 500
lines on purpose: IPython configures the magic as one class
(``%config ChatMagics.…``), and splitting its methods across modules would
only pass the same ``self`` around.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.display import display
from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, Unicode, observe, validate

from ...base import markup
from ...base._notices import set_notifier
from ...base._secrets import Scrubbed, noting_scrubs
from ...base.errors import NbchatError, OverBudget
from ...base.options import check_options
from ...context._interpolate import resolve
from .._loaded import hand_over
from ..agents import _commands as agents
from ..cell.render import Mode, RenderResult, TurnRenderer, detect_mode, execution_marker
from . import _context as _magic_context
from . import _thread_commands as threads
from ._answering import NOTEBOOK_TOOLS, tool_answer
from ._context import (
    ERROR_PROMPT,
    FIX_QUESTION,
    FIX_REQUEST,
    MAX_TRACEBACK_CHARS,
    attached_context,
    code_to_next_cell,
    error_question,
    fix_context,
    fix_question,
    project_instructions,
)
from ._notes import show_note
from ._options import chat_arguments, flag_options
from ._preview_commands import check_preview, compact_thread, show_preview
from ._shell import echoed, environment, forget_config_key
from ._syntax import protect_chat_questions, split_options

if TYPE_CHECKING:
    from ...engine.chat import Chat
    from ...engine.history import ChatHistory

__all__ = ["ChatMagics", "load", "protect_chat_questions", "unload"]

COMMANDS = (
    "list", "show", "use", "rename", "delete", "models", "export", "panel", "answer", "retry",
    "search", "key", "compact", "agents", "agent_token", "revoke_agent",
)  # fmt: skip
# the commands that read the text after them
TAKE_TEXT = ("rename", "search", "answer", "key", "agent_token")
API_KEY_REFUSED = (
    "ChatMagics.api_key is not a setting, and the value was discarded; give the key with "
    "%chat --key (a hidden prompt) or the NBCHAT_API_KEY environment variable, set before "
    "starting Jupyter"
)
KEY_PROMPT = "API key (hidden; kept in this kernel's memory only): "
KEY_NO_STDIN = (
    "%chat --key asks at a hidden prompt, and this notebook cannot show one (it runs "
    "without a person, e.g. under nbclient); set NBCHAT_API_KEY in the environment "
    "before starting Jupyter instead"
)
CONTINUE_QUESTION = (
    "Continue your previous answer exactly where it stopped, without repeating any of it."
)
# Where these lived before the context and --answer code had modules of their own.
_MOVED = (ERROR_PROMPT, FIX_QUESTION, FIX_REQUEST, MAX_TRACEBACK_CHARS, NOTEBOOK_TOOLS)


@magics_class
class ChatMagics(Magics):
    """The ``%chat`` magic, one per shell; it keeps the session's current thread.

    Settings are traits (``%config ChatMagics.model = "llama3.2"``); unset ones
    come from the ``NBCHAT_*`` environment variables, read again when they change.
    """

    model = Unicode(None, allow_none=True, help="Model of new threads.").tag(config=True)
    base_url = Unicode(None, allow_none=True, help="The endpoint's URL.").tag(config=True)
    provider = Unicode(None, allow_none=True, help="'openai' or 'ollama'.").tag(config=True)
    store = Unicode(None, allow_none=True, help="Where threads are kept.").tag(config=True)
    user = Unicode(None, allow_none=True, help="Whose threads.").tag(config=True)
    system = Unicode(None, allow_none=True, help="System prompt of new threads.").tag(config=True)
    live = Bool(
        None, allow_none=True,
        help="True: stream answers live; False: render them once, at the end; "
        "None: live when a person is at the notebook, once under nbclient/nbval.",
    ).tag(config=True)
    tools = List(
        Unicode(),
        help="Names of variables holding tools the model may call "
        "(@nbchat.tool functions, ClientTool instances), besides the built-in client tools.",
    ).tag(config=True)
    permissions = List(
        Unicode(), help="Permissions the current user has, for client tools' requirements."
    ).tag(config=True)
    api_key = Unicode(
        None, allow_none=True,
        help="Refused: give the key with %chat --key, or set the NBCHAT_API_KEY environment "
        "variable.",
    ).tag(config=True)
    panel_area = CaselessStrEnum(
        ("cell", "side"), "cell",
        help="Where %chat --panel opens the panel: 'cell', or 'side' (JupyterLab's right "
        "side area).",
    ).tag(config=True)
    prices = Dict(
        help="Dollars per million input and output tokens by model, for the panel's cost "
        'estimates: {"gpt-4o-mini": [0.15, 0.6]}; NBCHAT_PRICES when empty.',
    ).tag(config=True)
    options = Dict(
        help="Generation options for this session, e.g. {'max_tokens': 500, 'temperature': "
        "0.2}; a thread's options and a question's flags win over them.",
    ).tag(config=True)
    builtin_tools = Bool(
        None, allow_none=True,
        help="Offer the built-in client tools (ask_user, choose, confirm): True, False, or "
        "None for on except with the local model and NBCHAT_TOOLLESS_MODELS.",
    ).tag(config=True)
    max_updates_per_second = Float(
        10.0, help="At most this many live display updates a second (fewer for long answers)."
    ).tag(config=True)
    agent = Bool(
        False,
        help="Offer the notebook tools to every question, as --agent does: the model may list "
        "variables, describe them, read cells and the last error, and run code after your yes.",
    ).tag(config=True)
    approval = Unicode(
        "always",
        help="When code the model wants to run needs your yes: 'always', 'risky' (all code "
        "but what the allowlist proves harmless) or 'never-ask'. NBCHAT_MAX_APPROVAL caps it.",
    ).tag(config=True)
    instructions = CaselessStrEnum(
        ("auto", "off"), None, allow_none=True,
        help="'auto': add the nearest AGENTS.md or .nbchat.md (the notebook's folder or a "
        "parent up to your home folder, only from folders only you can write) to the system "
        "prompt; 'off'; None: NBCHAT_INSTRUCTIONS, else off.",
    ).tag(config=True)
    context_budget = Int(
        2000, help="Tokens each @name (or --figure, --fix) description may take at most."
    ).tag(config=True)
    budget = Float(
        None, allow_none=True,
        help="Dollars a thread may cost (at `prices`) before a question asks first; None: "
        "NBCHAT_BUDGET. The administrator's NBCHAT_MAX_BUDGET caps it.",
    ).tag(config=True)
    kernel_budget = Float(
        None, allow_none=True,
        help="Dollars this kernel may spend before a question asks first; None: "
        "NBCHAT_KERNEL_BUDGET. NBCHAT_MAX_KERNEL_BUDGET caps it.",
    ).tag(config=True)
    window = CaselessStrEnum(
        ("drop", "summarize"), None, allow_none=True,
        help="When a thread outgrows the model's window: 'drop' its oldest turns from what is "
        "sent, or 'summarize' them (a summary the model writes once, kept with the thread); "
        "None: NBCHAT_WINDOW, else drop. A thread's own setting wins.",
    ).tag(config=True)

    @validate("api_key")
    def _validate_api_key(self, proposal: Any) -> None:
        """Refuse a key in %config at once; it is never kept, here or in any config."""
        if proposal["value"] is not None:
            print(f"UsageError: {API_KEY_REFUSED}", file=sys.stderr)
            forget_config_key(self.shell)
        return None

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.thread_id: int | None = None
        self._chat: Chat | None = None
        self._chat_key: tuple[Any, ...] | None = None
        self._agent_chat: tuple[tuple[Any, ...], Chat] | None = None
        self._agent_tools: tuple[str, list[Any]] | None = None
        self._use_agent = False
        self._agent_answer_tools: list[Any] | None = None
        self._session_key: tuple[str, str] | None = None  # (endpoint, key) from --key
        self._key_version = 0
        self._panels: weakref.WeakSet[Any] = weakref.WeakSet()  # the panels %chat --panel opened
        self._noted: list[Scrubbed] = []  # while a --preview is built: the scrubs made for it

    @observe("prices")
    def _observe_prices(self, change: Any) -> None:
        """Prices given while a panel is open apply to it at once, to answers shown and to come."""
        for panel in list(getattr(self, "_panels", ())):
            try:
                panel.prices = dict(change["new"]) or None
            except NbchatError as error:
                panel.show_error(error)

    @property
    def chat(self) -> Chat:
        """The Chat these magics use, rebuilt when a setting or NBCHAT_* variable changes.

        While an ``--agent`` question (or an answer to its ``run_code``) runs,
        it is a second Chat that also offers the notebook tools.
        """
        if self._use_agent:
            return self._chat_with_notebook_tools()
        return self._plain_chat()

    def _chat_with_notebook_tools(self) -> Chat:
        from ...engine.chat import Chat

        base = self._plain_chat()
        key = (id(base), self.approval, tuple(map(id, self._user_tools())), self._key_version)
        if self._agent_chat is None or self._agent_chat[0] != key:
            chat = Chat(
                model=self.model or None,
                base_url=self.base_url or None,
                api_key=self._key_for_endpoint(),
                provider=self.provider or None,
                store=base.store,
                tools=[*self._user_tools(), *self._notebook_tools()],
                permissions=self.permissions, window=self.window,
                answering=self._agent_answering(),
            )
            chat._llm = base._llm  # one endpoint client (and one fallback notice) for both
            self._agent_chat = (key, chat)
        return self._agent_chat[1]

    def _notebook_tools(self) -> list[Any]:
        """The notebook tools for the current approval policy (made once per policy)."""
        if self._agent_tools is None or self._agent_tools[0] != self.approval:
            from ..notebook.tools import notebook_tools, show_run

            tools = notebook_tools(self.shell, approval=self.approval, on_run=show_run)
            self._agent_tools = (self.approval, tools)
        return self._agent_tools[1]

    def _agent_answering(self) -> list[Any]:
        """The tools that answer outside agents' calls in this kernel (never offered)."""
        if self.shell is None or getattr(self.shell, "kernel", None) is None:
            return []
        if self._agent_answer_tools is None:
            from ..agents._kernel import kernel_answering_tools

            self._agent_answer_tools = kernel_answering_tools(self.shell)
        return self._agent_answer_tools

    def _plain_chat(self) -> Chat:
        tools = self._user_tools()
        options = check_options(self.options, source="ChatMagics.options")
        key = (self.model, self.base_url, self.provider, self.store, self.user, environment(),
               tuple(map(id, tools)), tuple(self.permissions), repr(sorted(options.items())),
               self.builtin_tools, self._key_version, self.window)
        if self._chat is None or key != self._chat_key:
            from ...engine.chat import Chat

            old = self._chat
            self._chat = Chat(
                model=self.model or None, base_url=self.base_url or None,
                api_key=self._key_for_endpoint(),
                provider=self.provider or None, store=self.store or None, user=self.user or None,
                tools=tools, permissions=self.permissions, options=options,
                builtin_tools=self.builtin_tools, window=self.window,
                answering=self._agent_answering(),
            )
            self._chat_key = key
            if old is not None and old.store.location() != self._chat.store.location():
                self.thread_id = None  # the current thread was another store's or user's
        return self._chat

    def _endpoint(self) -> str:
        """The endpoint the settings name (empty when nbchat will find one itself)."""
        from ...base.config import resolve

        return resolve(base_url=self.base_url or None).base_url

    def _key_for_endpoint(self) -> str | None:
        """The key given with --key, while the endpoint is still the one it was given for."""
        if self._session_key is None or self._session_key[0] != self._endpoint():
            return None
        return self._session_key[1]

    def _user_tools(self) -> list[Any]:
        """The objects named by the ``tools`` setting, from the user's namespace."""
        namespace = self.shell.user_ns if self.shell is not None else {}
        missing = [name for name in self.tools if name not in namespace]
        if missing:
            raise UsageError(
                f"ChatMagics.tools names {', '.join(map(repr, missing))}, which "
                f"{'is' if len(missing) == 1 else 'are'} not defined; define the tool first "
                f"or fix %config ChatMagics.tools"
            )
        return [namespace[name] for name in self.tools]

    @chat_arguments
    @line_cell_magic("chat")  # type: ignore[arg-type]  # IPython types its name form as Never
    @no_var_expand  # nbchat interpolates {name} itself (scrubbed); $ stays as typed
    def chat_magic(self, line: str, cell: str | None = None) -> RenderResult | None:
        """Chat with an LLM in threads that are kept.

        Forms::

          %chat QUESTION              ask in the current thread (a new one if none)
          %%chat [options]            ask the cell body
          reply = %chat QUESTION      the reply object: reply.text, str(reply)
          %chat --list | --show [ID] | --use ID | --new [-m MODEL] [-s SYSTEM]
          %chat --rename ID TITLE | --delete ID | --export ID PATH | --search TEXT
          %chat --models | --key | --panel [--side] | --error [MORE] | --answer [CALL] VALUE
          %chat --mcp | --mcp SERVER[,SERVER] QUESTION | --mcp off QUESTION
          %chat --retry [-t ID]
          %chat --fix [MORE] | --figure QUESTION | --agent QUESTION
          %chat --preview QUESTION    show the request it would send; send nothing
          %chat --compact [-t ID]     summarise the thread's oldest turns for what is sent
          %chat --over-budget QUESTION    send it although it crosses your budget

        A line that does not start with ``-`` is a question, whatever its
        words and its last character. After options, the rest of the line is
        the question; ``--`` ends the options. ``{name}``, ``{name.attr}`` and
        ``{name[key]}`` (``{In[3]}``, ``{Out[3]}``) are replaced by their value
        in the notebook; other braces stay as typed; ``{{name}}`` gives
        ``{name}``. ``@name`` (``@df``, ``@model.coef_``, ``@In[3]``,
        ``@Out[4]``) attaches a description of that object as context, apart
        from the question (not inside `code` or an e-mail address); a figure
        or image goes as a picture. With ``--agent`` the model may also look
        at the notebook and ask to run code: you answer Run, Edit or Reject.
        Tools of the MCP servers configured in ``mcp.json`` are offered too
        (``--mcp`` lists them; ``--mcp off`` or ``--mcp SERVER`` chooses for one
        question); a tool the server does not mark read-only asks Run / Reject.
        Errors are one line, with what to do.

        Settings: ``%config ChatMagics.model = "MODEL"`` (also base_url,
        provider, store, user, system, live, max_updates_per_second, tools,
        builtin_tools, agent, approval, instructions, context_budget, panel_area, prices,
        budget, kernel_budget, window, and ``options = {"max_tokens": 500}``), else the
        NBCHAT_* environment variables.

        ``--preview`` (with any question, ``%%chat``, ``--fix``, ``--agent``, ``-H``)
        shows the request the question would send and sends nothing: each
        message with its role and source, its tokens, the share of the model's
        window, the cost at ``prices``, the earlier turns the window leaves out,
        and where secrets were scrubbed (named, never shown). With a
        ``budget`` (dollars a thread may cost) or ``kernel_budget``, a question
        whose estimate would cross it stops with one line and sends nothing;
        ``--over-budget`` sends it (not past the administrator's hard cap).
        With ``window = "summarize"`` a thread that outgrows the model's window
        sends a summary of its oldest turns (made once, kept with the thread,
        ``--compact`` makes it now) instead of leaving them out; the thread
        keeps every turn.

        The panel: Enter sends, Shift+Enter adds a line, Escape stops the
        answer, Up recalls earlier questions. ``--panel --side`` (or
        ``%config ChatMagics.panel_area = "side"``) puts it in JupyterLab's
        right side area; each answer shows its model, tokens and time, with
        a cost estimate when ``prices`` (or NBCHAT_PRICES) has the model.

        Generation options (``--max-tokens``, ``--temperature``, ``--seed``,
        ``--stop``, ``--tool-choice``, ``--thinking BUDGET``, ``--no-cache``,
        ``-o KEY=VALUE``) apply to one question
        and are saved with its turn; with ``--set`` they are saved in the thread
        for its next turns (shown by ``--show``). Precedence: the question's,
        the thread's, ``ChatMagics.options``, then ``NBCHAT_OPTIONS``. An
        answer cut at the token limit says so; ``%chat --continue`` goes on.

        Examples::

          %chat What is a context manager?
          %chat -m llama3.2 Explain {df.shape} in one sentence
          %chat --error why does this happen?
          %chat Which columns of @df have missing values?
          %chat --figure Is the trend in this plot significant?
          %chat --fix
          %chat --agent What is the median price per city in df?
          %chat --answer run
          %%chat -n -s "You are a terse reviewer" --code
          Write a function that parses ISO dates.
          %chat -m claude-sonnet-4-5 --thinking 2048 Why is the sky blue?
          %%chat --max-tokens 300 --temperature 0.2 --seed 1
          Summarize this in three bullet points: {text}
          %chat --continue
          %chat --set --max-tokens 800 --builtin-tools off
        """
        try:
            result = self._run(line, cell)
        except NbchatError as err:
            raise UsageError(markup.for_terminal(str(err))) from err
        finally:
            self._use_agent = False
        if result is not None and detect_mode() == "text" and echoed(self.shell):
            return None  # a terminal would print an empty "Out[n]:" under the answer
        return result

    # -- dispatch ---------------------------------------------------------------
    def _run(self, line: str, cell: str | None) -> RenderResult | None:
        opts, text = self._parse(line, cell)
        if opts.help:
            print(self.chat_magic.__doc__)
            return None
        if opts.side and not opts.panel:
            raise UsageError("--side goes with --panel: %chat --panel --side")
        token_options = (opts.agent_scope, opts.agent_tools, opts.agent_days, opts.agent_approve)
        if opts.agent_token is None and any(v is not None for v in token_options):
            raise UsageError("--agent-scope, --agent-tools, --agent-days and --agent-approve "
                             "go with --agent-token LABEL")
        name = _form(opts, text)
        if name in COMMANDS and text and name not in TAKE_TEXT:
            raise UsageError(f"--{name} takes no question; got {text[:40]!r}")
        if not opts.preview:
            return HANDLERS[name](self, opts, text)
        check_preview(name, opts)
        with noting_scrubs() as self._noted:  # what describing the context scrubs, by name
            return HANDLERS[name](self, opts, text)

    def _parse(self, line: str, cell: str | None) -> tuple[Any, str]:
        """The parsed options, and the question: the rest of the line, then the cell body."""
        words, text = split_options(line, self._arity) if line.lstrip().startswith("-") else (
            [], line.strip())
        opts = self.chat_magic.parser.parse_args(words)
        if not opts.help and cell is not None and cell.strip():
            text = "\n".join(part for part in (text, cell.strip("\n").rstrip()) if part)
        return opts, text

    def _arity(self, word: str) -> int | None:
        """How many values follow an option word (for splitting options from the question)."""
        actions = self.chat_magic.parser._option_string_actions
        option = word.split("=", 1)[0]
        if "=" in word or (option[:2] != "--" and len(option) > 2):
            return 0  # --opt=value, -mMODEL
        if option not in actions:
            matches = [name for name in actions if name.startswith(option) and name[:2] == "--"]
            option = matches[0] if len(matches) == 1 else option
        action = actions.get(option)
        if action is None or action.nargs == 0:
            return 0
        if action.nargs == "?":
            return None
        return action.nargs if isinstance(action.nargs, int) else 1

    # -- asking -----------------------------------------------------------------
    def _cmd_ask(self, opts: Any, text: str) -> RenderResult | None:
        if not text:
            raise UsageError("ask something: %chat QUESTION, or %%chat with the question "
                             "in the cell; see %chat? for the options")
        return self._ask(text, opts)

    def _cmd_error(self, opts: Any, text: str) -> RenderResult | None:
        return self._ask(error_question(self.shell, text, opts), opts, interpolated=True)

    def _cmd_fix(self, opts: Any, text: str) -> RenderResult | None:
        error = fix_context(self.shell, opts, self.context_budget)
        opts.code = True
        return self._ask(fix_question(text), opts, context=[error])

    def _cmd_continue(self, opts: Any, text: str) -> RenderResult | None:
        if text or opts.history is not None or opts.new:
            raise UsageError("--continue goes on with the current thread's last answer; "
                             "give it no question, -H or -n")
        if self.thread_id is None and opts.thread is None:
            raise UsageError("no current thread to continue; ask something first")
        return self._ask(CONTINUE_QUESTION, opts, interpolated=True)

    def _ask(
        self, question: str, opts: Any, *, interpolated: bool = False, context: Any = ()
    ) -> RenderResult | None:
        items = [*context, *attached_context(self.shell, question, opts, self.context_budget)]
        if not (interpolated or opts.no_interpolate):
            question = _magic_context.interpolated(self.shell, question)
        self._use_agent = bool(opts.agent or self.agent)
        chat = self.chat
        options = flag_options(opts)
        if self._use_agent and chat.llm.template_has_tools() is False:
            model = opts.model or chat.llm.default_model()
            raise UsageError(
                f"the model {model} cannot use tools (its chat template has none), so --agent "
                f"cannot look at the notebook or run code: connect a model that can "
                f"(%env NBCHAT_BASE_URL=… then %chat --key, or NBCHAT_LOCAL_MODEL=a larger "
                f".gguf), or ask without --agent"
            )
        self._announce_context(chat, items)
        if opts.preview:
            show_preview(self, chat, question, opts, options, items)
            return None
        events = self._ask_events(chat, question, opts, options, items)
        result = self._shown(self._render(events, opts))
        if opts.code:
            code_to_next_cell(self.shell, result.text)
        return result

    def _announce_context(self, chat: Chat, items: list[Any]) -> None:
        """Give the Chat the instructions, prices and budgets; say in a line what goes along."""
        found = project_instructions(self.instructions)
        chat.instructions = found.system_text() if found is not None else ""
        from ...engine._usage import parse_prices

        chat.prices = parse_prices(dict(self.prices), source="ChatMagics.prices") or None
        chat.budget, chat.kernel_budget = self.budget, self.kernel_budget
        if items or found is not None:
            from ...base.content import context_line

            shown = [context_line(items)] if items else []
            print("; ".join(shown + ([found.summary] if found is not None else [])))

    def _ask_events(
        self, chat: Chat, question: str, opts: Any, options: dict[str, Any], items: list[Any]
    ) -> Any:
        """The turn's events: in a ChatHistory (-H), else in the thread the options name."""
        if opts.history is not None:
            if opts.thread is not None or opts.new:
                raise UsageError("-H asks with a ChatHistory, not in a thread: drop -t/-n")
            if opts.set or opts.builtin_tools or opts.window:
                raise UsageError("-H asks with a ChatHistory: there is no thread to save "
                                 "--set or --builtin-tools in; drop them")
            history = self._user_history(opts.history, opts.system)
            return chat.iter_ask_with_history(
                question, history, model=opts.model, options=options, context=items,
                mcp=opts.mcp, over_budget=opts.over_budget,
            )
        before = self.thread_id
        thread_id = self._thread_for(opts)
        if opts.set or opts.builtin_tools or opts.window:
            self._set_thread(opts, thread_id, quiet=True)
        try:
            return chat.iter_ask(
                thread_id, question, model=opts.model, options=options, context=items,
                mcp=opts.mcp, over_budget=opts.over_budget,
            )
        except OverBudget:
            if thread_id != before and opts.thread is None:  # made for a question not sent
                chat.delete_thread(thread_id)
                self.thread_id = before
            raise

    @staticmethod
    def _shown(result: RenderResult) -> RenderResult:
        """The rendered result; a failed turn's error as the cell's one-line error."""
        if result.error is None:
            return result
        message = str(result.error)
        if result.thread_id is not None:
            message += f" (the question is kept: %chat -t {result.thread_id} --retry asks again)"
        raise UsageError(message) from result.error

    def _render(self, events: Any, opts: Any) -> RenderResult:
        renderer = TurnRenderer(
            mode=self._mode(opts.no_stream), chat=self.chat, show_error=False,
            max_updates_per_second=self.max_updates_per_second, prompts=_show_prompts,
        )
        result = renderer.render(events)
        result.shown_in = execution_marker()
        return result

    def _mode(self, no_stream: bool) -> Mode | None:
        if self.live is None and not no_stream:
            return None
        if detect_mode() == "text":
            return "text"  # a terminal prints as it goes; display updates would repeat
        return "live" if self.live and not no_stream else "final"

    def _thread_for(self, opts: Any) -> int:
        if opts.thread is not None:
            if opts.new or opts.system is not None:
                raise UsageError("-t asks in an existing thread; -n and -s start a new one: "
                                 "use one or the other")
            return int(opts.thread)
        if opts.new or opts.system is not None or self.thread_id is None:
            self.thread_id = self.chat.new_thread(
                opts.model or self.model or None, system=opts.system or self.system or None
            )
        return self.thread_id

    def _user_history(self, name: str, system: str | None) -> ChatHistory:
        from ...engine.history import ChatHistory

        found, value = resolve(name, self.shell.user_ns if self.shell is not None else {})
        if not found:
            raise UsageError(f"-H {name}: no such variable in this notebook; "
                             f"make one with {name} = nbchat.ChatHistory()")
        if not isinstance(value, ChatHistory):
            raise UsageError(f"-H {name}: {name} is a {type(value).__name__}, not a "
                             f"ChatHistory; see chat.history(thread_id) or nbchat.ChatHistory()")
        if system is not None:
            value = value.copy()
            value.system = system
        return value

    # -- client tools -------------------------------------------------------------
    def _cmd_answer(self, opts: Any, text: str) -> RenderResult:
        if not text:
            raise UsageError("give the answer: %chat --answer VALUE (or --answer CALL VALUE)")
        chat = self.chat
        thread = opts.thread if opts.thread is not None else self.thread_id
        answer = tool_answer(chat, thread, text)
        if answer.runs_notebook_tool:
            self._use_agent = True  # the answer runs a notebook tool: its Chat has it
            chat = self.chat
        events = chat.iter_answer_tool_call(answer.thread_id, answer.value, call_id=answer.call_id)
        self.thread_id = answer.thread_id if self.thread_id is None else self.thread_id
        return self._shown(self._render(events, opts))

    def _cmd_retry(self, opts: Any, text: str) -> RenderResult:
        thread = opts.thread if opts.thread is not None else self.thread_id
        if thread is None:
            raise UsageError("no current thread to retry; say which: %chat -t ID --retry")
        return self._shown(self._render(self.chat.iter_retry(thread), opts))

    # -- thread settings ------------------------------------------------------------
    def _cmd_set(self, opts: Any, text: str) -> None:
        self._set_thread(opts)

    def _set_thread(self, opts: Any, thread_id: int | None = None, quiet: bool = False) -> None:
        """--set / --builtin-tools: save generation options or the tools switch in a thread."""
        thread_id = self._thread_for(opts) if thread_id is None else thread_id
        threads.save_thread_settings(self.chat, thread_id, opts, quiet=quiet)

    def _cmd_new(self, opts: Any, text: str) -> None:
        self.thread_id = self._thread_for(opts)
        model = self.chat.store.get(self.thread_id).model
        print(f"Thread {self.thread_id} ({model}) is now current.")

    # -- the endpoint, the panel, MCP ----------------------------------------------
    def _cmd_mcp(self, opts: Any, text: str) -> None:
        from ...mcp.tools import overview

        if text:
            raise UsageError("--mcp before a question names the servers to use, or off: "
                             "%chat --mcp files QUESTION; alone it lists them")
        print(markup.for_terminal(overview()))

    def _cmd_key(self, opts: Any, text: str) -> None:
        """Ask for the endpoint's key at a hidden prompt; keep it in this process only."""
        import getpass

        from IPython.core.error import StdinNotImplementedError

        from ...base._secrets import redact_url, remember

        if text:  # never echoed: it may be the key itself
            raise UsageError("--key takes nothing after it: run %chat --key alone and type "
                             "the key at its hidden prompt, not in the cell (cells are saved)")
        endpoint = self._endpoint()
        if not endpoint:
            raise UsageError("no endpoint is set for the key: set one first, e.g. "
                             "%env NBCHAT_BASE_URL=https://api.openai.com/v1, then %chat --key")
        try:
            key = getpass.getpass(KEY_PROMPT).strip()
        except StdinNotImplementedError:
            raise UsageError(KEY_NO_STDIN) from None
        except EOFError:
            key = ""
        if not key:
            raise UsageError("no key given; nothing changed")
        remember(key)
        self._session_key = (endpoint, key)
        self._key_version += 1
        print(f"The key for {redact_url(endpoint)} is set in this kernel's memory only; "
              f"it was not shown and is saved nowhere.")

    def _cmd_models(self, opts: Any, text: str) -> None:
        from ..cell._views import models_list

        models = self.chat.list_models()
        body, plain = models_list(models, self.chat.llm.default_model())
        display(markup.bundle(body, plain), raw=True)

    def _cmd_panel(self, opts: Any, text: str) -> None:
        try:
            from ..panel._side import side_panel
            from ..panel.widget import ChatPanel
        except ImportError as err:
            raise UsageError(f"the panel is not available: {err}; pip install nbchat") from err
        prices = dict(self.prices) or None
        if opts.side or self.panel_area == "side":
            panel = side_panel(self.chat, prices=prices)  # in a cell: a one-line note
        else:
            panel = ChatPanel(chat=self.chat, prices=prices)
        self._panels.add(panel)
        display(panel)


Handler = Callable[[ChatMagics, Any, str], "RenderResult | None"]

HANDLERS: dict[str, Handler] = {
    "list": threads.list_threads,
    "show": threads.show_thread,
    "use": threads.use_thread,
    "rename": threads.rename_thread,
    "delete": threads.delete_thread,
    "export": threads.export_thread,
    "search": threads.search_threads,
    "models": ChatMagics._cmd_models,
    "panel": ChatMagics._cmd_panel,
    "answer": ChatMagics._cmd_answer,
    "retry": ChatMagics._cmd_retry,
    "compact": compact_thread,
    "agents": agents.show_agents,
    "agent_token": agents.mint_token,
    "revoke_agent": agents.revoke_token,
    "key": ChatMagics._cmd_key,
    "mcp": ChatMagics._cmd_mcp,
    "error": ChatMagics._cmd_error,
    "fix": ChatMagics._cmd_fix,
    "continue": ChatMagics._cmd_continue,
    "set": ChatMagics._cmd_set,
    "new": ChatMagics._cmd_new,
    "ask": ChatMagics._cmd_ask,
}


def _form(opts: Any, text: str) -> str:
    """Which handler a parsed line is for: a command, a kind of question, or a plain question."""
    if opts.mcp == "":
        return "mcp"  # --mcp alone lists the servers; with a name it chooses them for a question
    commands = [name for name in COMMANDS if getattr(opts, name) not in (None, False)]
    if len(commands) > 1:
        raise UsageError(f"use one command at a time, not --{' and --'.join(commands)}")
    if commands:
        return commands[0]
    if opts.error:
        return "error"
    if opts.fix:
        return "fix"
    if opts.continue_:
        return "continue"
    if not text and (opts.set or opts.builtin_tools or opts.window):
        return "set"
    if not text and (opts.new or opts.system is not None):
        return "new"
    return "ask"


def _show_prompts(chat: Chat, calls: list[Any], **kwargs: Any) -> None:
    """Widget prompts for a suspended turn (ipywidgets loads only when one suspends)."""
    from ..cell.prompts import show_tool_prompts

    show_tool_prompts(chat, calls, **kwargs)


def load(ipython: Any) -> None:
    """Register ``%chat`` and its input transformer in ``ipython`` (idempotent)."""
    loaded = next((m for m in ipython.magics_manager.registry.values()
                   if isinstance(m, ChatMagics)), None)  # fmt: skip
    if loaded is None:
        loaded = ChatMagics(shell=ipython)
        ipython.register_magics(loaded)
    magics = weakref.ref(loaded)
    hand_over(ipython, lambda: magics().chat)  # type: ignore[union-attr]
    cleanup = ipython.input_transformers_cleanup
    # The auto-load startup file's stand-in hands over to the real transformer.
    name = protect_chat_questions.__name__
    cleanup[:] = [t for t in cleanup if getattr(t, "__name__", "") != name]
    cleanup.append(protect_chat_questions)
    set_notifier(show_note)


def unload(ipython: Any) -> None:
    """Remove ``%chat`` / ``%%chat`` and the transformer from ``ipython``."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("chat", None)
    for name, magics in list(manager.registry.items()):
        if isinstance(magics, ChatMagics):
            del manager.registry[name]
            if magics in ipython.configurables:
                ipython.configurables.remove(magics)
    cleanup = ipython.input_transformers_cleanup
    cleanup[:] = [t for t in cleanup if t is not protect_chat_questions]
    set_notifier(None)
    hand_over(ipython, None)


