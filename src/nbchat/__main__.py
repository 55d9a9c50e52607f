"""The plain-terminal front end: ``python -m nbchat ask "What is 2+2?"``.

A third consumer of the same turn events the notebook renders; handy in
scripts and for seeing exactly what a turn does.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from . import _keys_cli
from .base._visible import TerminalStream, for_terminal
from .base.errors import InputError, InvalidToolAnswer, NbchatError
from .base.events import (
    ContextWindowed,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallPending,
    ToolResult,
    TurnFailed,
    TurnFinished,
)
from .base.options import check_options, parse_value
from .base.records import PendingCall
from .engine.chat import Answer, Chat

INDENT = "    "


def print_events(events: Iterable[Event], out: TextIO = sys.stdout) -> TurnFinished | None:
    """Write a turn's text as it arrives, tool activity on its own lines; the finish event.

    What the model or the endpoint wrote reaches the terminal with its control
    characters written as escapes (:func:`nbchat.base.markup.for_terminal`).
    """
    finished = None
    thinking = False
    stream = TerminalStream()
    for event in events:
        if type(event) is ReasoningDelta:  # the thinking, indented above the answer
            text = stream.feed(event.text)
            out.write(("" if thinking else INDENT) + text.replace("\n", "\n" + INDENT))
            thinking = True
            continue
        if type(event) is TextDelta:
            if thinking:
                out.write("\n\n")
                thinking = False
            out.write(stream.feed(event.text))
            out.flush()
            continue
        out.write(stream.close())
        _write_event(event, out)
        if isinstance(event, TurnFinished):
            finished = event
    out.write(stream.close() + "\n")
    return finished


def _write_event(event: Event, out: TextIO) -> None:
    """One line for an event other than text: tools, waiting calls, windows, endings."""
    if isinstance(event, ContextWindowed):
        if event.summarized_turns:
            out.write(f"[turns 1–{event.summarized_turns} sent as a summary]\n")
        if event.dropped_turns:
            out.write(f"[{event.dropped_turns} earlier turns left out to fit the context]\n")
    elif isinstance(event, ToolResult):
        out.write(f"\n[tool {for_terminal(event.call.name)}: {len(event.output)} chars]\n")
    elif isinstance(event, ToolCallPending):
        question = event.pending.question
        name = for_terminal(event.call.name)
        out.write(f"\n[waiting for your answer to {name}: {question}]\n")
    elif isinstance(event, TurnFailed):
        out.write(f"\nerror: {for_terminal(str(event.error))}\n")
    elif isinstance(event, TurnFinished):
        if event.status == "interrupted":
            out.write("\n[interrupted]")
        elif event.status == "incomplete":
            out.write(f"\n[{for_terminal(event.note.replace('`', ''))}]")


def _answer_interactively(chat: Chat, calls: Sequence[PendingCall]) -> None:
    """Ask at the terminal until every pending call is answered."""
    while calls:
        call = calls[0]
        try:
            reply = input(f"{call.question} > ")
        except EOFError:
            return
        try:
            stream = chat.iter_answer_tool_call(call.thread_id, reply, call_id=call.call_id)
        except InvalidToolAnswer as err:
            print(f"not accepted: {for_terminal(str(err))}", file=sys.stderr)
            continue
        print_events(stream)
        calls = chat.pending_calls(call.thread_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nbchat", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="ask a question in a thread (the newest, or a new one)")
    ask.add_argument("question")
    ask.add_argument("-t", "--thread", type=int, help="thread id")
    ask.add_argument("-n", "--new", action="store_true", help="start a new thread")
    ask.add_argument("-m", "--model", help="model for a new thread")
    ask.add_argument("--max-tokens", type=int, help="stop the answer after this many tokens")
    ask.add_argument("--temperature", type=float, help="sampling temperature")
    ask.add_argument("--seed", type=int, help="sampling seed")
    ask.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                     help="any other generation option (repeatable)")
    sub.add_parser("list", help="list your threads")
    show = sub.add_parser("show", help="print a thread")
    show.add_argument("thread", type=int)
    sub.add_parser("models", help="models the endpoint offers")
    answer = sub.add_parser("answer", help="answer a pending client-tool call")
    answer.add_argument("thread", type=int)
    answer.add_argument("value")
    answer.add_argument("--call", help="the call id when several wait")
    _store_parser(sub)
    _agent_parsers(sub)
    _keys_cli.add_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "keys":
        return _keys_cli.run(args)
    if args.command == "store":
        return _store(args)
    if args.command == "mcp":
        from .agents.bridge import main as bridge

        return bridge(args.url)
    if args.command == "agents":
        return _agents(args)
    chat = Chat()
    try:
        return _run(chat, args)
    except NbchatError as err:
        print(f"nbchat: {for_terminal(str(err))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\n[interrupted; the partial answer is kept]", file=sys.stderr)
        return 130


def _store_parser(sub: Any) -> None:
    store = sub.add_parser("store", help="copy threads between stores, or check one")
    tasks = store.add_subparsers(dest="task", required=True)
    migrate = tasks.add_parser(
        "migrate", help="copy every thread of every user (or one) from SRC to DST, keeping ids; "
        "running it again copies only what is missing",
    )  # fmt: skip
    migrate.add_argument("source", metavar="SRC", help="a store folder or postgresql:// URL")
    migrate.add_argument("destination", metavar="DST", help="a store folder or postgresql:// URL")
    migrate.add_argument("--user", help="only this user's threads")
    check = tasks.add_parser("check", help="read every thread of a store and report problems")
    check.add_argument(
        "location", nargs="?", metavar="STORE",
        help="a folder or postgresql:// URL (default: NBCHAT_STORE_URL, else NBCHAT_STORE)",
    )  # fmt: skip
    check.add_argument("--user", help="only this user's threads")


def _agent_parsers(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="nbchat's MCP endpoint over stdio, for agents that start "
                         "a command (the token comes from NBCHAT_AGENT_TOKEN)")  # fmt: skip
    mcp.add_argument("--url", help="the endpoint, e.g. http://127.0.0.1:8888/nbchat/mcp "
                     "(default: the one Jupyter server running here)")  # fmt: skip
    agents = sub.add_parser("agents", help="tokens for outside agents: mint, list, revoke")
    tasks = agents.add_subparsers(dest="task", required=True)
    mint = tasks.add_parser("mint", help="mint a token for an agent; it is shown once")
    mint.add_argument("label")
    mint.add_argument("--scope", default="", help="notebooks or folders it may touch, "
                      "comma-separated, relative to the server's root (default: all)")  # fmt: skip
    mint.add_argument("--tools", default="read,edit,execute",
                      help="tool classes: read, edit, execute (comma-separated)")
    mint.add_argument("--days", type=float, default=30, help="days until it expires")
    mint.add_argument("--approve", choices=("read-only", "always"), default="read-only",
                      help="read-only: its reads run at once, its changes ask; always: all ask")
    mint.add_argument("--secret-file", metavar="PATH", help="write the secret to this new "
                      "file, readable by you only, instead of the terminal")  # fmt: skip
    tasks.add_parser("list", help="list the tokens (never their secrets)")
    revoke = tasks.add_parser("revoke", help="revoke a token")
    revoke.add_argument("id", help="the token's id (or label)")


def _agents(args: argparse.Namespace) -> int:
    from .agents.tokens import TokenStore
    from .base.config import default_user

    tokens = TokenStore(default_user())
    try:
        if args.task == "mint":
            return _mint(tokens, args)
        if args.task == "revoke":
            done = tokens.revoke(args.id)
            print(f"Revoked {done.id} ({for_terminal(done.label)}).")
        else:
            for token in tokens.tokens():
                scope = ",".join(p or "*" for p in token.paths)
                print(f"{token.id}  {for_terminal(token.label)}  {','.join(token.classes)}  "
                      f"{for_terminal(scope)}  {token.state()}")  # fmt: skip
    except NbchatError as err:
        print(f"nbchat: {for_terminal(str(err))}", file=sys.stderr)
        return 1
    return 0


NOT_A_TERMINAL = (
    "nbchat: an agent token's secret is shown only on a terminal, never in output a notebook "
    "keeps, so nothing was minted: run this in a terminal, or mint it with %chat --agent-token "
    "LABEL (shown once, in a widget that is not saved), or add --secret-file PATH (a new file "
    "only you can read)"
)


def _mint(tokens: Any, args: argparse.Namespace) -> int:
    """Mint a token; its secret shown on a terminal only, or written to a new private file."""
    if args.secret_file is None and not _on_a_terminal():
        print(NOT_A_TERMINAL, file=sys.stderr)
        return 1
    private = None if args.secret_file is None else _private_file(args.secret_file)
    try:
        minted = tokens.mint(args.label, paths=args.scope.split(","),
                             classes=args.tools.split(","), days=args.days,
                             approve=args.approve)  # fmt: skip
    except NbchatError:
        if private is not None:
            os.close(private)
            os.unlink(args.secret_file)
        raise
    said = f"Agent token {minted.token.id} for {for_terminal(repr(minted.token.label))}"
    if private is None:
        print(f"{said}; it is shown only now:\n{minted.secret}", flush=True)
        return 0
    with os.fdopen(private, "w", encoding="utf-8") as file:
        file.write(minted.secret + "\n")
    print(f"{said}; its secret is in {for_terminal(args.secret_file)}, readable by you only.")
    return 0


def _on_a_terminal() -> bool:
    """Whether stdout is a terminal a person reads, not a kernel's.

    A notebook's ``!python -m nbchat …`` runs on a pseudo-terminal too, whose
    output the notebook keeps: under a Jupyter kernel, no output is a terminal.
    """
    from .base.config import ENV_KERNEL_PARENT

    return sys.stdout.isatty() and not os.environ.get(ENV_KERNEL_PARENT)


def _private_file(path: str) -> int:
    """A new file at ``path`` that only its owner may read; InputError if it exists."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InputError(f"{path} exists; name a new file for the secret") from None
    except OSError as exc:
        raise InputError(f"cannot create {path}: {exc.strerror}") from None


def _store(args: argparse.Namespace) -> int:
    from .store.copy import check_store, migrate_store

    try:
        if args.task == "migrate":
            print(migrate_store(args.source, args.destination, args.user))
            return 0
        report = check_store(args.location, args.user)
    except NbchatError as err:
        print(f"nbchat: {err}", file=sys.stderr)
        return 1
    print(report)
    return 0 if report.ok else 1


def _run(chat: Chat, args: argparse.Namespace) -> int:
    if args.command == "list":
        for info in chat.threads():
            title = for_terminal(info.title or "(untitled)")
            print(f"{info.id:>4}  {title}  [{for_terminal(info.model)}, {info.turns} turns]")
    elif args.command == "models":
        print(for_terminal("\n".join(chat.list_models())))
    elif args.command == "show":
        for query, reply in chat.thread_details(args.thread):
            print(for_terminal(f"> {query}\n\n{reply}\n"))
    elif args.command == "answer":
        print_events(chat.iter_answer_tool_call(args.thread, args.value, call_id=args.call))
    else:
        thread = args.thread
        if thread is None and not args.new:
            thread = next(iter(chat.thread_list()), (None, ""))[0]
        if thread is None:
            thread = chat.new_thread(args.model)
        stream: Answer = chat.iter_ask(thread, args.question, options=_options(args))
        finished = print_events(stream)
        if finished is not None and finished.status == "suspended" and sys.stdin.isatty():
            _answer_interactively(chat, chat.pending_calls(thread))
        elif finished is None:
            return 1
    return 0


def _options(args: argparse.Namespace) -> dict[str, object]:
    options: dict[str, object] = {}
    for pair in args.option:
        key, _, value = pair.partition("=")
        options[key.strip()] = parse_value(value.strip())
    flags = {"max_tokens": args.max_tokens, "temperature": args.temperature, "seed": args.seed}
    options.update({k: v for k, v in flags.items() if v is not None})
    return check_options(options, source="options")


if __name__ == "__main__":
    sys.exit(main())
