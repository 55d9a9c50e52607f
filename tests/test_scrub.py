"""The scrubber's reach: Jupyter's runtime tokens, the shapes of secrets, a cut at a cursor;
and the minting command, which shows a secret only on a terminal or in a private file."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nbchat.agents import TokenStore
from nbchat.base import _secrets
from nbchat.base._secrets import AGENT_TOKEN, scrub, scrub_around, scrub_names, scrub_pieces

SERVER_TOKEN = "0f3c9a1b2d4e5f60718293a4b5c6d7e8f9012345abcdef67"
AGENT = "nbchat_agent_0a1b2c3d_" + "Zx9-Yw8_Vu7" * 4


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data))


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "runtime"
    folder.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(folder))
    return folder


def test_the_tokens_in_jupyters_runtime_files_are_scrubbed(runtime: Path) -> None:
    write_json(runtime / "jpserver-123.json", {"url": "http://127.0.0.1:8/", "token": SERVER_TOKEN})
    write_json(runtime / "nbserver-9.json", {"token": "classic-notebook-token"})
    write_json(runtime / "kernel-abc.json", {"key": "a5f1e2d3-kernel-hmac-key", "shell_port": 1})
    write_json(runtime / "jpserver-7.json", {"token": ""})  # a server without one
    text = f"{SERVER_TOKEN} classic-notebook-token a5f1e2d3-kernel-hmac-key"
    assert scrub_names(text) == _secrets.Scrubbed(
        "[redacted] [redacted] [redacted]",
        (_secrets.JUPYTER_TOKEN, _secrets.KERNEL_KEY),
    )
    assert scrub_pieces(f"…{SERVER_TOKEN[10:30]}…") == "…[redacted]…"  # a piece a cut left


def test_a_runtime_file_written_or_added_later_is_read_again(runtime: Path) -> None:
    server = runtime / "jpserver-1.json"
    write_json(server, {"token": SERVER_TOKEN})
    assert scrub(SERVER_TOKEN) == "[redacted]"
    write_json(server, {"token": "a-new-token-0123456789"})  # in place: the folder's mtime stays
    assert scrub("a-new-token-0123456789") == "[redacted]"
    write_json(runtime / "jpserver-2.json", {"token": "second-server-token-42"})
    assert scrub("second-server-token-42") == "[redacted]"
    (runtime / "jpserver-2.json").unlink()
    assert scrub("second-server-token-42") == "second-server-token-42"


def test_a_runtime_file_is_read_again_only_when_its_mtime_changes(runtime: Path) -> None:
    kernel = runtime / "kernel-1.json"
    write_json(kernel, {"key": "first-kernel-key-0123"})
    past = time.time_ns() - 60 * 10**9
    os.utime(kernel, ns=(past, past))
    os.utime(runtime, ns=(past, past))
    assert scrub("first-kernel-key-0123") == "[redacted]"
    write_json(kernel, {"key": "second-kernel-key-456"})
    os.utime(kernel, ns=(past, past))  # new content behind the old mtime: the cache answers
    os.utime(runtime, ns=(past, past))
    both = "first-kernel-key-0123 second-kernel-key-456"
    assert scrub(both) == "[redacted] second-kernel-key-456"
    os.utime(kernel, ns=(past + 10**9, past + 10**9))
    assert scrub(both) == "first-kernel-key-0123 [redacted]"


def test_jupyters_token_variable_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_TOKEN", "env-jupyter-token-123")
    assert scrub("?token=env-jupyter-token-123 and env-jupyter-token-123") == \
        "?token=[redacted] and [redacted]"  # fmt: skip


def test_nbchat_agent_tokens_are_scrubbed_by_their_shape(tmp_path: Path) -> None:
    minted = TokenStore("ana", tmp_path).mint("another agent").secret
    assert AGENT_TOKEN.fullmatch(minted)
    assert scrub(f"Bearer {minted}\n") == "Bearer [redacted]\n"
    assert scrub_names(AGENT).names == (_secrets.AGENT_TOKEN_NAME,)
    assert scrub_pieces(f"token: {AGENT[:30]}…") == "token: [redacted]…"  # cut by a column width
    kept = "send 'Authorization: Bearer nbchat_agent_…'; nbchat_agent_ids are 8 hex digits"
    assert scrub_pieces(kept) == kept


def test_a_urls_secret_parameters_are_scrubbed_and_the_rest_kept() -> None:
    assert scrub("http://127.0.0.1:8888/lab?token=abc123&reset") == \
        "http://127.0.0.1:8888/lab?token=[redacted]&reset"  # fmt: skip
    assert scrub("https://x.example/cb#access_token=ya29.A0b-c_d&state=1") == \
        "https://x.example/cb#access_token=[redacted]&state=1"  # fmt: skip
    assert scrub("GET /v1?api_key=K3y%2B0&X-Amz-Signature=ffee00 …") == \
        "GET /v1?api_key=[redacted]&X-Amz-Signature=[redacted] …"  # fmt: skip
    kept = "https://x.example/search?q=cell&page=2 token=abc (not a URL's) ?token=[redacted]"
    assert scrub_names(kept) == _secrets.Scrubbed(kept)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        ("key = 'sk-live-0123456789abcdef'\nx = ", "", ("key = '[redacted]'\nx = ", "")),
        ("x = 'sk-live-0123", "456789abcdef'", ("x = '[redacted]", "'")),  # across the cursor
        ("x = ", "'sk-live-0123456789abcdef' + y", ("x = ", "'[redacted]' + y")),
        ("a = 'sk-live-0123456789ab", "cdef'; b = 'sk-live-0123456789abcdef'",
         ("a = '[redacted]", "'; b = '[redacted]'")),
        ("print(", ")", ("print(", ")")),
    ],
)
def test_the_code_around_a_cursor_is_scrubbed_as_one_text(
    monkeypatch: pytest.MonkeyPatch, before: str, after: str, expected: tuple[str, str]
) -> None:
    monkeypatch.setenv("MY_LIVE_KEY", "sk-live-0123456789abcdef")
    assert scrub_around(before, after) == expected


# -- minting, from the command line -------------------------------------------------------
def mint_command(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nbchat", "agents", "mint", "cli agent", *extra]


def command_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "JPY_PARENT_PID"}
    return {**env, "NBCHAT_AGENT_TOKENS": str(tmp_path / "tokens"), "NBCHAT_USER": "ana", **extra}


def on_a_terminal(command: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` with a pseudo-terminal as its stdout and stderr; its code and output."""
    leader, follower = pty.openpty()
    with subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=follower,
                          stderr=follower) as process:  # fmt: skip
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            shown += chunk
        code = process.wait(60)
    os.close(leader)
    return code, shown.decode()


def test_minting_through_a_pipe_shows_no_secret_and_mints_nothing(tmp_path: Path) -> None:
    ran = subprocess.run(mint_command(tmp_path), env=command_env(tmp_path), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert ran.returncode == 1
    assert "nbchat_agent_" not in ran.stdout + ran.stderr
    assert ran.stdout == "" and len(ran.stderr.strip().splitlines()) == 1
    assert "terminal" in ran.stderr and "%chat --agent-token LABEL" in ran.stderr
    assert "--secret-file PATH" in ran.stderr
    assert TokenStore("ana", tmp_path / "tokens").tokens() == []


def test_minting_on_a_terminal_shows_the_secret_once(tmp_path: Path) -> None:
    code, shown = on_a_terminal(mint_command(tmp_path, "--tools", "read"), command_env(tmp_path))
    assert code == 0, shown
    (secret,) = [match.group() for match in AGENT_TOKEN.finditer(shown)]
    assert "shown only now" in shown
    assert TokenStore("ana", tmp_path / "tokens").verify(secret).classes == ("read",)


def test_a_kernels_pseudo_terminal_is_not_a_terminal(tmp_path: Path) -> None:
    """A notebook's ``!python -m nbchat agents mint`` runs on a pty whose output it keeps."""
    env = command_env(tmp_path, JPY_PARENT_PID=str(os.getpid()))
    code, shown = on_a_terminal(mint_command(tmp_path), env)
    assert code == 1 and "nbchat_agent_" not in shown and "%chat --agent-token" in shown
    assert TokenStore("ana", tmp_path / "tokens").tokens() == []


def test_minting_into_a_private_file(tmp_path: Path) -> None:
    target = tmp_path / "agent.token"
    ran = subprocess.run(mint_command(tmp_path, "--secret-file", str(target)),
                         env=command_env(tmp_path), capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "nbchat_agent_" not in ran.stdout + ran.stderr and str(target) in ran.stdout
    assert target.stat().st_mode & 0o777 == 0o600
    secret = target.read_text().strip()
    assert TokenStore("ana", tmp_path / "tokens").verify(secret).label == "cli agent"
    again = subprocess.run(mint_command(tmp_path, "--secret-file", str(target)),
                           env=command_env(tmp_path), capture_output=True, text=True,
                           timeout=60)  # fmt: skip
    assert again.returncode == 1 and "exists" in again.stderr
    assert target.read_text().strip() == secret  # never overwritten
    assert len(TokenStore("ana", tmp_path / "tokens").tokens()) == 1
