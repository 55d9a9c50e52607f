"""Benchmark nbchat's streaming client against a bare httpx loop, on the local model.

    python benchmarks/local_model.py              # 5 runs each, alternating
    python benchmarks/local_model.py --runs 9

Both sides send the same request body (the one nbchat builds: nbchat cannot set
``max_tokens`` or ``temperature``, so neither side does) to the same llama.cpp
server (``nbchat[local]``, started if none runs, stopped again if this script
started it), over one kept-alive connection each. Measured per run: time to
first token (request sent → first text delta) and tokens per second after the
first token (llama.cpp sends one token per chunk), pooled over the runs since
answer lengths vary (temperature is the server's default). nbchat decodes with its SSE
decoder into ``TextDelta`` events; the bare loop uses ``httpx.iter_lines`` and
``json.loads``. Runs alternate so that drift in the server's speed hits both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from nbchat.config import Settings
from nbchat.events import TextDelta
from nbchat.llm import LLMClient, local
from nbchat.llm.openai import OpenAIProvider

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


def via_nbchat(client: LLMClient, messages: list[dict[str, Any]], model: str) -> Iterator[str]:
    for event in client.stream(messages, model=model):
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
    args = parser.parse_args()

    already_running = local.find_local_server() is not None
    started = time.perf_counter()
    server = local.ensure_local_server()
    if not already_running:
        print(f"server started in {time.perf_counter() - started:.2f} s")
    try:
        compare(server, args.runs)
    finally:
        if not already_running:
            local.stop_local_server()


def compare(server: local.LocalServer, runs: int) -> None:
    messages = [{"role": "user", "content": PROMPT}]
    body = OpenAIProvider().chat_body(messages, server.model, None, stream=True)
    client = LLMClient(Settings(base_url=server.url, model=server.model, origin="local"))
    sides: dict[str, Callable[[], Iterator[str]]] = {
        "nbchat": lambda: via_nbchat(client, messages, server.model),
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
        f"local model {server.model} at {server.url}; {runs} alternating runs each; "
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
