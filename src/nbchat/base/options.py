"""Generation options: what bounds and tunes an answer, and where each value comes from.

Known options are checked here (``max_tokens``, ``temperature``, ``top_p``,
``seed``, ``stop``, ``tool_choice``, and Anthropic's ``thinking`` budget and
``prompt_cache`` switch); any other key is provider-specific
(``num_ctx``, ``top_k``, ``repeat_penalty``, ``logit_bias``, …) and passes
through to the endpoint untouched. Layers merge lowest first: ``NBCHAT_OPTIONS``,
then the session (``%config ChatMagics.options``), the thread, the call. A key
set to ``None`` in a higher layer removes it.

>>> merge_options({"max_tokens": 800, "seed": 1}, {"max_tokens": 300, "seed": None})
{'max_tokens': 300}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .config import ENV_OPTIONS
from .errors import ConfigError, InputError

KNOWN_OPTIONS: tuple[str, ...] = (
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "tool_choice",
    "thinking",
    "prompt_cache",
)
MIN_THINKING = 1024  # the smallest thinking budget Anthropic accepts
# Fields nbchat sets itself: an option must not replace them.
RESERVED: frozenset[str] = frozenset({"model", "messages", "stream", "stream_options", "tools"})
TOOL_CHOICES: tuple[str, ...] = ("auto", "none", "required")
TITLE_OPTIONS: dict[str, Any] = {"max_tokens": 24, "temperature": 0.2}

Options = dict[str, Any]


def check_options(options: Mapping[str, Any] | None, *, source: str = "options") -> Options:
    """A checked copy of ``options``; a bad value raises InputError naming the option."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InputError(
            f"{source} must be a dict such as {{'max_tokens': 300}}, got {type(options).__name__}"
        )
    checked: Options = {}
    for key, value in options.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"{source}: option names are strings, got {key!r}")
        if key in RESERVED:
            raise InputError(
                f"{source}: {key!r} is set by nbchat, not an option; "
                f"use the model argument (-m) or the history instead"
            )
        checked[key] = value if value is None else _checked(key, value, source)
    return checked


def merge_options(*layers: Mapping[str, Any] | None) -> Options:
    """The layers merged, later ones winning; a ``None`` value removes the key."""
    merged: Options = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
    return merged


def env_options() -> Options:
    """The defaults in ``NBCHAT_OPTIONS``: a JSON object, or ``key=value`` pairs split by commas."""
    text = os.environ.get(ENV_OPTIONS, "").strip()
    if not text:
        return {}
    try:
        if text.startswith("{"):
            data = json.loads(text)
        else:
            data = dict(_pair(part) for part in text.split(",") if part.strip())
        return check_options(data, source=ENV_OPTIONS)
    except (ValueError, InputError) as exc:
        raise ConfigError(
            f"{ENV_OPTIONS} is not understood ({exc}); write it as JSON, e.g. "
            f'{ENV_OPTIONS}=\'{{"max_tokens": 800}}\', or as max_tokens=800,temperature=0.2'
        ) from None


def parse_value(text: str) -> Any:
    """An option value written as text: JSON when it parses (numbers, lists), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _pair(part: str) -> tuple[str, Any]:
    key, sep, value = part.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{part.strip()!r} is not key=value")
    return key.strip(), parse_value(value.strip())


def _checked(key: str, value: Any, source: str) -> Any:
    if key == "max_tokens":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{source}: max_tokens must be a whole number above 0, got {value!r}")
    elif key in ("temperature", "top_p"):
        top = 1.0 if key == "top_p" else 2.0
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
            raise InputError(f"{source}: {key} must be a number from 0 to {top:g}, got {value!r}")
    elif key == "seed":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{source}: seed must be a whole number, got {value!r}")
    elif key == "stop":
        return _checked_stop(value, source)
    elif key == "tool_choice":
        return _checked_tool_choice(value, source)
    elif key == "thinking":
        if isinstance(value, bool) or not isinstance(value, (int, dict)) or (
            isinstance(value, int) and value < MIN_THINKING
        ):
            raise InputError(
                f"{source}: thinking is a budget of {MIN_THINKING} tokens or more (e.g. 2048), "
                f"got {value!r}"
            )
    elif key == "prompt_cache":
        if not isinstance(value, bool):
            raise InputError(f"{source}: prompt_cache is true or false, got {value!r}")
    else:
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise InputError(
                f"{source}: option {key!r} must be JSON-like (numbers, strings, lists, dicts), "
                f"got {type(value).__name__}"
            ) from None
    return value


def _checked_stop(value: Any, source: str) -> Any:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) and v for v in value):
        return list(value)
    raise InputError(f"{source}: stop must be a string or a list of strings, got {value!r}")


def _checked_tool_choice(value: Any, source: str) -> Any:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value:
        if value in TOOL_CHOICES:
            return value
        return {"type": "function", "function": {"name": value}}
    raise InputError(
        f"{source}: tool_choice is one of {', '.join(TOOL_CHOICES)} or a tool's name, "
        f"got {value!r}"
    )
