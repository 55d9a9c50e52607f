"""The engine: Chat (threads and the turn loop), LLM, ChatHistory, titles, endings, usage.

It imports the layers below it (context, MCP, the model client, the stores,
tools, base) and never IPython, ipywidgets or the Jupyter front ends above it.
"""
