"""Notebook context in a real kernel: pandas, numpy and inline matplotlib objects, run_code."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kernel_helpers import Kernel, module_kernel
from nbchat.engine._title_workers import TITLE_PROMPT
from nbchat.testing import Reply, ScriptedServer
from wire_helpers import content_parts

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as started:
        yield started


@pytest.fixture(scope="module")
def kernel(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    setup = ("%load_ext nbchat\n%matplotlib inline\nimport numpy as np\nimport pandas as pd\n"
             "import matplotlib.pyplot as plt")
    with module_kernel(tmp_path_factory, server, setup) as started:
        yield started


def asked(server: ScriptedServer) -> list[Any]:
    return [r for r in server.chat_requests if r.messages[0].get("content") != TITLE_PROMPT]


def stdout(run) -> str:
    return "".join(o["text"] for o in run.outputs if o["output_type"] == "stream"
                   and o["name"] == "stdout")


def test_a_dataframe_and_an_array_go_as_context(kernel: Kernel, server: ScriptedServer):
    kernel.ok("df = pd.DataFrame({'city': ['Oslo', 'Lima'] * 500, 'price': np.arange(1000.0)})\n"
              "weights = np.linspace(0, 1, 10_000_000)")
    run = kernel.ok("%chat -n Compare @df.price with @weights", interactive=False)
    assert stdout(run).splitlines()[0] == (
        "context: df.price (Series 1,000 (float64)), weights (ndarray 10,000,000 float64)"
    )
    content = content_parts(asked(server)[-1].messages[-1]["content"])
    assert content[0] == {"type": "text", "text": "Compare @df.price with @weights"}
    assert content[1]["text"].startswith("Attached below, each in a <context> block")
    assert content[2]["text"].startswith(
        '<context name="df.price" kind="Series 1,000 (float64)">\n'
        "pandas Series 'price': 1,000 values, dtype float64, 0 null"
    )
    assert "min 0, max 1; mean 0.5" in content[3]["text"]


def test_the_inline_figure_goes_as_an_image(kernel: Kernel, server: ScriptedServer):
    kernel.ok("fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nax.set_ylabel('count');")
    run = kernel.ok("%chat --figure What does the plot show?", interactive=False)
    assert stdout(run).splitlines()[0] == "context: figure (Figure 1 axes)"
    request = asked(server)[-1]
    assert len(request.images) == 1 and request.images[0][:4] == b"\x89PNG"
    assert "y 'count'" in request.messages[-1]["content"][2]["text"]


def test_agent_code_runs_in_the_user_namespace_after_the_answer(
    kernel: Kernel, server: ScriptedServer
):
    server.script(
        Reply(tool_calls=[("run_code", {"code": "by_city = df.groupby('city').price.mean()\n"
                                                 "print(len(by_city))\nby_city.round(1)"})],
              when="per city", times=1),
        Reply("Lima's mean is higher.", after_tool="run_code", times=1),
    )
    run = kernel.ok("%chat --agent What is the mean price per city?", interactive=False)
    assert "by_city" not in kernel.ok("print(sorted(globals()))").text()
    assert "run_code" in run.text()
    run = kernel.ok("%chat --answer run", interactive=False)
    assert "Lima's mean is higher." in run.text()
    result = asked(server)[-1].messages[-1]["content"]
    assert result.startswith("<answer>\nstdout:\n2\nresult:\ncity\nLima    500.0\nOslo    499.0")
    assert kernel.ok("print(by_city.to_dict())").text().strip() == "{'Lima': 500.0, 'Oslo': 499.0}"


def test_an_interrupt_stops_the_running_code_and_the_turn(kernel: Kernel, server: ScriptedServer):
    server.script(
        Reply(tool_calls=[("run_code", {"code": "import time\nfor step in range(600):\n"
                                                 "    print(step, flush=True)\n"
                                                 "    time.sleep(0.05)"})],
              when="count slowly", times=1),
        Reply("Never reached.", after_tool="run_code"),
    )
    kernel.ok("%chat -n --agent count slowly", interactive=False)
    requests = len(server.chat_requests)

    pid = int(kernel.ok("import os\nprint(os.getpid())").stdout)
    # SIGINT is what an interrupt sends; the code is in its loop by then
    timer = threading.Timer(1.5, os.kill, (pid, signal.SIGINT))
    timer.start()
    run = kernel.run("%chat --answer run", interactive=False)
    timer.join()
    assert run.status == "error" and run.reply["ename"] == "KeyboardInterrupt"
    assert int(kernel.ok("print(step)").stdout) < 599  # the loop stopped early
    assert len(server.chat_requests) == requests  # the model was not asked again
    status = kernel.ok(
        "from nbchat import Chat\nt = Chat().store.get(Chat().threads()[0].id).turns[-1]\n"
        "print(t.status, t.messages[-1]['content'])"
    ).stdout.strip()
    assert status == "interrupted The user interrupted the run; it did not finish."
