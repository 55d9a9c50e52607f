"""What an outside agent or a model is handed holds neither the Jupyter server's token nor
another agent's.

A real Jupyter server with nbchat's endpoint, its kernels' model a scripted
server. The server's token reaches a notebook the way it does in practice
(``!jupyter server list`` prints ``http://…/?token=…``), and so does an nbchat
agent token wider than the reader's (the output of minting one in a cell).
Each is read back the ways an agent reads: ``read_cells`` of the saved cell,
``call_status`` of a run that prints it and raises with it; and a question
in the notebook sends it to the model.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import nbformat
import pytest

from agent_helpers import (
    agent_server,
    kernel_client,
    mcp_call,
    mint,
    result_data,
    run_cell,
    start_session,
    tokens,
)
from nbchat.testing import Reply, ScriptedServer

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(240)]
NOTEBOOK = "one.ipynb"
URL_TOKEN = re.compile(r"\?token=([0-9a-f]+)")


@pytest.fixture(scope="module")
def scripted() -> Any:
    with ScriptedServer(Reply("Noted.")) as server:
        yield server


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-secrets")


@pytest.fixture(scope="module")
def lab(base: Path, scripted: ScriptedServer) -> Any:
    with agent_server(base, env={"NBCHAT_BASE_URL": scripted.url}) as server:
        yield server


@pytest.fixture(scope="module")
def kernel(lab: Any) -> Any:
    """A client on the kernel of ``one.ipynb``, the notebook the narrow token may read."""
    nbformat.write(nbformat.v4.new_notebook(), lab.root_dir / NOTEBOOK)
    client = kernel_client(lab, start_session(lab, NOTEBOOK))
    yield client
    client.stop_channels()


@pytest.fixture(scope="module")
def wide(base: Path) -> str:
    """An agent token that may touch every notebook."""
    return mint(base, "wide")


@pytest.fixture(scope="module")
def narrow(base: Path) -> str:
    """An agent token scoped to ``one.ipynb``."""
    return mint(base, "narrow", paths=[NOTEBOOK])


def holds_none(text: str, *secrets: str) -> bool:
    """Whether ``text`` holds none of ``secrets``, nor their random halves."""
    return not any(s in text or s[-24:] in text for s in secrets)


def test_the_servers_token_printed_in_a_cell_opens_its_api(lab: Any, kernel: Any) -> None:
    listing = run_cell(kernel, "!jupyter server list")
    assert URL_TOKEN.findall(listing) == [lab.token]  # what a cell really shows
    request = urllib.request.Request(f"{lab.url}/api/kernels",
                                     headers={"Authorization": f"token {lab.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200  # so it must never reach an agent


def test_read_cells_hands_neither_the_servers_token_nor_a_wider_agents(
    lab: Any, kernel: Any, wide: str, narrow: str
) -> None:
    listing = run_cell(kernel, "!jupyter server list")
    stream = nbformat.v4.new_output
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("!jupyter server list",
                                  outputs=[stream("stream", name="stdout", text=listing)]),
        nbformat.v4.new_code_cell("!python -m nbchat agents mint wide", outputs=[stream(
            "stream", name="stdout", text=f"Agent token for 'wide'; it is shown only now:\n{wide}",
        )]),
        nbformat.v4.new_code_cell("connect(url)", outputs=[stream(
            "error", ename="ConnectionError", evalue=f"cannot reach {lab.url}/?token={lab.token}",
            traceback=[],
        )]),
    ]  # fmt: skip
    nbformat.write(notebook, lab.root_dir / NOTEBOOK)
    text = result_data(mcp_call(lab, narrow, "read_cells", path=NOTEBOOK))["result"]
    assert holds_none(text, lab.token, wide)
    assert "?token=[redacted]" in text and "it is shown only now:\n[redacted]" in text
    assert "ConnectionError: cannot reach" in text


def test_call_status_of_a_run_hands_neither_token(
    lab: Any, kernel: Any, wide: str, narrow: str
) -> None:
    run_cell(kernel, f"wide_token = {wide!r}")
    code = (
        "import glob, json, os\n"
        "from jupyter_core.paths import jupyter_runtime_dir\n"
        "found = glob.glob(os.path.join(jupyter_runtime_dir(), 'jpserver-*.json'))\n"
        "server_token = json.load(open(found[0]))['token']\n"
        "print('server token:', server_token)\n"
        "print('wide token:', wide_token)\n"
        "raise RuntimeError('the token is ' + server_token + ', the other ' + wide_token)\n"
    )
    call = result_data(mcp_call(lab, narrow, "run_code", path=NOTEBOOK, code=code, why="look"))
    run_cell(kernel, f"%chat --answer {call['handle']} run")
    done = result_data(mcp_call(lab, narrow, "call_status", handle=call["handle"]))
    said = json.dumps(done)
    assert holds_none(said, lab.token, wide)
    assert "server token: [redacted]" in done["result"]
    assert "wide token: [redacted]" in done["result"]
    assert "RuntimeError: the token is [redacted], the other [redacted]" in done["result"]


def test_a_question_in_the_notebook_sends_neither_token_to_the_model(
    lab: Any, kernel: Any, scripted: ScriptedServer, wide: str
) -> None:
    run_cell(kernel, f"listing = !jupyter server list\nlisting = listing.n\nwide_token = {wide!r}\n"
                     "import glob, json, os\nfrom jupyter_core.paths import jupyter_runtime_dir\n"
                     "found = glob.glob(os.path.join(jupyter_runtime_dir(), 'jpserver-*.json'))\n"
                     "bare = json.load(open(found[0]))['token']")  # fmt: skip
    shown = run_cell(kernel, "%chat -n What do these say? {listing} and {wide_token}, {bare}")
    assert "Noted." in shown
    shown = run_cell(kernel, "%chat And these? @listing @wide_token @bare")
    assert "Noted." in shown
    sent = json.dumps([request.body for request in scripted.requests])
    assert "127.0.0.1" in sent and "?token=[redacted]" in sent  # the listing went, scrubbed
    assert holds_none(sent, lab.token, wide)


def test_minting_in_a_notebook_shows_no_secret_and_says_how(
    base: Path, kernel: Any
) -> None:
    shown = run_cell(kernel, "!python -m nbchat agents mint from-a-cell --scope one.ipynb")
    assert "nbchat_agent_" not in shown
    assert "%chat --agent-token" in shown and "terminal" in shown
    assert "from-a-cell" not in [token.label for token in tokens(base).tokens()]
