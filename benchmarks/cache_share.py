"""The share of a long thread's prompt read from Anthropic's prompt cache at the next question.

A thread of 50 earlier turns (40 words a question, 40 an answer) on the
scripted server speaking Anthropic, which plays the API's prompt cache from
the request's ``cache_control`` breakpoints. Two new questions are asked;
prints the usage recorded with the second (target: cache reads at least 90 %
of its prompt), and the same with the cache switched off, for comparison.
"""

from __future__ import annotations

import argparse
import tempfile

from nbchat import Chat
from nbchat.testing import ScriptedServer


def second_question_usage(turns: int, cache: bool) -> dict[str, int]:
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as store:
        chat = Chat(base_url=server.anthropic_url, provider="anthropic", store=store,
                    model="scripted-small", options={"prompt_cache": cache})  # fmt: skip
        thread = chat.new_thread(system="You are a careful data analyst.")
        chat.update_thread_title(thread, "Long")
        for i in range(turns):
            chat.append_response(thread, f"question {i} " + "word " * 40, f"answer {i} " * 40)
        chat.ask(thread, "First new question?")
        chat.ask(thread, "Second new question?")
        return dict(chat.store.get(thread).turns[-1].usage or {})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    for cache in (True, False):
        usage = second_question_usage(args.turns, cache)
        prompt, read = usage.get("prompt_tokens", 0), usage.get("cache_read_tokens", 0)
        write = usage.get("cache_write_tokens", 0)
        print(f"cache {'on ' if cache else 'off'}: {prompt:,} prompt tokens, {read:,} read from "
              f"cache ({read / prompt:.1%}), {write:,} written")  # fmt: skip
    print("target: at least 90% read with the cache on")


if __name__ == "__main__":
    main()
