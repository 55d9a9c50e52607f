"""What a preview costs, and how many requests compaction adds.

1. A preview of a 1,000-turn thread with a 1,000,000-row DataFrame attached as
   ``@df`` (target: at most 100 ms; it sends nothing), timed beside the same
   question asked against the scripted server (a request that answers at once),
   and beside describing the frame alone.
2. Compaction: the requests a question adds when its thread's summary is
   current (target: none), and the requests making a summary of 100 turns
   costs with a model window they fit in (target: one).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from nbchat import Chat
from nbchat.context import describe
from nbchat.engine._compaction import SUMMARY_REQUEST
from nbchat.testing import Reply, ScriptedServer


def best_ms(work: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The fastest and the median of ``repeat`` runs of ``work``, in milliseconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times)


def frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"city": rng.choice(["Oslo", "Lima", "Pune"], rows),
                         "price": rng.normal(100, 15, rows), "units": rng.integers(0, 50, rows)})


def preview_timing(turns: int, rows: int, repeat: int) -> None:
    df = frame(rows)
    with ScriptedServer(Reply("ok"), context_size=32_768) as server, \
            tempfile.TemporaryDirectory() as store:  # fmt: skip
        chat = Chat(base_url=server.url, model="scripted-small", store=store)
        thread = chat.new_thread(system="You are a careful data analyst.")
        chat.update_thread_title(thread, "Long")
        for i in range(turns):
            chat.append_response(thread, f"question {i} " + "word " * 20, f"answer {i} " * 20)
        described = best_ms(lambda: describe(df, "df"), repeat)
        item = describe(df, "df")
        sent = len(server.chat_requests)
        previewed = best_ms(lambda: chat.preview(thread, "What is in @df?", context=[item]),
                            repeat)  # fmt: skip
        assert len(server.chat_requests) == sent, "the preview sent a request"
        preview = chat.preview(thread, "What is in @df?", context=[item])
        asked = best_ms(lambda: chat.ask(thread, "What is in @df?", context=[item]), 3)
    print(f"preview of a {turns:,}-turn thread with a {rows:,}-row @df: best {previewed[0]:.1f} "
          f"ms, median {previewed[1]:.1f} ms (target: ≤ 100 ms; sent nothing); "
          f"{preview.tokens:,} tokens in {preview.messages} messages, "
          f"{len(preview.left_out):,} turns left out by the window")
    print(f"  beside: describing the frame {described[0]:.1f} ms; asking the same question "
          f"{asked[0]:.1f} ms (preview / ask = {previewed[0] / asked[0]:.2f})")


def compaction_requests(turns: int) -> None:
    summary_reply = Reply("A summary of the early turns.", when=SUMMARY_REQUEST)
    for context, label in ((2_000, "a small window"), (200_000, "a window they fit in")):
        with ScriptedServer(summary_reply, Reply("ok"), context_size=context) as server, \
                tempfile.TemporaryDirectory() as store:  # fmt: skip
            chat = Chat(base_url=server.url, model="scripted-small", store=store,
                        builtin_tools=False, window="summarize")  # fmt: skip
            thread = chat.new_thread()
            chat.update_thread_title(thread, "Long")
            for i in range(turns):
                chat.append_response(thread, f"question {i} " + "word " * 20, f"answer {i} " * 20)
            if context > 10_000:  # the whole thread fits: ask for the summary on purpose
                before = len(server.chat_requests)
                chat.compact(thread, covers=turns)
                made = len(server.chat_requests) - before
                print(f"summary of {turns} turns with {label}: {made} request(s) (target: 1)")
                continue
            chat.ask(thread, "First question?")
            made = sum(r.messages[-1].get("content") == SUMMARY_REQUEST
                       for r in server.chat_requests)  # fmt: skip
            before = len(server.chat_requests)
            chat.ask(thread, "Second question?")
            added = len(server.chat_requests) - before - 1
            print(f"{turns}-turn thread, {label} ({context:,} tokens): the summary took {made} "
                  f"request(s) once; a question with the summary current added {added} "
                  f"(target: 0)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    preview_timing(args.turns, args.rows, args.repeat)
    compaction_requests(100)


if __name__ == "__main__":
    main()
