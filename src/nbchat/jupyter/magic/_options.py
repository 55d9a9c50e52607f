"""The options ``%chat`` declares, and the generation options its flags give.

:func:`chat_arguments` puts the declarations on the magic, where IPython's
``@magic_arguments`` builds the parser and the ``%chat?`` help from them, in
the order listed (groups as they appear). :func:`flag_options` turns the
generation flags of a parsed line into checked options for the engine, and
:func:`handler_name` says which handler a parsed line is for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument, argument_group, magic_arguments

from ...base.options import check_options, parse_value

COMMANDS = (
    "list", "show", "use", "rename", "delete", "models", "export", "panel", "answer", "retry",
    "search", "key", "compact", "agents", "agent_token", "revoke_agent", "undo",
)  # fmt: skip
# the commands that read the text after them
TAKE_TEXT = ("rename", "search", "answer", "key", "agent_token")

_DECLARATIONS: tuple[Callable[[Any], Any], ...] = (
    magic_arguments(name="chat"),
    argument_group("Asking"),
    argument("-t", "--thread", type=int, metavar="ID",
             help="Ask in thread ID (this time only; --use switches)."),
    argument("-n", "--new", action="store_true",
             help="Start a new thread and make it current (alone: just start it)."),
    argument("-m", "--model", metavar="MODEL",
             help="The model: of the new thread, or for this question only."),
    argument("-s", "--system", metavar="SYSTEM",
             help="Start a new thread with this system prompt (with -H: for this question)."),
    argument("-H", "--history", metavar="VAR",
             help="Ask with the ChatHistory in variable VAR; no thread is touched."),
    argument("--preview", action="store_true",
             help="Show the exact request the question would send (messages, sources, tokens, "
                  "window share, cost, scrubbed secrets) and send nothing."),
    argument("--over-budget", action="store_true",
             help="Send the question even though its estimated cost crosses your budget "
                  "(the yes to the line that stopped it; not past an administrator's hard cap)."),
    argument("--no-stream", action="store_true", help="Render the answer once, at the end."),
    argument("--no-interpolate", action="store_true", help="Send {braces} exactly as typed."),
    argument("--code", action="store_true",
             help="Put the answer's first code block into a new cell below."),
    argument("--error", "--explain", action="store_true",
             help="Ask about the last exception of this session (with its traceback)."),
    argument("--continue", dest="continue_", action="store_true",
             help="Ask the model to go on with its last answer (one cut at the token limit)."),
    argument_group("Context"),
    argument("--fix", action="store_true",
             help="Attach the last exception, its traceback and the failing cell; the "
                  "answer's code goes into a new cell below (with the notebook agent on, the "
                  "fix is a proposal on that cell)."),
    argument("--figure", action="store_true", help="Attach the last figure as an image."),
    argument("--context-budget", type=int, metavar="TOKENS",
             help="At most this many tokens for each @name description (default 2000)."),
    argument("--agent", action="store_true",
             help="Let the model look at the notebook (variables, cells, last error) and run "
                  "code once you say yes."),
    argument_group("Generation (for this question; --set saves them in the thread)"),
    argument("--max-tokens", type=int, metavar="N", help="Stop the answer after N tokens."),
    argument("--temperature", type=float, metavar="T", help="Sampling temperature (0-2)."),
    argument("--top-p", type=float, metavar="P", help="Nucleus sampling (0-1)."),
    argument("--seed", type=int, metavar="N", help="Sampling seed, for repeatable answers."),
    argument("--stop", action="append", metavar="TEXT", help="Stop at TEXT (repeatable)."),
    argument("--tool-choice", metavar="CHOICE",
             help="auto, none, required, or a tool's name to make the model call it."),
    argument("--thinking", type=int, metavar="BUDGET",
             help="Let the model think first, up to BUDGET tokens (Anthropic; 1024 or more)."),
    argument("--no-cache", action="store_true",
             help="Send no prompt-cache breakpoints (Anthropic caches by default)."),
    argument("-o", "--option", action="append", metavar="KEY=VALUE",
             help="Any other option, passed to the endpoint (e.g. -o num_ctx=8192)."),
    argument("--set", action="store_true",
             help="Save the generation options given with it in the thread (alone: "
             "for its next turns)."),
    argument("--builtin-tools", choices=("on", "off"),
             help="Offer the built-in client tools in this thread (saved)."),
    argument("--window", choices=("drop", "summarize"),
             help="When this thread outgrows the model's window: drop its oldest turns from "
                  "what is sent, or summarize them (saved in the thread)."),
    argument_group("Threads"),
    argument("--list", action="store_true", help="List your threads."),
    argument("--show", nargs="?", const="", metavar="ID",
             help="Show a thread's conversation (the current one without ID)."),
    argument("--search", action="store_true",
             help="Find TEXT in your threads, newest first: --search TEXT."),
    argument("--use", type=int, metavar="ID", help="Make thread ID the current thread."),
    argument("--rename", type=int, metavar="ID", help="Retitle thread ID: --rename ID TITLE."),
    argument("--delete", type=int, metavar="ID", help="Delete thread ID."),
    argument("--compact", action="store_true",
             help="Write now the summary of the thread's oldest turns that long threads send "
                  "with ChatMagics.window = 'summarize' (one request; kept with the thread)."),
    argument("--export", nargs=2, metavar=("ID", "PATH"),
             help="Write thread ID to PATH: .md (Markdown) or .ipynb (a notebook)."),
    argument_group("Other"),
    argument("--models", action="store_true", help="List the models the endpoint offers."),
    argument("--mcp", nargs="?", const="", metavar="SERVERS",
             help="Alone: list the MCP servers, their state and their tools. Before a "
                  "question: offer only these servers' tools (comma-separated), or off."),
    argument("--key", action="store_true",
             help="Give the endpoint's API key at a hidden prompt; it is kept in this "
                  "kernel's memory only, never shown or saved."),
    argument("--panel", action="store_true", help="Open the chat panel widget."),
    argument("--side", action="store_true",
             help="With --panel: in JupyterLab's right side area (one per kernel)."),
    argument("--answer", action="store_true",
             help="Answer a waiting client-tool call: --answer [CALL] VALUE; a proposal: "
                  "--answer accept|reject [CELL…] (accept 1 3: those chunks)."),
    argument_group("The notebook agent"),
    argument("--mode", choices=("ask", "plan", "accept-edits"),
             help="The thread's mode: ask (every change and run asks), plan (reads only), "
                  "accept-edits (changes land, undoable; runs ask)."),
    argument("--undo", nargs="?", type=int, const=-1, metavar="TURN",
             help="Put back the cells a turn changed (default: the last that changed any)."),
    argument("--force", action="store_true",
             help="With --undo: put back cells you changed since, too."),
    argument_group("Outside agents (MCP clients such as Claude Code or Codex)"),
    argument("--agents", action="store_true",
             help="List agent tokens, and show the agents' calls waiting for this notebook."),
    argument("--agent-token", metavar="LABEL",
             help="Mint a token for an outside agent (shown once): --agent-token LABEL."),
    argument("--agent-scope", metavar="PATHS",
             help="With --agent-token: the notebooks or folders it may touch "
                  "(comma-separated, relative to the server's root; default all)."),
    argument("--agent-tools", metavar="CLASSES",
             help="With --agent-token: read, edit, execute (comma-separated; default all)."),
    argument("--agent-days", type=float, metavar="DAYS",
             help="With --agent-token: days until it expires (default 30)."),
    argument("--agent-approve", choices=("read-only", "always"),
             help="With --agent-token: read-only (default): its reads run at once and "
                  "changes ask; always: its reads ask too."),
    argument("--revoke-agent", metavar="ID", help="Revoke the agent token ID."),
    argument_group("Coding agents in the chat (ACP: Claude Code, Codex, Gemini CLI)"),
    argument("--with", dest="with_", metavar="AGENT",
             help="Ask your coding agent (claude, codex, gemini, or one in agents.json) in a "
                  "thread of its own; every permission it asks waits for your answer."),
    argument("--retry", action="store_true",
             help="Ask the last question of the thread again after it failed or was "
                  "interrupted (answers you gave to its tool calls are sent again)."),
    argument("-h", "--help", action="store_true", help="Show this help."),
    argument("text", nargs="*", metavar="QUESTION",
             help="The question: the rest of the line, or the cell body (exactly as typed)."),
)


def chat_arguments(magic: Any) -> Any:
    """Declare ``%chat``'s options on ``magic``, as the same decorators stacked above it would."""
    for declare in reversed(_DECLARATIONS):
        magic = declare(magic)
    return magic


def flag_options(opts: Any) -> dict[str, Any]:
    """The generation options given as flags, checked (a bad value names the flag's option)."""
    options: dict[str, Any] = {}
    for pair in opts.option or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-o takes KEY=VALUE (e.g. -o num_ctx=8192), got {pair!r}")
        options[key.strip()] = parse_value(value.strip())
    flags = {"max_tokens": opts.max_tokens, "temperature": opts.temperature,
             "top_p": opts.top_p, "seed": opts.seed, "tool_choice": opts.tool_choice,
             "thinking": opts.thinking,
             "prompt_cache": False if opts.no_cache else None}  # fmt: skip
    options.update({k: v for k, v in flags.items() if v is not None})
    if opts.stop:
        options["stop"] = opts.stop[0] if len(opts.stop) == 1 else list(opts.stop)
    return check_options(options, source="%chat")


def handler_name(opts: Any, text: str) -> str:
    """Which handler a parsed line is for: a command, a kind of question, or a plain question."""
    if opts.mcp == "":
        return "mcp"  # --mcp alone lists the servers; with a name it chooses them for a question
    commands = [name for name in COMMANDS
                if getattr(opts, name) is not None and getattr(opts, name) is not False]
    if len(commands) > 1:
        raise UsageError(f"use one command at a time, not --{' and --'.join(commands)}")
    if commands:
        return commands[0]
    if opts.mode and not text:
        return "mode"
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
