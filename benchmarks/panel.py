"""How fast the panel opens a long thread, what it sends, what following the store costs.

In one process, against the scripted server on loopback (CPU figures are the
calling thread's, so the server's own work is left out; bytes are the JSON of
the widget messages the kernel would send):

- first paint of a 1,000-turn thread: ``ChatPanel(thread_id=…)``, kernel CPU
  and the state it opens with (target: <= 100 ms, <= 50 KB), against drawing
  every turn;
- switching threads: ``panel.select(…)``, CPU and bytes (target <= 100 ms);
- the poll: ``panel.sync()`` when nothing changed (one ``stat``), and when
  another Chat wrote to the store;
- streaming 5,000 tokens at 1,000 a second: how many updates, the largest
  one, all of them, against re-sending the conversation each time;
- Stop: from ``panel.stop()`` on a background answer to the turn saved as
  interrupted, with the server sending a piece every ``--chunk-seconds``.

Run: ``.venv/bin/python benchmarks/panel.py [--turns 1000] [--chunk-seconds 0.02]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from nbchat import Chat
from nbchat.jupyter.panel.widget import ChatPanel
from nbchat.testing import Reply, ScriptedServer

ANSWER = "A paragraph of a typical answer, with `code` and *emphasis*, " * 12


def main() -> None:
    options = _arguments()
    with tempfile.TemporaryDirectory() as root, ScriptedServer(
        Reply("", tokens=5000, delay=options.chunk_seconds, when="long"),
        Reply("Short answer.", when="short"),
        Reply("", tokens=5000, delay=0.001, when="stream"),
    ) as server:
        chat = Chat(base_url=server.url, model="scripted-small", store=Path(root) / "store")
        started = time.perf_counter()
        thread = _long_thread(chat, options.turns)
        print(f"built a {options.turns}-turn thread in {time.perf_counter() - started:.1f} s")
        _first_paint(chat, thread, options.turns)
        _poll(chat, server.url)
        _streaming(chat)
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


class _Wire:
    """Counts the widget messages a panel sends (its comm has no kernel here)."""

    def __init__(self, panel: ChatPanel) -> None:
        self.sizes: list[int] = []
        self.keys: list[list[str]] = []
        panel.comm.publish_msg = self._publish  # type: ignore[method-assign]

    def _publish(self, msg_type, data=None, metadata=None, buffers=None, **keys):  # type: ignore[no-untyped-def]
        self.sizes.append(len(json.dumps(data).encode()))
        self.keys.append(sorted((data or {}).get("state", {})))

    def reset(self) -> None:
        self.sizes.clear()
        self.keys.clear()


def _state_bytes(panel: ChatPanel) -> tuple[int, int]:
    """The JSON of what the panel opens with: its state, and the front-end code sent with it.

    The code proper is served once by Jupyter Server (``nbchat.jupyter.server.extension``) and
    cached by the browser; what each panel sends is its loader.
    """
    state = panel.get_state()
    code = len(state.pop("_esm").encode()) + len(state.pop("_css", "").encode())
    return len(json.dumps(state).encode()), code


def _first_paint(chat: Chat, thread: int, turns: int) -> None:
    other = chat.new_thread()
    chat.append_response(other, "Another thread", "Short.")
    runs = []
    for _ in range(5):
        panel, cpu, wall = _timed(lambda: ChatPanel(chat=chat, thread_id=thread))
        runs.append((cpu, wall))
    state, code = _state_bytes(panel)
    print(f"first paint, ChatPanel(thread_id=…) of {turns} turns: median "
          f"{statistics.median(c for c, _ in runs):.0f} ms kernel CPU, "
          f"{statistics.median(w for _, w in runs):.0f} ms wall (incl. the model list); "
          f"opens with {state / 1024:.0f} KB of state for the last {panel.page_size} turns, "
          f"and {code / 1024:.0f} KB of front-end code (target <= 100 ms, <= 50 KB)")
    wire = _Wire(panel)
    selects, sent = [], []
    for _ in range(5):
        panel.select(other)
        wire.reset()
        _, cpu, wall = _timed(lambda: panel.select(thread))
        selects.append((cpu, wall))
        sent.append(sum(wire.sizes))
    print(f"switching to it, panel.select(): median "
          f"{statistics.median(c for c, _ in selects):.0f} ms kernel CPU, "
          f"{statistics.median(w for _, w in selects):.0f} ms wall, "
          f"{statistics.median(sent) / 1024:.0f} KB sent (target <= 100 ms)")
    whole, cpu, wall = _timed(lambda: ChatPanel(chat=chat, thread_id=thread, page_size=turns))
    print(f"for comparison, drawing all {turns} turns: {cpu:.0f} ms kernel CPU, "
          f"{wall:.0f} ms wall, {_state_bytes(whole)[0] / 1024:.0f} KB of state")
    _, cpu, wall = _timed(panel.show_earlier)
    print(f"Show earlier (+{panel.page_size} turns): {cpu:.0f} ms kernel CPU")


def _streaming(chat: Chat) -> None:
    thread = _long_thread(chat, 20)
    panel = ChatPanel(chat=chat, thread_id=thread)
    wire = _Wire(panel)
    conversation = len(json.dumps(panel.messages).encode())
    panel.value = "stream 5,000 tokens please"
    started = time.perf_counter()
    _, cpu, _ = _timed(panel.submit)
    wall = time.perf_counter() - started
    turn = chat.store.get(thread).turns[-1]
    assert turn.status == "complete" and len(turn.answer) > 40_000, (turn.status, turn.error)
    live = [size for size, keys in zip(wire.sizes, wire.keys, strict=True)
            if keys == ["streaming_message"]]
    print(f"streaming 5,000 tokens at 1,000/s into a {panel.page_size}-turn view: "
          f"{len(live)} updates in {wall:.1f} s, the largest {max(live) / 1024:.0f} KB, "
          f"{sum(live) / 1024:.0f} KB in all, each one message (the conversation shown is "
          f"{conversation / 1024:.0f} KB); {cpu:.0f} ms kernel CPU; "
          f"{len(wire.sizes) - len(live)} other messages (the end of the turn)")


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
        panel.value = "a long answer please"
        panel.submit()
        while "word20" not in panel.live.data.get("text/html", ""):
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
