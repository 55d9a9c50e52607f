"""The panel's coding agents: which may answer, and a question asked of one.

The picker beside the model picker offers the agents that are installed and
allowed (:func:`offered`); with one picked, a question goes to it: in the
shown thread when it is that agent's session, else in a new thread of its
own. Its permission requests are the panel's prompts, answered through the
Chat like any call, once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...base.errors import NbchatError

if TYPE_CHECKING:
    from ...engine.chat import Chat

__all__ = ["ask", "hosted_by", "offered"]


def offered() -> list[dict[str, str]]:
    """The agents that could start now, by name and label (none when hosting is off)."""
    from ...agents.acp import agent_names, find_agent

    found = []
    try:
        names = agent_names()
    except NbchatError:  # a damaged agents.json: the picker offers none; --with says why
        return []
    for name in names:
        try:
            spec = find_agent(name)
        except NbchatError:
            continue
        found.append({"name": name, "label": spec.label})
    return found


def hosted_by(chat: Chat) -> Any:
    """What answers the requests of the agents this kernel hosts over ``chat``'s store."""

    def host() -> Any:
        from ..agents._hosting import host_for

        return host_for(chat.store)

    return host


def ask(chat: Chat, thread_id: int | None, agent: str, question: str) -> tuple[int, Any]:
    """Ask ``agent`` ``question``: in ``thread_id`` if it is that agent's, else a new thread;
    the thread and the turn's Answer."""
    from ..agents._hosting import host_for

    host = host_for(chat.store)
    if thread_id is None or host.agent_of(thread_id) != agent:
        thread_id = host.new_thread(agent)
    return thread_id, host.iter_ask(thread_id, question)

