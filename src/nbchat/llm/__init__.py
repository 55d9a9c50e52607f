"""Talking to model endpoints: one client, one small module per wire format."""

from ._protocol import Provider, Reply
from .client import LLMClient

__all__ = ["LLMClient", "Provider", "Reply"]
