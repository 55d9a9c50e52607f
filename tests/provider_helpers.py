"""The wire formats the engine is tested on: each test that takes ``provider`` runs on all three."""

from __future__ import annotations

from nbchat.testing import ScriptedServer

PROVIDERS = ("openai", "ollama", "anthropic")


def base_url(server: ScriptedServer, provider: str) -> str:
    """Where ``provider``'s client reaches the scripted server."""
    return {
        "openai": server.url, "ollama": server.ollama_url, "anthropic": server.anthropic_url,
    }[provider]  # fmt: skip
