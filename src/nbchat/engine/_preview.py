"""A preview: the request a question would send, taken apart for a person, not sent.

:func:`preview_of` reads the very request the turn's first round would send
(:func:`~._turn.round_request`, then :meth:`LLMClient.request`, the provider's
own body builder) and labels its pieces: each message in order with its role
and where it came from (the system prompt, the project instructions, earlier
turn N, ``@df``, a figure, the summary of early turns, the tool schemas), its
estimated tokens, the share of the model's window, the cost at the configured
prices, the turns the window left out, and where secrets were scrubbed (by the
variable's name, never the value).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..base._secrets import REDACTED, Scrubbed, known_secrets, scrub_names
from ..base.content import CONTEXT_NOTE, ContextItem, estimate_tokens
from ..base.messages import Message
from ..llm.client import ChatRequest
from ._turn import TurnSpec, round_request
from ._usage import Price
from .history import split_turns

__all__ = ["Preview", "PreviewPart", "preview_of"]

IMAGE_TOKENS = 800  # what the window counts for one picture (see history._message_tokens)
OVERHEAD = 4  # the role and framing tokens of one message
EARLIER = "the name was not kept: it was scrubbed when this was made"


@dataclass(frozen=True)
class PreviewPart:
    """One piece of the request: which message it is in, its role, its source and text."""

    message: int  # index of its message in the request (-1: the tool schemas)
    role: str  # system, user, assistant, tool, or "tools" for the schemas
    source: str  # "system prompt", "earlier turn 3", "@df", "the question", ...
    text: str  # what the model reads of it (an image: its description)
    tokens: int  # estimated
    turn: int | None = None  # 0-based index of the thread's turn it comes from
    image: bool = False
    scrubbed: tuple[str, ...] = ()  # variables whose values were replaced in it
    unscrubbed: tuple[str, ...] = ()  # secret-named variables whose values it holds as typed


@dataclass(frozen=True)
class Preview:
    """The request a question would send, not sent: its parts, size, share, cost, secrets.

    ``content`` is the body's bytes exactly as the next identical question
    sends them; ``body`` the same as JSON.
    """

    model: str
    provider: str
    url: str
    parts: tuple[PreviewPart, ...]
    tokens: int  # estimated prompt tokens, the tool schemas included
    context_size: int | None  # the model's window, when known
    left_out: tuple[int, ...]  # 0-based indexes of earlier turns the window leaves out
    cost: float | None  # estimated dollars of the prompt; None without a price for the model
    max_cost: float | None  # with an answer of max_tokens, when that is set
    body: dict = field(repr=False, compare=False)
    content: bytes = field(repr=False, compare=False)
    summary_of: tuple[int, ...] = ()  # turns a summary stands for in this request
    needs_summary: bool = False  # the question would first make a summary (not made here)

    @property
    def share(self) -> float | None:
        """The part of the model's window the request takes (0.25 is a quarter), when known."""
        return self.tokens / self.context_size if self.context_size else None

    @property
    def scrubs(self) -> list[tuple[str, str]]:
        """(source, variable name) of every place a secret was scrubbed, in request order."""
        return [(part.source, name) for part in self.parts for name in part.scrubbed]

    @property
    def messages(self) -> int:
        """How many messages the request holds."""
        return 1 + max((p.message for p in self.parts), default=-1)


@dataclass(frozen=True)
class Sources:
    """What tells the parts apart: the thread's turns behind the earlier messages, the prompts."""

    turns: Sequence[int] = ()  # thread turn index of each earlier turn in the history
    instructions: str = ""  # the project instructions joined to it
    summary: str = ""  # the summary of early turns joined to it
    summary_of: tuple[int, ...] = ()
    left_out: tuple[int, ...] = ()
    needs_summary: bool = False


def preview_of(
    spec: TurnSpec,
    request: ChatRequest,
    provider: str,
    sources: Sources,
    price: Price | None = None,
    noted: Sequence[Scrubbed] = (),
) -> Preview:
    """The preview of the first request of the turn ``spec``, whose bytes are ``request``."""
    sent = round_request(spec)
    history = spec.context
    parts = [*_system_parts(history.system, sources)]
    first = 1 if history.system else 0
    messages = list(history)
    earlier = split_turns(messages[:-1]) if messages else []
    turns = list(sources.turns)[-len(earlier):] if earlier else []
    index = first
    for turn, group in zip(turns, earlier, strict=True):
        for message in group:
            parts += _message_parts(message, index, f"earlier turn {turn + 1}", turn)
            index += 1
    if messages:
        parts += _message_parts(messages[-1], index, "the question", None)
    if sent.tools:
        names = ", ".join(t.get("function", {}).get("name", "?") for t in sent.tools)
        text = json.dumps(sent.tools, indent=1)
        parts.append(PreviewPart(-1, "tools", f"tool schemas ({names})", text,
                                 estimate_tokens(json.dumps(list(sent.tools)))))  # fmt: skip
    secrets = known_secrets()
    parts = [_with_secrets(part, noted, secrets) for part in parts]
    tokens = sum(part.tokens for part in parts)
    limit = spec.options.get("max_tokens")
    cost = None if price is None else price.cost(tokens, 0)
    max_cost = price.cost(tokens, limit) if price is not None and isinstance(limit, int) else None
    return Preview(
        request.model, provider, request.url, tuple(parts), tokens, spec.context_size,
        sources.left_out, cost, max_cost, request.body, request.content, sources.summary_of,
        sources.needs_summary,
    )  # fmt: skip


def _system_parts(system: str | None, sources: Sources) -> Iterator[PreviewPart]:
    """The system message as its pieces: the thread's prompt, the instructions, the summary."""
    if not system:
        return
    rest = system
    pieces: list[tuple[str, str]] = []
    for source, piece in (("summary of earlier turns", sources.summary),
                          ("project instructions", sources.instructions)):  # fmt: skip
        if piece and rest.endswith(piece):
            pieces.insert(0, (source, piece))
            rest = rest[: len(rest) - len(piece)].removesuffix("\n\n")
    if rest:
        pieces.insert(0, ("system prompt", rest))
    for number, (source, text) in enumerate(pieces):
        tokens = estimate_tokens(text) + (OVERHEAD if number == 0 else 0)
        yield PreviewPart(0, "system", source, text, tokens)


def _message_parts(
    message: Message, index: int, source: str, turn: int | None
) -> Iterator[PreviewPart]:
    """One message's pieces: its text (or tool calls), then each attached context item."""
    role = message.role
    label = source
    if role == "assistant":
        label += " (answer)" if not message.tool_calls else " (tool calls)"
    elif role == "tool":
        label += f" (result of {message.name or 'a tool'})"
    elif turn is not None:
        label += " (question)"
    text = message.content
    calls = "\n".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
    text = "\n".join(t for t in (text, calls) if t)
    call_tokens = sum(OVERHEAD + estimate_tokens(c.name) + estimate_tokens(c.arguments)
                      for c in message.tool_calls)  # fmt: skip
    yield PreviewPart(index, role, label, text,
                      OVERHEAD + estimate_tokens(message.content) + call_tokens, turn)  # fmt: skip
    if message.context:
        yield PreviewPart(index, role, "context note", CONTEXT_NOTE,
                          estimate_tokens(CONTEXT_NOTE), turn)  # fmt: skip
    for item in message.context:
        yield _item_part(item, index, turn)


def _item_part(item: ContextItem, index: int, turn: int | None) -> PreviewPart:
    source = f"@{item.name}" if item.image is None else f"figure @{item.name}"
    if item.name == "figure" or item.name == "last_error":
        source = "figure" if item.name == "figure" else "the last error (--fix)"
    if turn is not None:
        source += f" of earlier turn {turn + 1}"
    text = item.as_text()
    tokens = estimate_tokens(text) + (IMAGE_TOKENS if item.image is not None else 0)
    return PreviewPart(index, "user", source, text, tokens, turn, item.image is not None)


def _with_secrets(part: PreviewPart, noted: Iterable[Scrubbed],
                  secrets: dict[str, str]) -> PreviewPart:  # fmt: skip
    """``part`` with the names of what was scrubbed in it, and of what it holds as typed."""
    names: list[str] = []
    if REDACTED in part.text:
        for done in noted:
            if _came_from(part.text, done.text):
                names += done.names
        if not names:
            names.append(EARLIER)
    typed = scrub_names(part.text, secrets).names
    if not names and not typed:
        return part
    return PreviewPart(
        part.message, part.role, part.source, part.text, part.tokens, part.turn, part.image,
        tuple(dict.fromkeys(names)), typed,
    )  # fmt: skip


def _came_from(text: str, scrubbed: str) -> bool:
    """Whether the scrubbed ``scrubbed`` is in ``text``, whole or cut after its first redaction."""
    if scrubbed in text:
        return True
    start = scrubbed.find(REDACTED)
    if start < 0:
        return False
    around = scrubbed[max(0, start - 40): start + len(REDACTED) + 40]
    head = scrubbed[max(0, start - 40): start + len(REDACTED)]
    return around in text or (head in text and len(head) > len(REDACTED))
