"""Cost of consuming a long streamed answer: nbchat's client against a bare httpx loop.

Both read the same 20,000-chunk SSE stream from the scripted server over
loopback, alternating, several times; the bare loop does the minimum needed to
get the text (iterate lines, parse each ``data:`` JSON, take the content).
Prints the median of each and the ratio (target: at most 1.10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import httpx

from nbchat.base.config import Settings
from nbchat.base.events import TextDelta
from nbchat.llm import LLMClient
from nbchat.testing import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "long please"}]


def bare(client: httpx.Client, url: str) -> tuple[float, int]:
    body = {"model": "scripted-small", "messages": MESSAGES, "stream": True}
    start = time.perf_counter()
    count = 0
    with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                choices = json.loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    count += 1
    return time.perf_counter() - start, count


def nbchat_client(client: LLMClient) -> tuple[float, int]:
    start = time.perf_counter()
    count = 0
    for event in client.stream(MESSAGES, model="scripted-small"):
        if type(event) is TextDelta:
            count += 1
    return time.perf_counter() - start, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with ScriptedServer(Reply(tokens=args.chunks)) as server:
        ours = LLMClient(Settings(base_url=server.url, model="scripted-small"))
        plain = httpx.Client(timeout=60)
        bare(plain, server.url), nbchat_client(ours)  # warm up both connections
        times: dict[str, list[float]] = {"bare httpx": [], "nbchat": []}
        for _ in range(args.rounds):
            seconds, n_bare = bare(plain, server.url)
            times["bare httpx"].append(seconds)
            seconds, n_ours = nbchat_client(ours)
            times["nbchat"].append(seconds)
            assert n_bare == n_ours == args.chunks, (n_bare, n_ours)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.chunks} chunks, {args.rounds} alternating rounds, median seconds:")
    for name, value in medians.items():
        print(f"  {name:<11} {value * 1000:8.1f} ms")
    ratio = medians["nbchat"] / medians["bare httpx"]
    print(f"ratio nbchat / bare httpx: {ratio:.3f} (target <= 1.10)")


if __name__ == "__main__":
    main()
