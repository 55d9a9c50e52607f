"""Decoding cost per event: Anthropic's Messages stream against the OpenAI decoder, same text.

Both streams are the scripted server's own bytes for one 20,000-chunk answer
(Anthropic's ``content_block_delta`` events, OpenAI's ``chat.completion.chunk``
lines), fed to each provider's ``decode_stream`` in 64 KiB pieces as a socket
would hand them over, alternating, several rounds. Prints the median cost per
text event of each and the ratio (target: Anthropic at most 1.10x OpenAI).
"""

from __future__ import annotations

import argparse
import statistics
import time

from nbchat.base.events import TextDelta
from nbchat.llm.anthropic import AnthropicProvider
from nbchat.llm.openai import OpenAIProvider
from nbchat.testing._anthropic import ANTHROPIC
from nbchat.testing._protocols import OPENAI, Answer
from nbchat.testing._script import token_chunks

PIECE = 64 * 1024


def stream_bytes(protocol: object, answer: Answer) -> list[bytes]:
    body = {"stream": True, "stream_options": {"include_usage": True}}
    plan = protocol.stream(answer, body)  # type: ignore[attr-defined]
    data = plan.preamble + b"".join(plan.pieces) + plan.closing
    return [data[i : i + PIECE] for i in range(0, len(data), PIECE)]


def per_event(provider: object, pieces: list[bytes]) -> float:
    start = time.perf_counter()
    events = provider.decode_stream(pieces)  # type: ignore[attr-defined]
    count = sum(type(e) is TextDelta for e in events)
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    answer = Answer("chatcmpl-1", "model", token_chunks(args.chunks), [], None, True, 10)
    streams = {
        "openai": (OpenAIProvider(), stream_bytes(OPENAI, answer)),
        "anthropic": (AnthropicProvider(), stream_bytes(ANTHROPIC, answer)),
    }
    times: dict[str, list[float]] = {name: [] for name in streams}
    for provider, pieces in streams.values():
        per_event(provider, pieces)  # warm up
    for _ in range(args.rounds):
        for name, (provider, pieces) in streams.items():
            times[name].append(per_event(provider, pieces))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        size = sum(map(len, streams[name][1]))
        each = size / args.chunks
        print(f"{name:>9}: {value * 1e6:.2f} µs per text event ({each:.0f} bytes each)")
    ratio = medians["anthropic"] / medians["openai"]
    print(f"anthropic / openai: {ratio:.2f}x (target <= 1.10)")


if __name__ == "__main__":
    main()
