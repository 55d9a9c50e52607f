"""Token counts from an endpoint or a store are checked before they are kept, shown or priced.

A count that is not a whole number from 0 to ``MAX_TOKEN_COUNT`` (negative,
absurdly large, a bool, a float, a string) is unknown: it is not stored, not
shown in the cell's or the panel's usage line, not in the context gauge, and
not priced, so one hostile reply can neither lower a thread's cost nor run it
up to $10^27. Over loopback with the scripted server, in each wire format.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from nbchat import Chat
from nbchat.base.records import MAX_TOKEN_COUNT, Usage
from nbchat.engine._usage import Price, thread_cost, thread_usage_line, turn_usage_line
from nbchat.jupyter.panel._messages import context_gauge
from nbchat.testing import Reply, ScriptedServer
from provider_helpers import PROVIDERS, base_url

PRICES = {"scripted-small": Price(1.0, 2.0)}
# Each wire format's own names for the input and the output counts.
FIELDS = {
    "openai": ("prompt_tokens", "completion_tokens"),
    "ollama": ("prompt_eval_count", "eval_count"),
    "anthropic": ("input_tokens", "output_tokens"),
}
HOSTILE = [-2_000_000, 10**30, MAX_TOKEN_COUNT + 1, True, 12.5, "12", None, [3]]


def ask(server: ScriptedServer, provider: str, store: Path, *replies: Reply) -> Chat:
    """One thread, a question for each reply, answered in order (titles get the default)."""
    server.script(*(dataclasses.replace(r, when="hello there", times=1) for r in replies))
    chat = Chat(base_url=base_url(server, provider), provider=provider, store=store,
                model="scripted-small", builtin_tools=False)  # fmt: skip
    thread = chat.new_thread()
    for _ in replies:
        chat.ask(thread, "hello there")
    return chat


def shown(chat: Chat) -> tuple[list[str], str, float | None, dict[str, Any]]:
    """What a person sees of a thread's usage: each turn's line, the total, its cost, the gauge."""
    thread = chat.store.get(chat.store.threads()[0].id)
    lines = [turn_usage_line(turn, PRICES) for turn in thread.turns]
    gauge = context_gauge(thread, lambda model: 4096)
    return lines, thread_usage_line(thread.turns, PRICES), thread_cost(thread.turns, PRICES), gauge


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("bad", HOSTILE, ids=repr)
def test_hostile_counts_from_an_endpoint_are_unknown_never_shown_or_priced(
    scripted_server, provider, bad, tmp_path
):
    prompt, completion = FIELDS[provider]
    chat = ask(scripted_server, provider, tmp_path / "store", Reply("Fine."),
               Reply("Odd.", usage_fields={prompt: bad, completion: bad}))  # fmt: skip
    lines, total, cost, gauge = shown(chat)
    first = chat.store.get(1).turns[0]
    honest = Usage.from_dict(first.usage)
    assert honest.prompt_tokens and honest.completion_tokens  # the scripted counts
    kept = chat.store.get(1).turns[1].usage or {}
    assert "prompt_tokens" not in kept and "completion_tokens" not in kept  # nor shown below
    assert lines[1] == ""
    expected = PRICES["scripted-small"].cost(honest.prompt_tokens, honest.completion_tokens)
    assert cost == pytest.approx(expected)  # neither lowered nor run up by the second turn
    assert total == thread_usage_line([first], PRICES)
    assert gauge["used"] == honest.prompt_tokens + honest.completion_tokens


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_hostile_count_leaves_the_honest_ones(scripted_server, provider, tmp_path):
    prompt, completion = FIELDS[provider]
    chat = ask(scripted_server, provider, tmp_path / "store",
               Reply("Odd.", usage_fields={prompt: 7, completion: -3}))  # fmt: skip
    usage = chat.store.get(1).turns[0].usage
    assert {name: usage[name] for name in usage if "cache" not in name} == {"prompt_tokens": 7}
    lines, _, cost, _ = shown(chat)
    assert "7 in · 0 out" in lines[0] and "-" not in lines[0].split("·", 1)[1]
    assert cost == pytest.approx(7 / 1e6)


def test_cached_parts_larger_than_the_prompt_are_dropped(scripted_server, tmp_path):
    chat = ask(scripted_server, "anthropic", tmp_path / "store",
               Reply("Odd.", usage_fields={"input_tokens": 5, "cache_read_input_tokens": -4}))
    assert chat.store.get(1).turns[0].usage is None or "cache_read_tokens" not in (
        chat.store.get(1).turns[0].usage)  # fmt: skip
    assert Usage(10, 1, cache_read_tokens=8, cache_write_tokens=8).cache_read_tokens is None


def test_hostile_usage_in_a_stored_turn_is_not_shown_or_priced(scripted_server, tmp_path):
    chat = ask(scripted_server, "openai", tmp_path / "store", Reply("Fine."), Reply("Also."))
    path = Path(chat.store.location(1))
    data = json.loads(path.read_text())
    hostile = {"prompt_tokens": -(10**9), "completion_tokens": 10**30,
               "cache_read_tokens": True, "cache_write_tokens": "lots"}  # fmt: skip
    turns = [doc for doc in _dicts(data) if "usage" in doc and doc.get("usage")]
    assert len(turns) == 2
    turns[1]["usage"] = hostile
    path.write_text(json.dumps(data))
    thread = chat.store.get(1)
    assert thread.turns[1].usage == hostile  # read back as it was written; judged when used
    lines, total, cost, gauge = shown(chat)
    honest = Usage.from_dict(thread.turns[0].usage)
    assert lines[1] == "" and "-" not in total and "e+" not in total
    assert total.startswith("1 answer · ")
    assert cost == pytest.approx(
        PRICES["scripted-small"].cost(honest.prompt_tokens, honest.completion_tokens))
    assert gauge["used"] == honest.total_tokens


def _dicts(data: Any):
    """Every dict inside ``data``, depth first."""
    if isinstance(data, dict):
        yield data
        for value in data.values():
            yield from _dicts(value)
    elif isinstance(data, list):
        for value in data:
            yield from _dicts(value)
