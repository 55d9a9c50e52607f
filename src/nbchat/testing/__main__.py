"""Serve the scripted model from the command line.

``python -m nbchat.testing [--host H] [--port P] [--script FILE.json] [--api-key KEY]``
prints the OpenAI base URL, then the Ollama one, and serves until SIGINT or
SIGTERM. A script file is a JSON list of replies (``Reply.to_dict`` form), or
an object with that list under ``"replies"``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from ._script import load_script
from ._server import DEFAULT_MODELS, ScriptedServer


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nbchat.testing",
        description="A scripted OpenAI- and Ollama-compatible chat server on loopback.",
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    parser.add_argument("--script", metavar="FILE.json", help="replies to answer with")
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    parser.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help=f"a model to offer, repeatable (default: {', '.join(DEFAULT_MODELS)})",
    )
    args = parser.parse_args(argv)
    try:
        replies = load_script(args.script) if args.script else []
    except (OSError, ValueError, TypeError) as exc:
        parser.error(f"cannot load the script: {exc}")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = ScriptedServer(
        *replies,
        host=args.host,
        port=args.port,
        models=args.models or DEFAULT_MODELS,
        api_key=args.api_key,
    )
    with server:
        print(server.url, flush=True)
        print(server.ollama_url, flush=True)
        while not stop.wait(0.5):  # short waits, so signals are handled on Windows too
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
