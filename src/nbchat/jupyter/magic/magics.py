"""``%chat`` / ``%%chat``: ask in threads, manage them, answer client tools.

``load(ipython)`` registers :class:`ChatMagics` (what ``%load_ext nbchat`` and
the auto-load startup file end up calling) and the input transformer that
keeps ``%chat What is Python?`` a question; ``unload`` removes both. Nothing
here talks to the network or imports ipywidgets before it is needed.

:meth:`ChatMagics._run` parses a line and hands it to one handler from
``HANDLERS`` (a command, a kind of question, or a plain question). The magic's
settings are the traits of its base class (:mod:`._settings`); the Chats they
build, and the key given with ``--key``, are kept by :mod:`._chats`. The
handlers that do not need the current thread live beside this module: the
thread commands (:mod:`._thread_commands`), the session's commands — key,
models, panel, MCP (:mod:`._session_commands`) — placing an ``--answer``
(:mod:`._answering`), what a question takes from the notebook
(:mod:`._context`), the declared options (:mod:`._options`), the line's syntax
(:mod:`._syntax`) and what it reads of the shell (:mod:`._shell`). What stays
here is asking: a question, a fix, an answer, a retry, in the current thread.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, magics_class, no_var_expand

from ...base import markup
from ...base._notices import set_notifier
from ...base._secrets import Scrubbed, noting_scrubs
from ...base.errors import NbchatError, OverBudget, StaleProposal
from .._loaded import hand_over
from ..cell.render import Mode, RenderResult, TurnRenderer, detect_mode, execution_marker
from . import _context as _magic_context
from . import _notebook_commands as notebook_commands
from . import _session_commands as session
from . import _thread_commands as threads
from ._answering import answer_all_but_last, proposal_answers, tool_answer
from ._chats import SessionChats
from ._context import (
    attached_context,
    code_to_next_cell,
    error_question,
    project_instructions,
    user_history,
)
from ._notes import show_note
from ._options import COMMANDS, TAKE_TEXT, chat_arguments, flag_options, handler_name
from ._preview_commands import check_preview, compact_thread, show_preview
from ._settings import ChatSettings
from ._shell import echoed
from ._syntax import option_arity, protect_chat_questions, split_options

if TYPE_CHECKING:
    from ...engine.chat import Chat

__all__ = ["ChatMagics", "load", "protect_chat_questions", "unload"]

CONTINUE_QUESTION = (
    "Continue your previous answer exactly where it stopped, without repeating any of it."
)


@magics_class
class ChatMagics(ChatSettings):
    """The ``%chat`` magic, one per shell; it keeps the session's current thread.

    Settings are traits (``%config ChatMagics.model = "llama3.2"``); unset ones
    come from the ``NBCHAT_*`` environment variables, read again when they change.
    """

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.thread_id: int | None = None
        self.chats = SessionChats(self, on_new_store=self._forget_thread)
        self.panels: weakref.WeakSet[Any] = weakref.WeakSet()  # the panels %chat --panel opened
        self._use_agent = False
        self._noted: list[Scrubbed] = []  # while a --preview is built: the scrubs made for it

    @property
    def chat(self) -> Chat:
        """The Chat these magics use, rebuilt when a setting or NBCHAT_* variable changes.

        While an ``--agent`` question (or an answer to its ``run_code``) runs,
        it is a second Chat that also offers the notebook tools.
        """
        return self.chats.with_notebook_tools() if self._use_agent else self.chats.plain()

    def notebook_chat(self) -> Chat:
        """The Chat that offers the notebook tools (``--agent``'s): it answers their calls."""
        return self.chats.with_notebook_tools()

    def side_panel(self, *, focus: bool = True) -> Any:
        """The side panel on this Chat, as ``%chat --panel --side`` opens it (not displayed)."""
        return session.panel_for(self, side=True, focus=focus)

    def _forget_thread(self) -> None:
        self.thread_id = None

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
          %chat --with AGENT QUESTION  your coding agent (claude, codex, gemini) answers
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
        name = handler_name(opts, text)
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
        return option_arity(self.chat_magic.parser, word)

    # -- asking -----------------------------------------------------------------
    def _cmd_ask(self, opts: Any, text: str) -> RenderResult | None:
        agent = opts.with_ or threads.agent_asked(self, opts)
        if agent:  # a coding agent's session answers, not nbchat's model
            from ..agents._hosting import ask_agent

            return ask_agent(self, opts, text, agent)
        if not text:
            raise UsageError("ask something: %chat QUESTION, or %%chat with the question "
                             "in the cell; see %chat? for the options")
        return self._ask(text, opts)

    def _cmd_error(self, opts: Any, text: str) -> RenderResult | None:
        return self._ask(error_question(self.shell, text, opts), opts, interpolated=True)

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
        if opts.mode:  # the thread's mode from now on, and the notebook tools for this question
            notebook_commands.set_mode(self, opts, "")
        self._use_agent = bool(opts.agent or self.agent or opts.mode)
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
            history = user_history(self.shell, opts.history, opts.system)
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
        notebook_commands.offer_undo(self, result)
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

    # -- client tools -------------------------------------------------------------
    def _cmd_answer(self, opts: Any, text: str) -> RenderResult:
        if not text:
            raise UsageError("give the answer: %chat --answer VALUE (or --answer CALL VALUE)")
        chat = self.chat
        thread = opts.thread if opts.thread is not None else self.thread_id
        several = proposal_answers(chat, thread, text)
        if several:  # accept or reject several proposals: each in turn, the last resumes
            self._use_agent = True
            answer_all_but_last(self.chat, several)
            return self._answered(self.chat, several[-1], opts)
        answer = tool_answer(chat, thread, text)
        if answer.runs_notebook_tool:
            self._use_agent = True  # the answer runs a notebook tool: its Chat has it
            chat = self.chat
        return self._answered(chat, answer, opts)

    def _answered(self, chat: Chat, answer: Any, opts: Any) -> RenderResult:
        try:
            events = chat.iter_answer_tool_call(answer.thread_id, answer.value,
                                                call_id=answer.call_id)  # fmt: skip
        except StaleProposal as stale:  # the proposal again, on the cell's new text
            again = [f"? {c.question}" for c in chat.pending_calls(answer.thread_id)
                     if answer.call_id in (None, c.call_id)]  # fmt: skip
            raise UsageError("\n".join([str(stale), *again])) from None
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


Handler = Callable[[ChatMagics, Any, str], "RenderResult | None"]


def _agents(name: str) -> Handler:
    """The outside agents' command ``name``, imported when it is first used (not by a question)."""

    def handler(magics: ChatMagics, opts: Any, text: str) -> RenderResult | None:
        from ..agents import _commands

        return getattr(_commands, name)(magics, opts, text)

    return handler

HANDLERS: dict[str, Handler] = {
    "list": threads.list_threads,
    "show": threads.show_thread,
    "use": threads.use_thread,
    "rename": threads.rename_thread,
    "delete": threads.delete_thread,
    "export": threads.export_thread,
    "search": threads.search_threads,
    "models": session.list_models,
    "panel": session.open_panel,
    "answer": ChatMagics._cmd_answer,
    "retry": ChatMagics._cmd_retry,
    "compact": compact_thread,
    "undo": notebook_commands.undo,
    "mode": notebook_commands.set_mode,
    "agents": _agents("show_agents"),
    "agent_token": _agents("mint_token"),
    "revoke_agent": _agents("revoke_token"),
    "key": session.ask_key,
    "mcp": session.list_mcp,
    "error": ChatMagics._cmd_error,
    "fix": notebook_commands.fix,
    "continue": ChatMagics._cmd_continue,
    "set": ChatMagics._cmd_set,
    "new": ChatMagics._cmd_new,
    "ask": ChatMagics._cmd_ask,
}


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
    hand_over(ipython, loaded)
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


