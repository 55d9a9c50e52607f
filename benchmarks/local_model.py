"""Benchmark nbchat's streaming client against a bare httpx loop, on the local model.

    python benchmarks/local_model.py              # 5 runs each, alternating
    python benchmarks/local_model.py --runs 9 --max-tokens 200

Both sides send the same request body (the one nbchat builds, with the same
``max_tokens`` and ``temperature``) to the same llama.cpp server
(``nbchat[local]``: xllamacpp, started if none runs, stopped again if this
script started it), over one kept-alive connection each. Measured per run: time to first
token (request sent → first text delta) and tokens per second after the first
token (llama.cpp sends one token per chunk), pooled over the runs. nbchat
decodes with its SSE decoder into ``TextDelta`` events; the bare loop uses
``httpx.iter_lines`` and ``json.loads``. Runs alternate so that drift in the
server's speed hits both.

Also measured: the decode rate for each thread count the server could get
(1, nbchat's choice, every CPU), on an idle machine and beside one process
that keeps a CPU busy (what a shared or working machine looks like); the
prompt tokens the built-in client tools add to a request (as the server
counts them); and the time to pick the window of a 10,000-turn thread that
fits a 4,096-token context.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from nbchat.base.config import Settings
from nbchat.base.events import TextDelta
from nbchat.engine.history import ChatHistory
from nbchat.llm import LLMClient, local
from nbchat.llm.openai import OpenAIProvider
from nbchat.tools import BUILTIN_CLIENT_TOOLS

PROMPT = "Count from 1 to 100, separated by commas."


@dataclass(frozen=True)
class Run:
    ttft: float  # seconds
    tokens: int
    generating: float  # seconds from the first token to the end

    @property
    def rate(self) -> float:
        """Tokens per second after the first."""
        return (self.tokens - 1) / self.generating if self.generating else 0.0


def measure(chunks: Callable[[], Iterator[str]]) -> Run:
    """Time one streamed answer; ``chunks`` yields its text pieces."""
    start = time.perf_counter()
    first = None
    tokens = 0
    for _ in chunks():
        tokens += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    if first is None:
        raise RuntimeError("the server sent no text")
    return Run(first - start, tokens, end - first)


def via_nbchat(
    client: LLMClient, messages: list[dict[str, Any]], model: str, options: dict[str, Any]
) -> Iterator[str]:
    for event in client.stream(messages, model=model, options=options):
        if isinstance(event, TextDelta):
            yield event.text


def via_httpx(http: httpx.Client, url: str, body: dict[str, Any]) -> Iterator[str]:
    with http.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            choices = json.loads(payload).get("choices") or [{}]
            content = (choices[0].get("delta") or {}).get("content")
            if content:
                yield content


def summarize(name: str, runs: list[Run]) -> tuple[float, float]:
    """Median time to first token; tokens per second pooled over all runs."""
    ttft = statistics.median(r.ttft for r in runs)
    rate = sum(r.tokens - 1 for r in runs) / sum(r.generating for r in runs)
    print(
        f"{name:7} TTFT median {ttft * 1000:6.1f} ms   {rate:6.1f} tok/s   "
        f"(per run, TTFT ms / tokens / tok/s: "
        f"{'  '.join(f'{r.ttft * 1000:.0f}/{r.tokens}/{r.rate:.0f}' for r in runs)})"
    )
    return ttft, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each side (default 5)")
    parser.add_argument(
        "--max-tokens", type=int, default=200, help="max_tokens on both sides (default 200)"
    )
    args = parser.parse_args()
    window_selection()

    already_running = local.find_local_server() is not None
    started = time.perf_counter()
    server = local.ensure_local_server()
    if not already_running:
        print(f"server started in {time.perf_counter() - started:.2f} s")
    options = {"max_tokens": args.max_tokens, "temperature": 0.0}
    try:
        compare(server, args.runs, options)
        tool_cost(server)
        estimate_accuracy(server)
        thread_counts(server.model_path, args.runs, options)
    finally:
        if not already_running:
            local.stop_local_server()


def compare(server: local.LocalServer, runs: int, options: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    body = OpenAIProvider().chat_body(messages, server.model, None, stream=True, options=options)
    client = LLMClient(Settings(base_url=server.url, model=server.model, origin="local"))
    sides: dict[str, Callable[[], Iterator[str]]] = {
        "nbchat": lambda: via_nbchat(client, messages, server.model, options),
        "httpx": lambda: via_httpx(http, server.url, body),
    }
    results: dict[str, list[Run]] = {name: [] for name in sides}
    with httpx.Client(timeout=120, trust_env=False) as http:
        for chunks in sides.values():  # warm-up: model pages, connections
            measure(chunks)
        for _ in range(runs):
            for name, chunks in sides.items():
                results[name].append(measure(chunks))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"local model {server.model} at {server.url}; {runs} alternating runs each, "
        f"options {options}; "
        f"load average {load:.1f} on {os.cpu_count()} CPUs (a busy machine blurs the ratio)"
    )
    nb_ttft, nb_rate = summarize("nbchat", results["nbchat"])
    bare_ttft, bare_rate = summarize("httpx", results["httpx"])
    print(
        f"ratio nbchat/httpx: TTFT {nb_ttft / bare_ttft:.3f}   "
        f"time per token {bare_rate / nb_rate:.3f}   (target <= 1.05)"
    )
    with httpx.Client(timeout=120, trust_env=False) as http:
        raw = http.post(f"{server.url}/chat/completions", json=body).content
    decode_cost(raw, 1 / bare_rate)


def tool_cost(server: local.LocalServer) -> None:
    """Prompt tokens the built-in client tools add, as the server counts them.

    The schemas' own token count, from the server's tokenizer, is printed too:
    what a tool-aware template adds at least.
    """
    client = LLMClient(Settings(base_url=server.url, model=server.model, origin="local"))
    messages = [{"role": "user", "content": PROMPT}]
    schemas = [t.schema() for t in BUILTIN_CLIENT_TOOLS]
    counts = []
    for tools in (None, schemas):
        reply = client.complete(
            messages, model=server.model, tools=tools, options={"max_tokens": 1}
        )
        counts.append(reply.usage.prompt_tokens if reply.usage else None)
    bare, with_tools = counts
    root = server.url.removesuffix("/v1")
    with httpx.Client(timeout=60, trust_env=False) as http:
        counted = http.post(f"{root}/tokenize", json={"content": json.dumps(schemas)}).json()
    print(
        f"prompt tokens: {bare} without tools, {with_tools} with the built-in client tools; "
        f"the schemas themselves are {len(counted['tokens'])} tokens "
        f"({len(json.dumps(schemas))} characters)"
    )


def estimate_accuracy(server: local.LocalServer) -> None:
    """nbchat's token estimate against SmolLM2's tokenizer, on the kinds of text it sends.

    Above 1.0 the estimate is generous (windows stay inside the context); the
    CSV rows are what ``@df`` sends.
    """
    import numpy as np
    import pandas as pd

    from nbchat.context import describe, estimate_tokens

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(1000, 12)).round(3), columns=[f"c{i}" for i in range(12)])
    here = Path(__file__).resolve().parents[1]
    texts = {
        "prose (a docs page)": (here / "docs/guides/magic.md").read_text()[:6000],
        "code (chat.py)": (here / "src/nbchat/engine/chat.py").read_text()[:8000],
        "config (pyproject)": (here / "pyproject.toml").read_text(),
        "@df of 1,000×12": describe(frame, "df").as_text(),
        "CSV of integers": pd.DataFrame(rng.integers(0, 100_000, size=(200, 5))).to_csv(),
    }
    root = server.url.removesuffix("/v1")
    with httpx.Client(timeout=60, trust_env=False) as http:
        for name, text in texts.items():
            counted = len(http.post(f"{root}/tokenize", json={"content": text}).json()["tokens"])
            print(f"token estimate / SmolLM2 count, {name}: {estimate_tokens(text) / counted:.2f}×")


def thread_counts(model_path: Path, runs: int, options: dict[str, Any]) -> None:
    """Decode rate by thread count, idle and beside one busy process (servers of its own)."""
    cpus = os.cpu_count() or 1
    counts = sorted({1, local.default_threads(), cpus})
    messages = [{"role": "user", "content": PROMPT}]
    body = OpenAIProvider().chat_body(messages, "m", None, stream=True, options=options)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"threads (nbchat chooses {local.default_threads()} of {cpus} CPUs; load average "
        f"{load:.1f} before), {runs} runs each:"
    )
    for busy in (False, True):
        for threads in counts:
            with (
                _server(model_path, threads) as url,
                _busy_cpu(busy),
                httpx.Client(timeout=120, trust_env=False) as http,
            ):
                measure(lambda: via_httpx(http, url, body))  # warm-up
                results = [measure(lambda: via_httpx(http, url, body)) for _ in range(runs)]
            rates = sorted(r.rate for r in results)
            print(
                f"  {threads} thread{'s' if threads > 1 else ' '} "
                f"{'beside one busy CPU' if busy else 'with no load of ours'}: "
                f"{sum(r.tokens - 1 for r in results) / sum(r.generating for r in results):6.1f}"
                f" tok/s pooled (runs {rates[0]:.0f}..{rates[-1]:.0f}), "
                f"TTFT median {statistics.median(r.ttft for r in results) * 1000:.0f} ms"
            )


@contextlib.contextmanager
def _server(model_path: Path, threads: int) -> Iterator[str]:
    """A model server of this benchmark's own with ``threads`` threads; its ``/v1`` URL."""
    with socket.socket() as probe:
        probe.bind((local.HOST, 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable, "-m", "nbchat.llm._local_server", "--model", str(model_path),
        "--alias", "m", "--port", str(port), "--context", str(local.CONTEXT_TOKENS),
        "--threads", str(threads),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://{local.HOST}:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while not _answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"a server with {threads} threads did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/models", timeout=1, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def _busy_cpu(busy: bool) -> Iterator[None]:
    """One process that spins (for at most 10 minutes), or nothing."""
    if not busy:
        yield
        return
    spin = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"
    process = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        process.kill()
        process.wait()


def window_selection(turns: int = 10_000, context: int = 4096) -> None:
    """Time ChatHistory.window on a long thread (best of 5)."""
    history = ChatHistory(system="You are a helpful assistant.", limit=None)
    for i in range(turns):
        answer = f"Item {i} is fine. " * 8
        history.add_question_answer(f"Question {i}: what about item {i}?", answer)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        window = history.window(context - 1024)
        times.append(time.perf_counter() - started)
    print(
        f"window of a {turns:,}-turn thread for a {context}-token context: "
        f"{min(times) * 1000:.1f} ms (best of 5; median {statistics.median(times) * 1000:.1f} ms), "
        f"{window.dropped_turns:,} turns left out, {len(window.history.turns())} sent"
    )


def decode_cost(raw: bytes, token_seconds: float) -> None:
    """Client CPU per token, free of the server's noise: one recorded body, decoded again."""
    chunks = [raw[i : i + 512] for i in range(0, len(raw), 512)]
    tokens = sum(1 for _ in OpenAIProvider().decode_stream(chunks)) - 1
    costs = {}
    for name, decode in (("nbchat", _decode_nbchat), ("httpx", _decode_bare)):
        started = time.perf_counter()
        for _ in range(200):
            decode(chunks)
        costs[name] = (time.perf_counter() - started) / 200 / max(tokens, 1)
    print(
        f"decoding cost per token on one recorded answer ({tokens} tokens): "
        f"nbchat {costs['nbchat'] * 1e6:.1f} us, bare json loop {costs['httpx'] * 1e6:.1f} us; "
        f"the server spends {token_seconds * 1e3:.1f} ms per token "
        f"(nbchat's extra: {(costs['nbchat'] - costs['httpx']) / token_seconds:.3%})"
    )


def _decode_nbchat(chunks: list[bytes]) -> None:
    for _ in OpenAIProvider().decode_stream(chunks):
        pass


def _decode_bare(chunks: list[bytes]) -> None:
    for line in b"".join(chunks).decode().splitlines():
        if line.startswith("data:") and line[5:].strip() != "[DONE]":
            json.loads(line[5:])


if __name__ == "__main__":
    main()
