"""``python -m nbchat keys set|list|remove``: connect an endpoint from a terminal, key once.

The key is read at a hidden prompt (or from standard input when it is not a
terminal, ``… keys set openai < keyfile``), kept by :mod:`nbchat.base.keys`
and never printed; the endpoint is written to the connections file
(:mod:`nbchat.base.connections`) without it.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from .base import connections
from .base._secrets import redact_url
from .base.connections import Choice, Connection, Connections, check_name, preset, update
from .base.errors import ConfigError, InputError

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    keys = sub.add_parser("keys", help="keys of connected endpoints: set, list, remove "
                                       "(kept in the system keyring, else a private file)")
    tasks = keys.add_subparsers(dest="task", required=True)
    put = tasks.add_parser("set", help="connect an endpoint and keep its key (asked hidden)")
    put.add_argument("name", help="the endpoint's name, e.g. openai, anthropic, work-ollama")
    put.add_argument("--kind", choices=list(connections.PRESETS),
                     help="what it is (default: the name, when it is one of these)")
    put.add_argument("--url", help="its base URL (needed for azure and compatible)")
    put.add_argument("--api-version", help="Azure OpenAI's api-version")
    tasks.add_parser("list", help="connected endpoints and where each key is kept (never a key)")
    remove = tasks.add_parser("remove", help="forget an endpoint's key")
    remove.add_argument("name")
    remove.add_argument("--endpoint", action="store_true", help="forget the endpoint too")


def run(args: argparse.Namespace) -> int:
    """Carry out ``keys TASK``; errors are one line on stderr, exit status 1."""
    from .base.markup import for_terminal

    try:
        return {"set": _set, "list": _list, "remove": _remove}[args.task](args)
    except (ConfigError, InputError) as err:
        print(f"nbchat: {for_terminal(str(err))}", file=sys.stderr)
        return 1


def _set(args: argparse.Namespace) -> int:
    from .base.keys import key_store

    name = check_name(args.name)
    known = connections.load().get(name)
    connection = _connection(name, args, known)
    key = _read_key(name)
    store = key_store()
    if key:
        store.set(name, key)
    elif preset(connection.kind or "compatible").needs_key:
        raise InputError(f"no key given for {name}; nothing changed")
    with update() as box:
        box[0] = _with(box[0], connection)
    kept = f"its key is kept in {store.where()}" if key else "with no key"
    print(f"Connected {name} ({redact_url(connection.base_url)}); {kept}. New kernels use "
          f"it without --key.")
    return 0


def _connection(name: str, args: argparse.Namespace, known: Connection | None) -> Connection:
    kind = args.kind or (known.kind if known else None) or (
        name if name in connections.PRESETS else "compatible")
    chosen = preset(kind)
    url = args.url or (known.base_url if known else "") or chosen.base_url
    if not url:
        raise InputError(f"{chosen.label} needs its URL: python -m nbchat keys set {name} "
                         f"--kind {kind} --url https://…")  # fmt: skip
    version = args.api_version or (known.api_version if known else None)
    return Connection(name, chosen.provider, url, kind, known.models if known else (), version)


def _with(found: Connections, connection: Connection) -> Connections:
    found = found.with_endpoint(connection)
    if found.chat is None and connection.models:
        found = Connections(found.endpoints, Choice(connection.name, connection.models[0]),
                            found.suggestions)  # fmt: skip
    return found


def _read_key(name: str) -> str:
    if sys.stdin.isatty():
        try:
            return getpass.getpass(f"API key for {name} (hidden; Enter for none): ").strip()
        except EOFError:
            return ""
    return sys.stdin.readline().strip()


def _list(args: argparse.Namespace) -> int:
    from .base.keys import key_store, stored_key

    found = connections.load_all()
    if not found.endpoints:
        print("No endpoint connected: python -m nbchat keys set openai (or anthropic, gemini, "
              "azure, ollama, compatible, local).")
        return 0
    where = key_store().where()
    for name, connection in found.endpoints.items():
        if connection.provided:
            kept = "provided by the administrator"
        else:
            kept = f"key in {where}" if stored_key(name) else "no key kept"
        chosen = " (chat)" if found.chat and found.chat.endpoint == name else ""
        print(f"{name}{chosen}  {connection.kind or connection.provider}  "
              f"{redact_url(connection.base_url)}  {kept}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    from .base.keys import key_store

    name = check_name(args.name)
    had = key_store().remove(name)
    if args.endpoint:
        with update() as box:
            box[0] = box[0].without(name)
    said = "key forgotten" if had else "no key was kept"
    print(f"{name}: {said}" + ("; endpoint removed." if args.endpoint else "."))
    return 0
