"""A kernel whose language is not Python: it echoes each cell back (the e2e tests' R or Julia).

Run as ``python echo_kernel.py -f CONNECTION_FILE`` from a kernelspec; see
``test_lab_extension.py``.
"""

from __future__ import annotations

from typing import Any

from ipykernel.kernelbase import Kernel


class EchoKernel(Kernel):
    implementation = "echo"
    implementation_version = "1.0"
    language = "echo"
    language_version = "1.0"
    language_info = {"name": "echo", "mimetype": "text/plain", "file_extension": ".txt"}
    banner = "Echo kernel: prints each cell back"

    async def do_execute(  # type: ignore[override]
        self, code: str, silent: bool, store_history: bool = True, *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        if not silent:
            self.send_response(self.iopub_socket, "stream", {"name": "stdout", "text": code})
        return {"status": "ok", "execution_count": self.execution_count, "payload": [],
                "user_expressions": {}}


if __name__ == "__main__":
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(kernel_class=EchoKernel)
