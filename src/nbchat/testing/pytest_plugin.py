"""pytest plugin (entry point ``nbchat``): the ``scripted_server`` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._server import ScriptedServer


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started :class:`ScriptedServer` with no rules, stopped after the test.

    Script it with ``scripted_server.script(Reply(...))``.
    """
    with ScriptedServer() as server:
        yield server
