"""The local model's server process: llama.cpp's own HTTP server, run in-process by xllamacpp.

:mod:`nbchat.llm.local` starts ``python -m nbchat.llm._local_server --model PATH
--alias NAME --port N ...`` detached, its output going to a log file, and stops
it with a signal. ``xllamacpp.Server`` returns once it listens and serves from
its own threads; this process then only waits. Only this module imports
xllamacpp, so a kernel never loads llama.cpp.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Sequence
from typing import Any

# llama.cpp's default (1.0, no penalty) lets SmolLM2 repeat itself until the
# token limit; 1.1 is what llama-cpp-python used. A request may still send its own.
REPEAT_PENALTY = 1.1
# Past prompts kept for reuse; llama.cpp's 8 GiB default grows ~40 MiB a new
# 2,000-token prompt in a server that lives for days.
PROMPT_CACHE_MIB = 256


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one GGUF model on ``--host:--port`` until the process is stopped."""
    args = _parser().parse_args(argv)
    try:
        import xllamacpp
    except ImportError as exc:
        print(f"nbchat: {exc}; run pip install 'nbchat[local]'", file=sys.stderr)
        return 1
    try:
        server = xllamacpp.Server(_params(xllamacpp, args))
    except RuntimeError as exc:  # the lines above it in the log say why
        print(f"nbchat: the local model server did not start: {exc}", file=sys.stderr)
        return 1
    print(f"nbchat: serving {args.alias} at {server.listening_address}", file=sys.stderr)
    threading.Event().wait()  # the server's threads answer; a signal ends the process
    return 0


def _params(xllamacpp: Any, args: argparse.Namespace) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.context
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_parallel = 1  # one answer at a time: another kernel's request waits its turn
    params.use_jinja = True  # the model's own chat template
    params.sampling.penalty_repeat = REPEAT_PENALTY
    params.cache_ram_mib = PROMPT_CACHE_MIB
    params.ui = False
    params.cors_origins = ""  # kernels call it, never a browser page
    return params


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nbchat.llm._local_server")
    parser.add_argument("--model", required=True, help="the .gguf file")
    parser.add_argument("--alias", required=True, help="the model name clients ask for")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--context", type=int, required=True, help="context size in tokens")
    parser.add_argument("--threads", type=int, required=True)
    return parser


if __name__ == "__main__":
    sys.exit(main())
