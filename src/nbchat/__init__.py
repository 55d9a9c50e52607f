"""Chat with large language models inside Jupyter."""

__version__ = "0.1.0"
