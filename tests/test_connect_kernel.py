"""A key given once with ``%chat --key`` and kept: every new kernel answers without it."""

from __future__ import annotations

import json
from pathlib import Path

from kernel_helpers import Kernel, kernel_env
from nbchat.testing import Reply, ScriptedServer

KEY = "sk-kept-once-0123456789abcdef"


def test_a_kept_key_answers_in_every_new_kernel(tmp_path: Path) -> None:
    with ScriptedServer(Reply("Four."), api_key=KEY) as guarded:
        env = kernel_env(tmp_path / "root", NBCHAT_STORE=str(tmp_path / "store"),
                         NBCHAT_BASE_URL=guarded.url)  # fmt: skip
        with Kernel(env, cwd=tmp_path) as first:
            first.ok("%load_ext nbchat")
            given = first.ok("%chat --key",
                             stdin=lambda request: KEY if request["password"] else "y")
            assert "kept for 127.0.0.1-" in given.stdout and "without --key" in given.stdout
        with Kernel(env, cwd=tmp_path) as second:
            second.ok("%load_ext nbchat")
            answered = second.ok("%chat What is 2+2?", interactive=False)
        assert "Four." in answered.text()
        unset = {**env}
        unset.pop("NBCHAT_BASE_URL")
        with Kernel(unset, cwd=tmp_path) as third:  # the connection alone finds the endpoint
            third.ok("%load_ext nbchat")
            again = third.ok("%chat -n What is 2+2?", interactive=False)
            listed = third.ok("!python -m nbchat keys list")
        assert "Four." in again.text()
        sent = [r.headers.get("Authorization") for r in guarded.chat_requests]
        assert len(sent) >= 2 and set(sent) == {f"Bearer {KEY}"}  # answers and their titles
    assert "key in the file" in listed.stdout and KEY not in listed.stdout
    for run in (given, answered, again, listed):
        assert KEY not in json.dumps([run.messages, run.outputs], default=str)
    keys_file = tmp_path / "root" / "jupyter-data" / "nbchat" / "keys.json"
    holding = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert holding == [keys_file]
    assert keys_file.stat().st_mode & 0o777 == 0o600
