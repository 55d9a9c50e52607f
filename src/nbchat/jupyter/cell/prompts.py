"""Widget prompts for client-tool calls: the person answers, the turn resumes.

A cell that waits for a click never gets it (the click's comm message waits
for the cell to end), so a suspended turn really ends. :func:`show_tool_prompts`
displays one :class:`ToolPrompt` per pending call and, below them, the sink the
resumed answer will stream into, both created while the cell still runs: output
from a widget callback reaches no cell unless it goes to such a sink.

A click, or :meth:`ToolPrompt.submit` from a later cell or a script, checks the
answer through :meth:`Chat.iter_answer_tool_call`. A rejected answer is shown
next to the prompt, which stays usable; an accepted one locks it. Once every
call of the turn is answered the resumed turn streams into the sink, and if it
suspends again the new prompts appear below it.

Where prompts go and how a resumed turn is shown is up to a *host*: none in a
cell (the cell's output), the group whose turn resumed (its follow-up area),
or the chat panel.

The prompt widget itself is :mod:`nbchat.jupyter.cell._tool_prompt`; this module
groups one turn's prompts (:class:`PromptGroup`) and decides where they go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

import ipywidgets as widgets
from IPython import get_ipython
from IPython.display import display

from ._tool_prompt import ToolPrompt, pending_prompts
from ._widget_output import OutputHandle
from ._widget_output import shows_errors as shows_errors  # where the panel imported it from
from .render import Mode, RenderResult, TurnRenderer

if TYPE_CHECKING:
    from ...base.events import Event
    from ...base.records import PendingCall
    from ...engine.chat import Chat

__all__ = [
    "OutputHandle",
    "PromptGroup",
    "PromptHost",
    "ToolPrompt",
    "pending_prompts",
    "show_tool_prompts",
]

_REPR_LIMIT = 110  # ipywidgets cuts a widget's text/plain here


# ---------------------------------------------------------------- hosts


class PromptHost(Protocol):
    """Where prompts shown during a resumed turn go, and how a resumed turn is shown."""

    def add_prompts(self, group: PromptGroup) -> None:
        """Show ``group``, made by :func:`show_tool_prompts` while this host was active."""

    def resume_turn(self, group: PromptGroup, events: Iterable[Event]) -> None:
        """Show the resumed turn once every call of ``group`` is answered."""


_HOST: ContextVar[PromptHost | None] = ContextVar("nbchat_prompt_host", default=None)


@contextmanager
def hosting(host: PromptHost) -> Iterator[None]:
    """Send prompts shown inside the block to ``host`` instead of the cell's output."""
    token = _HOST.set(host)
    try:
        yield
    finally:
        _HOST.reset(token)


def show_tool_prompts(
    chat: Chat,
    calls: Sequence[PendingCall],
    *,
    live: bool | None = None,
    renderer_factory: Callable[[], TurnRenderer] | None = None,
) -> PromptGroup:
    """Show a prompt for each pending call, and the place the resumed answer will go.

    In a cell, the prompts, the answer's display and an area for later
    prompts are displayed in the cell's output now, while it runs. Inside a
    resumed turn or the panel, they go where that host puts them.

    Parameters
    ----------
    chat
        The Chat that answers the calls (``chat.iter_answer_tool_call``).
    calls
        The pending calls of one turn, e.g. ``chat.pending_calls(thread_id)``.
    live
        Render the resumed turn as it streams (True) or once at the end
        (False); by default the renderer decides when it runs: live after a
        click, once when a later cell answers in a non-interactive run.
    renderer_factory
        Makes the renderer of the resumed turn, reserving its display in the
        cell (what :class:`nbchat.jupyter.cell.render.TurnRenderer` passes); by default a
        renderer for ``chat`` with an empty display reserved here.

    Returns
    -------
    PromptGroup
        Its ``prompts`` answer with ``.submit(value)`` or their buttons' ``.click()``;
        with no calls it is empty and nothing is shown.
    """
    host = _HOST.get()
    group = PromptGroup(chat, calls, live=live, host=host)
    if not calls:
        return group  # nothing waits: nothing to show
    if host is None:
        group.display_in_cell(renderer_factory)
    else:
        host.add_prompts(group)
    return group

# ---------------------------------------------------------------- one turn's prompts


class _FollowUps(widgets.VBox):
    """Where the prompts of a later suspension go; nothing, as text."""

    def __repr__(self) -> str:
        return ""


class PromptGroup(widgets.VBox):
    """The prompts of one suspended turn, and where its resumed answer goes.

    Made by :func:`show_tool_prompts`. In a cell the resumed answer goes to a
    display reserved below the prompts, and the prompts of a later suspension
    to the ``followups`` area below that; elsewhere both are part of this
    widget, the answer in an Output widget (``sink``).
    """

    def __init__(
        self,
        chat: Chat,
        calls: Sequence[PendingCall],
        *,
        live: bool | None = None,
        host: PromptHost | None = None,
    ) -> None:
        self.chat, self.live, self.host = chat, live, host
        self.prompts = tuple(
            ToolPrompt(chat, call, on_accepted=self._on_prompt_accept) for call in calls
        )
        self.followups = _FollowUps()
        self.renderer: TurnRenderer | None = None
        children: list[widgets.Widget] = list(self.prompts)
        if host is not None:
            self.renderer = self._widget_renderer()
            children += [self.sink.output, self.followups]
        super().__init__(children)
        self.add_class("nbchat-prompts")

    def __repr__(self) -> str:
        text = "; ".join(repr(prompt) for prompt in self.prompts)
        if not self.is_answered:
            text += " — answer here or with %chat --answer"
        return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 1] + "…"

    @property
    def is_answered(self) -> bool:
        return all(prompt.is_answered for prompt in self.prompts)

    @property
    def sink(self) -> Any:
        """Where the resumed answer is rendered: a display handle or an :class:`OutputHandle`."""
        return None if self.renderer is None else self.renderer.handle

    def display_in_cell(self, renderer_factory: Callable[[], TurnRenderer] | None = None) -> None:
        """Display the prompts, the answer's display and the follow-up area in the cell."""
        display(self)
        if getattr(get_ipython(), "kernel", None) is None:
            self.renderer = self._widget_renderer()  # no front end: keep the answer in a widget
            return
        if renderer_factory is not None:
            self.renderer = renderer_factory()
            self.renderer.mode = self._mode() or self.renderer.mode
        else:
            self.renderer = TurnRenderer(
                chat=self.chat, reserve=True, mode=self._mode(), prompts=show_tool_prompts
            )
        display(self.followups)

    # -- PromptHost, for the prompts of a turn that this group resumed ------------
    def add_prompts(self, group: PromptGroup) -> None:
        self.followups.children += (group,)

    def resume_turn(self, group: PromptGroup, events: Iterable[Event]) -> None:
        group.render_turn(events)

    def render_turn(self, events: Iterable[Event]) -> RenderResult:
        """Render the resumed turn into :attr:`sink`; its prompts, if any, go below it."""
        if self.renderer is None:
            self.renderer = self._widget_renderer()
        with hosting(self):
            result = self.renderer.render(events)
        self._offer_undo(result)
        return result

    def _offer_undo(self, result: RenderResult) -> None:
        """*Undo this turn* below the answer of a resumed turn that changed the notebook."""
        if result.status == "suspended":
            return  # its next prompts come first; the button once it ends
        from ..notebook._undo_view import undo_footer

        footer = undo_footer(self.chat.store, result.thread_id, result.turn, get_ipython())
        if footer is not None:
            self.followups.children += (footer,)

    def _widget_renderer(self) -> TurnRenderer:
        # A widget's state is not what nbval compares: always live, so that a
        # later suspension gets its prompts here too.
        mode = "final" if self.live is False else "live"
        return TurnRenderer(
            chat=self.chat, handle=OutputHandle(), mode=mode, prompts=show_tool_prompts  # type: ignore[arg-type]
        )

    def _mode(self) -> Mode | None:
        return None if self.live is None else ("live" if self.live else "final")

    def _on_prompt_accept(self, prompt: ToolPrompt, events: Iterable[Event]) -> None:
        call = prompt.call
        if any(c.turn == call.turn for c in self.chat.pending_calls(call.thread_id)):
            for _ in events:  # the turn waits for other answers: nothing to show yet
                pass
            prompt.note("the answer continues once the other questions are answered")
            return
        (self.host or self).resume_turn(self, events)
