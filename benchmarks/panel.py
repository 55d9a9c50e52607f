"""How fast the panel opens a long thread, what following the store costs, how fast Stop is.

In one process, against the scripted server on loopback (CPU figures are the
calling thread's, so the server's own work is left out):

- first paint of a 1,000-turn thread: ``ChatPanel(thread_id=…)`` and
  ``panel.select(…)``, kernel CPU and wall time, and the Markdown sent
  (target: first paint <= 300 ms of kernel time), against drawing every turn;
- the poll: ``panel.sync()`` when nothing changed (one ``stat``), and when
  another Chat wrote to the store;
- Stop: from ``panel.stop()`` on a background answer to the turn saved as
  interrupted, with the server sending a piece every ``--chunk-seconds``.

Run: ``.venv/bin/python benchmarks/panel.py [--turns 1000] [--chunk-seconds 0.02]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from nbchat import Chat
from nbchat.testing import Reply, ScriptedServer
from nbchat.widgets import ChatPanel

ANSWER = "A paragraph of a typical answer, with `code` and *emphasis*, " * 12


def main() -> None:
    options = _arguments()
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply("", tokens=5000, delay=options.chunk_seconds, when="long"),
        Reply("Short answer.", when="short"),
    ) as server:
        chat = Chat(base_url=server.url, model="scripted-small", store=Path(root) / "store")
        started = time.perf_counter()
        thread = _long_thread(chat, options.turns)
        print(f"built a {options.turns}-turn thread in {time.perf_counter() - started:.1f} s")
        _first_paint(chat, thread, options.turns)
        _poll(chat, server.url)
        _stop(chat, options.chunk_seconds)


def _long_thread(chat: Chat, turns: int) -> int:
    thread = chat.new_thread()
    for n in range(turns):
        chat.append_response(thread, f"Question {n}: how does this work?", ANSWER, title="Long")
        chat.store.update_turn(
            thread, n, model="scripted-small", finished=time.time() + 1.5,
            usage={"prompt_tokens": 40 + n, "completion_tokens": 120},
        )
    return thread


def _timed(action):  # type: ignore[no-untyped-def]
    cpu, wall = time.thread_time(), time.perf_counter()
    result = action()
    return result, (time.thread_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def _first_paint(chat: Chat, thread: int, turns: int) -> None:
    other = chat.new_thread()
    chat.append_response(other, "Another thread", "Short.")
    runs = []
    for _ in range(5):
        panel, cpu, wall = _timed(lambda: ChatPanel(chat=chat, thread_id=thread))
        runs.append((cpu, wall))
    sent = len(panel.conversation.text.encode())
    print(f"first paint, ChatPanel(thread_id=…) of {turns} turns: median "
          f"{statistics.median(c for c, _ in runs):.0f} ms kernel CPU, "
          f"{statistics.median(w for _, w in runs):.0f} ms wall (incl. the model list); "
          f"{sent / 1024:.0f} KB of Markdown for the last {panel.page_size} turns "
          f"(target <= 300 ms)")
    selects = []
    for _ in range(5):
        panel.select(other)
        _, cpu, wall = _timed(lambda: panel.select(thread))
        selects.append((cpu, wall))
    print(f"opening it from the list, panel.select(): median "
          f"{statistics.median(c for c, _ in selects):.0f} ms kernel CPU, "
          f"{statistics.median(w for _, w in selects):.0f} ms wall")
    whole, cpu, wall = _timed(lambda: ChatPanel(chat=chat, thread_id=thread, page_size=turns))
    print(f"for comparison, drawing all {turns} turns: {cpu:.0f} ms kernel CPU, "
          f"{wall:.0f} ms wall, {len(whole.conversation.text.encode()) / 1024:.0f} KB")
    _, cpu, wall = _timed(panel.earlier_button.click)
    print(f"Show earlier (+{panel.page_size} turns): {cpu:.0f} ms kernel CPU")


def _poll(chat: Chat, url: str) -> None:
    panel = ChatPanel(chat=chat)
    count = 2000
    _, cpu, wall = _timed(lambda: [panel.sync() for _ in range(count)])
    print(f"poll with nothing changed, panel.sync(): {cpu / count * 1000:.1f} us kernel CPU "
          f"each ({count} calls); once a second that is {cpu / count / 10:.4f} % of a core")
    elsewhere = Chat(base_url=url, model="scripted-small", store=chat.store.path)
    changed = []
    for n in range(10):
        elsewhere.append_response(elsewhere.new_thread(), f"From another kernel {n}", "Yes.")
        _, cpu, _ = _timed(panel.sync)
        changed.append(cpu)
    print(f"poll after another kernel wrote: median {statistics.median(changed):.1f} ms "
          f"kernel CPU ({len(chat.store.threads())} threads listed)")


def _stop(chat: Chat, chunk_seconds: float) -> None:
    delays = []
    for _ in range(5):
        panel = ChatPanel(chat=chat, background=True)
        panel.input_box.value = "a long answer please"
        panel.send_button.click()
        while "word20" not in panel.live.text:
            time.sleep(0.01)
        started = time.perf_counter()
        panel.stop()
        panel.wait()
        delays.append((time.perf_counter() - started) * 1000)
        assert chat.store.get(panel.thread_id).turns[-1].status == "interrupted"
    print(f"Stop to the turn saved as interrupted: median {statistics.median(delays):.0f} ms, "
          f"worst {max(delays):.0f} ms (a piece every {chunk_seconds * 1000:.0f} ms)")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--chunk-seconds", type=float, default=0.02)
    return parser.parse_args()


if __name__ == "__main__":
    main()
