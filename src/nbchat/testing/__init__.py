"""A scripted OpenAI-, Ollama-, Anthropic- and Gemini-compatible chat server on loopback.

The test double of nbchat's suite, the model behind the tutorial notebooks and
the offline demo model. Standard library only, and independent of the rest of
nbchat, so the client and its fake cannot share a bug.
"""

from ._script import Reply, load_script
from ._server import DEFAULT_MODELS, RecordedRequest, ScriptedServer, demo_server

__all__ = [
    "DEFAULT_MODELS",
    "RecordedRequest",
    "Reply",
    "ScriptedServer",
    "demo_server",
    "load_script",
]
