"""The turn loop: ask the model, run kernel tools, suspend on client tools.

One loop, used by every front end. What a turn changes is written through a
*recorder* (the thread store for threads, a ChatHistory or nothing for
history-only turns), so the loop itself neither renders nor persists.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..base.errors import ContextOverflow, EmptyAnswer, NbchatError, OverBudget, ToolError
from ..base.events import (
    ContextWindowed,
    Event,
    ReasoningBlock,
    ReasoningDelta,
    ReplyFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
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
from ..base.messages import Message, wire_messages
from ..base.records import PendingCall, Prompt, RecordError
from ..llm import LLMClient
from ..llm._stop import StopSignal
from ..tools import ClientTool, KernelTool, Toolbox, ToolContext
from ._budget import Spending, budget_call
from ._endings import BUDGET_REASON, SentCall, cut_note, ending_of, sendable_call, wire_tokens
from .history import ChatHistory

CHECKPOINT_SECONDS = 2.0


class Recorder(Protocol):
    """Where a turn's progress goes."""

    def checkpoint(self, text: str, messages: list[Message]) -> None:
        """Partial progress, so that a killed process loses little."""

    def finish(
        self,
        status: str,
        text: str,
        messages: list[Message],
        *,
        pending: list[PendingCall] = ...,
        error: str | None = None,
        usage: Usage | None = None,
        finish_reason: str | None = None,
        reasoning: str = "",
    ) -> None:
        """The turn's outcome: complete, incomplete, suspended, interrupted or failed."""


class NullRecorder:
    """Records nothing (one-off questions)."""

    def checkpoint(self, text: str, messages: list[Message]) -> None:
        pass

    def finish(self, status: str, text: str, messages: list[Message], **_: Any) -> None:
        pass


@dataclass
class TurnSpec:
    """Everything one run of the loop needs."""

    llm: LLMClient
    model: str
    context: ChatHistory  # the system prompt, the earlier turns that fit, the query
    toolbox: Toolbox
    tool_context: ToolContext
    recorder: Recorder
    thread_id: int | None = None
    turn: int = 0
    messages: list[Message] = field(default_factory=list)  # produced so far this turn
    text: str = ""  # answer text so far this turn (a resumed turn starts with it)
    max_rounds: int = 8
    suspendable: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)  # generation options, checked
    # Called once when the endpoint says the request is too long: a shorter context
    # and how many earlier turns it leaves out, or None when nothing can be left out.
    refit: Callable[[NbchatError], tuple[ChatHistory, int] | None] | None = None
    dropped_turns: int = 0  # earlier turns the context already leaves out
    summarized_turns: int = 0  # the thread's first turns, sent as a summary
    context_size: int | None = None
    # Told the endpoint's prompt token count of the turn's first request.
    calibrate: Callable[[int], None] | None = None
    stop: StopSignal | None = None  # set from another thread: the turn ends as interrupted
    # What the question may still spend: each request is checked before it is sent.
    spending: Spending | None = None
    usage: Usage | None = None  # what the turn reported already (a resumed turn), and its summary


@dataclass(frozen=True)
class RoundRequest:
    """What one round of a turn asks the endpoint with: messages, tool schemas, options."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    options: Mapping[str, Any]


def round_request(spec: TurnSpec, round_number: int = 0) -> RoundRequest:
    """The request of round ``round_number`` of the turn ``spec`` describes (its first: 0)."""
    tools = spec.toolbox.schemas() if round_number < spec.max_rounds else None
    options = spec.options if round_number == 0 else _unforced(spec.options)
    sent = wire_messages(spec.context.system, [*spec.context, *spec.messages])
    return RoundRequest(sent, tools, options)


def run_turn(spec: TurnSpec) -> Iterator[Event]:
    """Events of one turn, from the first request to finished, suspended or failed."""
    yield from _Turn(spec).run()  # begun when iterated, as the turn's clock is


@dataclass
class _Reply:
    """What one request brought back: where its text starts in the answer, its tool calls."""

    start: int  # index in the turn's text parts of this round's first part
    calls: list[ToolCall] = field(default_factory=list)
    blocks: list[dict[str, Any]] = field(default_factory=list)  # signed reasoning, sent back
    replied: bool = False  # the endpoint said the reply was done
    again: bool = False  # the context was shortened: ask this round again


class _Turn:
    """One run of the loop: the answer so far, and the steps of each round.

    A round is a request (:meth:`_request`), then either the end of the turn
    (:meth:`_end`) or its tool calls (:meth:`_run_tools`), whose results the
    next round sends.
    """

    def __init__(self, spec: TurnSpec) -> None:
        self.spec = spec
        self.started = time.monotonic()
        self.parts = [spec.text] if spec.text else []
        self.reasoning: list[str] = []
        self.usage: Usage | None = spec.usage
        self.finish_reason: str | None = None
        self.refitted = spec.refit is None  # the context is shortened at most once

    def run(self) -> Iterator[Event]:
        """The rounds, each a request then the end of the turn or its tool calls."""
        spec = self.spec
        yield TurnStarted(spec.thread_id, spec.turn, spec.model)
        if spec.dropped_turns or spec.summarized_turns:
            yield ContextWindowed(spec.dropped_turns, spec.context_size, spec.summarized_turns)
        round_number = 0
        while round_number <= spec.max_rounds:
            reply = yield from self._request(round_number)
            if reply is None:
                return
            if reply.again:
                continue
            if (yield from self._end(reply, last=round_number >= spec.max_rounds)):
                return
            if (yield from self._run_tools(reply)):
                return
            round_number += 1

    def _finish(
        self, status: TurnStatus, pending: Sequence[PendingCall] = (), note: str = "",
        error: str | None = None,
    ) -> TurnFinished:
        """Record the outcome, then the event that says it."""
        spec = self.spec
        text, thinking = "".join(self.parts), "".join(self.reasoning)
        spec.recorder.finish(
            status, text, spec.messages, pending=list(pending), usage=self.usage,
            finish_reason=self.finish_reason, reasoning=thinking, error=error,
        )  # fmt: skip
        return TurnFinished(
            spec.thread_id, spec.turn, text, status, spec.model, self.usage,
            time.monotonic() - self.started, self.finish_reason, thinking, note,
        )  # fmt: skip

    def _request(self, round_number: int) -> Generator[Event, None, _Reply | None]:
        """The request step: stream one reply; None when the turn failed there."""
        spec = self.spec
        reply = _Reply(start=len(self.parts))
        self.finish_reason = None
        try:
            yield from self._stream(round_number, reply)
        except OverBudget as error:  # raised before the request went out
            yield from self._over_budget(error)
            return None
        except (ContextOverflow, EmptyAnswer) as error:
            shorter = None if self._cannot_refit(reply) else self._refit(error)
            if shorter is None:
                yield from _failed(spec, self.parts, reply.start, error, self.usage)
                return None
            spec.context, dropped = shorter
            yield ContextWindowed(dropped, getattr(error, "context_size", None))
            reply.again = True
        except (KeyboardInterrupt, GeneratorExit):
            spec.messages = _with_text(spec.messages, self.parts[reply.start:])
            self._finish("interrupted")
            raise
        except NbchatError as error:
            yield from _failed(spec, self.parts, reply.start, error, self.usage)
            return None
        return reply

    def _over_budget(self, error: OverBudget) -> Iterator[Event]:
        """The next request would cross a budget: ask the person (a yes goes on from here),
        or stop with what the turn has (a hard cap, or a turn that cannot wait)."""
        spec = self.spec
        self.finish_reason = BUDGET_REASON
        if error.hard or not spec.suspendable or spec.spending is None or not spec.thread_id:
            yield self._finish("incomplete", note=f"stopped by the budget: {error}",
                               error=str(error))  # fmt: skip
            return
        call = budget_call(error, spec.spending.crossed, spec.thread_id, spec.turn)
        finished = self._finish("suspended", [call])
        yield ToolCallPending(call)
        yield finished

    def _cannot_refit(self, reply: _Reply) -> bool:
        """Whether a too-long request must fail: refitted once already, or a reply begun."""
        return self.refitted or len(self.parts) > reply.start or bool(reply.calls)

    def _refit(self, error: NbchatError) -> tuple[ChatHistory, int] | None:
        """A shorter context for the request ``error`` refused (once a turn), or None."""
        assert self.spec.refit is not None  # else the turn counts as refitted already
        self.refitted = True
        return self.spec.refit(error)

    def _stream(self, round_number: int, reply: _Reply) -> Iterator[Event]:
        """The reply's events, its text and calls kept; the text checkpointed now and then."""
        spec, parts = self.spec, self.parts
        separate = bool(parts)  # rounds of text are paragraphs of one answer
        monotonic, add_text = time.monotonic, parts.append  # once, not per chunk
        next_checkpoint = monotonic() + CHECKPOINT_SECONDS
        sent = round_request(spec, round_number)
        options = self._admitted(sent, round_number)
        for event in spec.llm.stream(
            sent.messages, model=spec.model, tools=sent.tools, options=options, stop=spec.stop,
        ):  # fmt: skip
            if type(event) is TextDelta:
                if separate:
                    separate = False
                    add_text("\n\n")
                    reply.start += 1
                    yield TextDelta("\n\n")
                add_text(event.text)
                yield event
                if monotonic() > next_checkpoint:
                    spec.recorder.checkpoint("".join(parts), spec.messages)
                    next_checkpoint = monotonic() + CHECKPOINT_SECONDS
            elif type(event) is ReplyFinished:
                self.finish_reason, reply.replied = event.finish_reason, True
            else:
                yield from self._note(event, round_number, reply)

    def _admitted(self, sent: RoundRequest, round_number: int) -> Mapping[str, Any]:
        """The request's options once its budget check passed (OverBudget if it fails)."""
        spec, spending = self.spec, self.spec.spending
        if spending is None or not spending.limited:
            return sent.options
        scale = max(1.0, spec.llm.token_scale(spec.model))  # never below the rough count
        tokens = int(wire_tokens(sent.messages, sent.tools) * scale)
        room = spec.context_size - tokens if spec.context_size else None
        return spending.admit(tokens, sent.options, spec.model, first=round_number == 0,
                              room=room)  # fmt: skip

    def _note(self, event: Event, round_number: int, reply: _Reply) -> Iterator[Event]:
        """Keep a reply event other than text: a call, reasoning, usage (passed on but blocks).

        A call's pieces only pass on (to show it as it is written): the call is kept whole.
        """
        if type(event) is ToolCallDelta:
            yield event
        elif type(event) is ToolCallRequested:
            reply.calls.append(event.call)
            yield event
        elif type(event) is ReasoningDelta:
            self.reasoning.append(event.text)
            yield event
        elif type(event) is ReasoningBlock:
            reply.blocks.append(event.block)
        elif type(event) is UsageReported:
            self.usage = add_usage(self.usage, event.usage)
            if self.spec.spending is not None:
                self.spec.spending.add(event.usage, self.spec.model)
            counted = event.usage.prompt_tokens
            if round_number == 0 and counted and self.spec.calibrate is not None:
                self.spec.calibrate(counted)
            yield event

    def _end(self, reply: _Reply, *, last: bool = False) -> Generator[Event, None, bool]:
        """The ending step: when the reply ends the turn, record it and say so (True).

        ``last``: the round offered no tools (the turn's rounds are spent), so a call
        the model still asks for is not run and the turn ends incomplete.
        """
        spec = self.spec
        calls, round_parts = reply.calls, self.parts[reply.start:]
        if spec.stop is not None and spec.stop.is_set() and (calls or not reply.replied):
            # A reply that ended whole before the stop stands; its tool calls do not run.
            spec.messages = _with_text(spec.messages, round_parts)
            yield self._finish("interrupted")
            return True
        ending = ending_of(self.finish_reason)
        if ending == "complete" and calls and not last:
            return False
        if ending == "complete" and calls:
            spec.messages.append(Message("assistant", "".join(round_parts)))
            note = (f"stopped after {spec.max_rounds} rounds of tool calls: the model asked "
                    f"for {calls[0].name} again, and it was not run; ask again to go on")
            yield self._finish("incomplete", note=note, error=note)
            return True
        # A reply the model did not finish may hold a cut-off tool call: never run it.
        spec.messages.append(Message("assistant", "".join(round_parts)))
        if ending == "complete":
            yield self._finish("complete")
            return True
        note = cut_note(ending, spec.options)
        if calls:
            note += f" (the {calls[0].name} call it was writing was cut off and not run)"
        yield self._finish("incomplete", note=note)
        return True

    def _run_tools(self, reply: _Reply) -> Generator[Event, None, bool]:
        """The tool step: run the reply's calls, their results kept; True when the turn waits."""
        spec = self.spec
        sent = [sendable_call(call) for call in reply.calls]
        spec.messages.append(
            Message(
                "assistant", "".join(self.parts[reply.start:]),
                tool_calls=tuple(s.call for s in sent), reasoning_blocks=tuple(reply.blocks),
            )
        )  # fmt: skip
        pending: list[PendingCall] = []
        for call, checked in zip(reply.calls, sent, strict=True):
            result = self._result(call, checked, pending)
            if result is not None:
                spec.messages.append(
                    Message("tool", result.output, tool_call_id=call.id, name=call.name)
                )
                yield result
        if not pending:
            return False
        finished = self._finish("suspended", pending)
        yield from map(ToolCallPending, pending)
        yield finished
        return True

    def _result(
        self, call: ToolCall, checked: SentCall, pending: list[PendingCall]
    ) -> ToolResult | None:
        """One call's result, or None when it waits for the person (added to ``pending``)."""
        if checked.error is not None:  # the raw arguments stay in the error, for the record
            return ToolResult(call, checked.error, is_error=True)
        try:
            return _handle_call(self.spec, call, pending)
        except KeyboardInterrupt:  # a tool was running (code, say): the turn stops too
            self._finish("interrupted")
            raise


def _failed(
    spec: TurnSpec, parts: list[str], round_start: int, error: NbchatError,
    usage: Usage | None = None,
) -> Iterator[Event]:
    text = "".join(parts)
    spec.recorder.finish(
        "failed", text, _with_text(spec.messages, parts[round_start:]), error=str(error),
        usage=usage,
    )
    yield TurnFailed(spec.thread_id, spec.turn, error, text)


def _unforced(options: Mapping[str, Any]) -> Mapping[str, Any]:
    """Options for the requests after tool results: a forced tool choice would loop."""
    choice = options.get("tool_choice")
    if choice is None or choice in ("auto", "none"):
        return options
    return {k: v for k, v in options.items() if k != "tool_choice"}


def _handle_call(spec: TurnSpec, call: ToolCall, pending: list[PendingCall]) -> ToolResult | None:
    """Run a kernel tool, or queue a client tool as pending (returning None)."""
    try:
        tool = spec.toolbox.get(call.name)
        if isinstance(tool, KernelTool):
            return ToolResult(call, tool.run(call.arguments))
        assert isinstance(tool, ClientTool)
        arguments = tool.parse_arguments(call.arguments)
        tool.check_requirements(spec.tool_context, arguments)
        automatic = tool.auto_response(arguments)
        prompt = Prompt.from_dict(tool.prompt(arguments), default_question=call.name) \
            if automatic is None or _reads_its_prompt(tool) else None  # fmt: skip
        if automatic is not None:
            asked = PendingCall(spec.thread_id or 0, spec.turn, call.id, call.name, arguments,
                                prompt or Prompt("text", call.name))  # fmt: skip
            answer = tool.parse_answer(asked, automatic)
            output = tool.get_tool_output(arguments, answer)
            return ToolResult(call, output, shown=tool.shown_output(arguments, answer))
        assert prompt is not None
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


def _reads_its_prompt(tool: ClientTool) -> bool:
    """Whether the tool's answer reads what its prompt showed (so an automatic one needs it)."""
    return type(tool).parse_answer is not ClientTool.parse_answer


def _with_text(messages: list[Message], round_parts: list[str]) -> list[Message]:
    text = "".join(round_parts).strip()
    return [*messages, Message("assistant", text)] if text else list(messages)


def add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    """``total`` and ``more`` together (either may be None: nothing reported)."""
    if more is None:
        return total
    return more if total is None else total + more
