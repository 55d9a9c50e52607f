"""The turn loop: ask the model, run kernel tools, suspend on client tools.

One loop, used by every front end. What a turn changes is written through a
*recorder* (the thread store for threads, a ChatHistory or nothing for
history-only turns), so the loop itself neither renders nor persists.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import NbchatError, ToolError
from .events import (
    Event,
    TextDelta,
    ToolCall,
    ToolCallPending,
    ToolCallRequested,
    ToolResult,
    TurnFailed,
    TurnFinished,
    TurnStarted,
    TurnStatus,
    Usage,
    UsageReported,
)
from .llm import LLMClient
from .records import PendingCall, Prompt, RecordError
from .tools import ClientTool, KernelTool, Toolbox, ToolContext

CHECKPOINT_SECONDS = 2.0


class Recorder(Protocol):
    """Where a turn's progress goes."""

    def checkpoint(self, text: str, messages: list[dict[str, Any]]) -> None:
        """Partial progress, so that a killed process loses little."""

    def finish(
        self,
        status: str,
        text: str,
        messages: list[dict[str, Any]],
        *,
        pending: list[PendingCall] = ...,
        error: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        """The turn's outcome: complete, suspended, interrupted or failed."""


class NullRecorder:
    """Records nothing (one-off questions)."""

    def checkpoint(self, text: str, messages: list[dict[str, Any]]) -> None:
        pass

    def finish(self, status: str, text: str, messages: list[dict[str, Any]], **_: Any) -> None:
        pass


@dataclass
class TurnSpec:
    """Everything one run of the loop needs."""

    llm: LLMClient
    model: str
    context: list[dict[str, Any]]  # system + earlier turns + the query
    toolbox: Toolbox
    tool_context: ToolContext
    recorder: Recorder
    thread_id: int | None = None
    turn: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)  # produced so far this turn
    text: str = ""  # answer text so far this turn (a resumed turn starts with it)
    max_rounds: int = 8
    suspendable: bool = True


def run_turn(spec: TurnSpec) -> Iterator[Event]:
    """Events of one turn, from the first request to finished, suspended or failed."""
    started = time.monotonic()
    yield TurnStarted(spec.thread_id, spec.turn, spec.model)
    parts = [spec.text] if spec.text else []
    usage: Usage | None = None

    def finish(status: TurnStatus, pending: Sequence[PendingCall] = ()) -> TurnFinished:
        """Record the outcome, then the event that says it."""
        text = "".join(parts)
        spec.recorder.finish(status, text, spec.messages, pending=list(pending), usage=usage)
        return TurnFinished(
            spec.thread_id, spec.turn, text, status, spec.model, usage, time.monotonic() - started
        )

    for round_number in range(spec.max_rounds + 1):
        separate = bool(parts)  # rounds of text are paragraphs of one answer
        round_start = len(parts)
        calls: list[ToolCall] = []
        tools = spec.toolbox.schemas() if round_number < spec.max_rounds else None
        try:
            last_checkpoint = time.monotonic()
            for event in spec.llm.stream(
                spec.context + spec.messages, model=spec.model, tools=tools
            ):
                if type(event) is TextDelta:
                    if separate:
                        separate = False
                        parts.append("\n\n")
                        round_start += 1
                        yield TextDelta("\n\n")
                    parts.append(event.text)
                    yield event
                    if time.monotonic() - last_checkpoint > CHECKPOINT_SECONDS:
                        spec.recorder.checkpoint("".join(parts), spec.messages)
                        last_checkpoint = time.monotonic()
                elif type(event) is ToolCallRequested:
                    calls.append(event.call)
                    yield event
                elif type(event) is UsageReported:
                    usage = _add(usage, event.usage)
                    yield event
        except (KeyboardInterrupt, GeneratorExit):
            spec.messages = _with_text(spec.messages, parts[round_start:])
            finish("interrupted")
            raise
        except NbchatError as error:
            text = "".join(parts)
            spec.recorder.finish(
                "failed", text, _with_text(spec.messages, parts[round_start:]), error=str(error)
            )
            yield TurnFailed(spec.thread_id, spec.turn, error, text)
            return
        round_text = "".join(parts[round_start:])
        if not calls:
            spec.messages.append({"role": "assistant", "content": round_text})
            yield finish("complete")
            return
        spec.messages.append(
            {"role": "assistant", "content": round_text, "tool_calls": [c.to_dict() for c in calls]}
        )
        pending: list[PendingCall] = []
        for call in calls:
            result = _handle_call(spec, call, pending)
            if result is not None:
                spec.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "name": call.name,
                        "content": result.output,
                    }
                )
                yield result
        if pending:
            finished = finish("suspended", pending)
            yield from map(ToolCallPending, pending)
            yield finished
            return


def _handle_call(spec: TurnSpec, call: ToolCall, pending: list[PendingCall]) -> ToolResult | None:
    """Run a kernel tool, or queue a client tool as pending (returning None)."""
    try:
        tool = spec.toolbox.get(call.name)
        if isinstance(tool, KernelTool):
            return ToolResult(call, tool.run(call.arguments))
        assert isinstance(tool, ClientTool)
        arguments = tool.parse_arguments(call.arguments)
        tool.check_requirements(spec.tool_context, arguments)
        prompt = Prompt.from_dict(tool.prompt(arguments), default_question=call.name)
    except ToolError as error:  # bad arguments, unmet requirements, unknown tool
        return ToolResult(call, f"error: {error}", is_error=True)
    except RecordError as error:
        return ToolResult(call, f"error: the tool's prompt is malformed: {error}", is_error=True)
    except Exception as error:  # a kernel tool's own failure is the LLM's to see
        return ToolResult(call, f"error: {type(error).__name__}: {error}", is_error=True)
    if not spec.suspendable:
        return ToolResult(
            call, "error: this conversation cannot wait for the person's answer", is_error=True
        )
    pending.append(
        PendingCall(spec.thread_id or 0, spec.turn, call.id, call.name, arguments, prompt)
    )
    return None


def _with_text(messages: list[dict[str, Any]], round_parts: list[str]) -> list[dict[str, Any]]:
    text = "".join(round_parts).strip()
    return messages + [{"role": "assistant", "content": text}] if text else list(messages)


def _add(total: Usage | None, more: Usage) -> Usage:
    if total is None:
        return more
    return Usage(
        _sum(total.prompt_tokens, more.prompt_tokens),
        _sum(total.completion_tokens, more.completion_tokens),
    )


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)
