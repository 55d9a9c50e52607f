"""Outside agents, from the notebook's side.

:func:`this_kernel_server` serves this kernel through nbchat's MCP tools to
one agent token, in-process: the same tools, checks and gate as the Jupyter
server's ``nbchat/mcp`` endpoint, for tutorials and tests where no Jupyter
server runs. :func:`variables_text` and :func:`describe_text` are the reads
the endpoint asks the kernel for.
"""

from ._kernel import KernelNotebooks, describe_text, this_kernel_server, variables_text

__all__ = ["KernelNotebooks", "describe_text", "this_kernel_server", "variables_text"]
