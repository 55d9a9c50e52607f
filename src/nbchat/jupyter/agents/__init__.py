"""Outside agents, from the notebook's side.

:func:`this_kernel_server` serves this kernel through nbchat's MCP tools to
one agent token, in-process: the same tools, checks and gate as the Jupyter
server's ``nbchat/mcp`` endpoint, for tutorials and tests where no Jupyter
server runs. :func:`variables_text` and :func:`describe_text` are the reads
the endpoint asks the kernel for. :func:`hosted_agents` is the kernel's host of
the coding agents ``%chat --with`` asks (ACP).
"""

from ._hosting import hosted_agents
from ._kernel import KernelNotebooks, describe_text, this_kernel_server, variables_text

__all__ = [
    "KernelNotebooks", "describe_text", "hosted_agents", "this_kernel_server", "variables_text",
]
