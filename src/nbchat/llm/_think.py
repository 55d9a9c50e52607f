"""Reasoning written inline: ``<think>…</think>`` at the start of the answer's text.

Models served without a reasoning parser (DeepSeek-R1 distills, Qwen3 and
others on plain llama.cpp or gateways) put their thinking in the content.
:class:`ThinkSplitter` takes the content in arbitrary pieces (a tag may be
split across pieces) and sends the thinking apart from the answer. Only a
``<think>`` before any answer text opens reasoning, so an answer that talks
about the tag is left alone.
"""

from __future__ import annotations

from ..base.events import ReasoningDelta, TextDelta

OPEN = "<think>"
CLOSE = "</think>"


class ThinkSplitter:
    """Content pieces in, answer and reasoning deltas out."""

    __slots__ = ("_held", "_state")

    def __init__(self) -> None:
        self._state = "start"  # start → think → lead → text; or start → text
        self._held = ""

    @property
    def is_done(self) -> bool:
        """True once no more reasoning can come: content can skip :meth:`feed`."""
        return self._state == "text" and not self._held

    def feed(self, piece: str) -> list[TextDelta | ReasoningDelta]:
        """The deltas completed by ``piece``."""
        out: list[TextDelta | ReasoningDelta] = []
        text, self._held = self._held + piece, ""
        while text:
            if self._state == "text":
                out.append(TextDelta(text))
                break
            if self._state == "start":
                stripped = text.lstrip()
                if stripped.startswith(OPEN):
                    self._state, text = "think", stripped[len(OPEN) :]
                elif not stripped or OPEN.startswith(stripped):
                    self._held = text  # whitespace or the start of the tag: wait
                    break
                else:
                    self._state = "text"
            elif self._state == "think":
                end = text.find(CLOSE)
                if end >= 0:
                    if end:
                        out.append(ReasoningDelta(text[:end]))
                    self._state, text = "lead", text[end + len(CLOSE) :]
                    continue
                keep = _partial_suffix(text, CLOSE)
                if len(text) > keep:
                    out.append(ReasoningDelta(text[: len(text) - keep]))
                self._held = text[len(text) - keep :]
                break
            else:  # lead: the blank lines between the thinking and the answer
                text = text.lstrip()
                if text:
                    self._state = "text"
        return out

    def close(self) -> list[TextDelta | ReasoningDelta]:
        """What is still held when the content ends."""
        held, self._held = self._held, ""
        if not held:
            return []
        if self._state == "think":
            return [ReasoningDelta(held)]
        return [TextDelta(held)] if held.strip() else []


def split_think(text: str) -> tuple[str, str]:
    """A whole answer split into (answer, reasoning)."""
    splitter = ThinkSplitter()
    events = splitter.feed(text) + splitter.close()
    answer = "".join(e.text for e in events if type(e) is TextDelta)
    reasoning = "".join(e.text for e in events if type(e) is ReasoningDelta)
    return answer, reasoning


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that begins ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0
