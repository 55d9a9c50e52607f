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
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import ipywidgets as widgets
from IPython import get_ipython
from IPython.core.formatters import DisplayFormatter
from IPython.display import display

from ..base import markup
from ..base.errors import AlreadyAnswered, InputError, NbchatError, NoPendingCall
from ..context.run_code import shown_digest
from .render import Mode, RenderResult, TurnRenderer

if TYPE_CHECKING:
    from ..base.events import Event
    from ..base.records import PendingCall, Prompt
    from ..engine.chat import Chat

__all__ = [
    "OutputHandle",
    "PromptGroup",
    "PromptHost",
    "ToolPrompt",
    "pending_prompts",
    "show_tool_prompts",
]

_REPR_LIMIT = 110  # ipywidgets cuts a widget's text/plain here

F = TypeVar("F", bound=Callable[..., Any])


def shows_errors(method: F) -> F:
    """Show an NbchatError raised by a widget method in its owner, instead of raising it.

    The owner's ``show_error`` puts the message where the person looks (the
    prompt, the panel's status line); the input they typed is left alone.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except NbchatError as error:
            self.show_error(error)
            return None

    return wrapper  # type: ignore[return-value]


class OutputHandle:
    """A display handle whose display is an Output widget's synced state.

    ``update`` replaces the widget's outputs through its state, so it works
    from a widget callback (where ``display`` reaches no cell) and inside an
    Output widget (which captures new outputs but ignores display updates).
    """

    def __init__(self, output: widgets.Output | None = None) -> None:
        self.output = output if output is not None else widgets.Output()

    def __repr__(self) -> str:
        return f"<OutputHandle {self.text[:40]!r}>"

    def display(self, obj: object, **kwargs: Any) -> None:
        self.update(obj, **kwargs)

    def update(
        self, obj: object, *, raw: bool = False, metadata: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        """Show ``obj`` (or, with ``raw``, the mimebundle ``obj``) instead of what was there."""
        if raw:
            data, meta = dict(obj), {}  # type: ignore[call-overload]
        else:
            data, meta = _formatter().format(obj)
        meta.update(metadata or {})
        self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": meta},)

    def clear(self) -> None:
        self.output.outputs = ()

    @property
    def data(self) -> dict[str, Any]:
        """The mimebundle shown now (empty when nothing is)."""
        outputs = self.output.outputs
        return dict(outputs[-1].get("data", {})) if outputs else {}

    @property
    def text(self) -> str:
        """What is shown, as plain text."""
        return str(self.data.get("text/plain", ""))


_DEFAULT_FORMATTER: DisplayFormatter | None = None


def _formatter() -> DisplayFormatter:
    global _DEFAULT_FORMATTER
    shell = get_ipython()
    if shell is not None:
        return shell.display_formatter
    if _DEFAULT_FORMATTER is None:
        _DEFAULT_FORMATTER = DisplayFormatter()
    return _DEFAULT_FORMATTER


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
        cell (what :class:`nbchat.jupyter.render.TurnRenderer` passes); by default a
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


# ---------------------------------------------------------------- one prompt


_LIVE_PROMPTS: dict[tuple[str, str, int, str], ToolPrompt] = {}


def pending_prompts(thread_id: int | None = None) -> list[ToolPrompt]:
    """The prompts shown in this kernel whose call still waits for an answer, oldest first.

    A prompt whose call was answered another way (``%chat --answer``, another
    kernel) is locked on the way, so it stops offering its buttons.
    """
    prompts = [
        prompt for prompt in list(_LIVE_PROMPTS.values())
        if thread_id is None or prompt.call.thread_id == thread_id
    ]
    return [prompt for prompt in prompts if prompt.refresh()]


class ToolPrompt(widgets.VBox):
    """One pending client-tool call as a widget: the question and the ways to answer it.

    ``kind`` (from the tool's prompt) decides the controls: ``"choice"`` gives
    one button per option, ``"confirm"`` Yes and No, anything else a text box
    with Submit. ``prompt.markdown``, when given, is rendered above.
    """

    def __init__(
        self,
        chat: Chat,
        call: PendingCall,
        *,
        on_accepted: Callable[[ToolPrompt, Iterable[Event]], None] | None = None,
    ) -> None:
        self.chat, self.call = chat, call
        self.answer: object = None
        self.is_answered = False
        self._on_accepted = on_accepted
        self._answer_callbacks = widgets.CallbackDispatcher()
        prompt = call.prompt
        self.kind = prompt.kind
        self.question = prompt.question or call.tool
        self.buttons: tuple[widgets.Button, ...] = ()
        self.text_box: widgets.Textarea | None = None
        self.editor: widgets.Textarea | None = None  # code prompts: the code, once Edit is hit
        self.reason_box: widgets.Text | None = None  # code prompts: why Reject
        self.submit_button: widgets.Button | None = None
        self._error, self._status = "", markup.SafeHTML("")
        self._error_html = widgets.HTML()
        self._status_html = widgets.HTML()
        super().__init__(
            self._build(prompt),
            layout=widgets.Layout(
                margin="6px 0", padding="2px 0 2px 10px",
                border_left="3px solid var(--jp-brand-color1, #1976d2)",
            ),
        )
        self.add_class("nbchat-prompt")
        _LIVE_PROMPTS[self._key] = self

    def __repr__(self) -> str:
        if self.is_answered:
            return f"{self.question} → {_shown(self.answer)}"
        if self.buttons and self.submit_button is None:
            choices = " / ".join(button.description for button in self.buttons)
            return f"{self.question} [{choices}]"
        return f"{self.question} [type an answer]"

    @property
    def error(self) -> str:
        """The message of the last rejected answer; empty after an accepted one."""
        return self._error

    def on_answer(
        self, callback: Callable[[ToolPrompt, object], Any], remove: bool = False
    ) -> None:
        """Call ``callback(prompt, value)`` when an answer is accepted."""
        self._answer_callbacks.register_callback(callback, remove=remove)

    @shows_errors
    def submit(self, value: object) -> None:
        """Answer with ``value``, exactly as a click on a button or Submit would.

        A rejected answer shows its error here (see :attr:`error`) and the
        prompt stays usable; an accepted one locks the prompt and resumes the
        turn (once every call of the turn is answered).
        """
        if self.is_answered:
            raise InputError(
                f"this question was already answered ({_shown(self.answer)}); "
                "ask again with a new question"
            )
        try:
            events = self.chat.iter_answer_tool_call(
                self.call.thread_id, value, call_id=self.call.call_id
            )
        except AlreadyAnswered as error:
            self._lock(None, f"already answered: {error.answer}" if error.answer else
                       "already answered elsewhere")
            return
        except NoPendingCall:
            self._lock(None, "this question no longer waits for an answer")
            raise
        self._set_error("")
        self._lock(value, f"✓ {_shown(value)}")
        self._answer_callbacks(self, value)
        if self._on_accepted is None:
            for _ in events:
                pass
        else:
            self._on_accepted(self, events)

    def refresh(self) -> bool:
        """Whether the call still waits for an answer; if not, lock the prompt."""
        if self.is_answered:
            return False
        calls = self.chat.pending_calls(self.call.thread_id)
        if any(call.call_id == self.call.call_id for call in calls):
            return True
        self._lock(None, "answered elsewhere")
        return False

    def show_error(self, error: BaseException | str) -> None:
        """Show ``error`` below the prompt."""
        self._set_error(str(error))

    def note(self, text: str) -> None:
        """Say what happens next, after what was answered."""
        self._status_html.value = markup.styled(markup.join(
            [self._status, markup.text(f"— {text}", cls="nbchat-dim")], " "))

    # -- building ---------------------------------------------------------------
    def _build(self, prompt: Prompt) -> list[widgets.Widget]:
        children: list[widgets.Widget] = []
        if prompt.kind == "code":
            children.append(_safe_output(self._code_view(prompt)))
        elif prompt.markdown:
            children.append(_safe_output(markup.markdown(str(prompt.markdown))))
        children.append(widgets.HTML(markup.styled(markup.element("b", self.question))))
        if self.kind == "choice" and prompt.options:
            children.append(self._choice_controls(list(prompt.options)))
        elif self.kind == "confirm":
            children.append(self._confirm_controls())
        elif self.kind == "code":
            children.append(self._code_controls(self.code))
        else:
            children.append(self._text_controls(prompt.placeholder))
        return [*children, self._error_html, self._status_html]

    @property
    def code(self) -> str:
        """The code a code prompt shows: the pending call's own, the one Run runs."""
        return str(self.call.arguments.get("code", ""))

    def _code_view(self, prompt: Prompt) -> markup.SafeHTML:
        """Every line of the code, escaped and highlighted, and why it needs a yes."""
        risks = [str(risk) for risk in prompt.extra.get("risks") or ()]
        why = ("It needs your yes because it " + "; ".join(risks) + "." if risks else
               "Your approval policy asks before any code runs.")
        lines = self.code.rstrip("\n").count("\n") + 1
        return markup.join([
            markup.code(self.code, "python"),
            markup.text(f"{lines} line{'s' * (lines != 1)} · {why}", cls="nbchat-dim", block=True),
        ])

    def _choice_controls(self, options: list[str]) -> widgets.Widget:
        self.buttons = tuple(_button(option) for option in options)
        for button in self.buttons:
            button.on_click(self._on_option_button_click)
        return widgets.HBox(self.buttons, layout=widgets.Layout(flex_flow="row wrap"))

    def _confirm_controls(self) -> widgets.Widget:
        yes, no = _button("Yes", icon="check"), _button("No", icon="times")
        yes.on_click(self._on_yes_button_click)
        no.on_click(self._on_no_button_click)
        self.buttons = (yes, no)
        return widgets.HBox(self.buttons)

    def _text_controls(self, placeholder: str) -> widgets.Widget:
        self.text_box = widgets.Textarea(
            placeholder=placeholder, rows=2, layout=widgets.Layout(width="min(100%, 36em)")
        )
        self.submit_button = _button("Submit", button_style="primary")
        self.submit_button.on_click(self._on_submit_button_click)
        self.buttons = (self.submit_button,)
        return widgets.HBox(
            [self.text_box, self.submit_button], layout=widgets.Layout(align_items="flex-start")
        )

    def _code_controls(self, code: str) -> widgets.Widget:
        """Run / Edit / Reject for code the model wants to run; Edit opens an editor."""
        run, edit = _button("Run", icon="play", button_style="primary"), _button("Edit")
        reject = _button("Reject", icon="times")
        self.reason_box = widgets.Text(placeholder="why not (optional)")
        self.editor = widgets.Textarea(
            code, rows=min(20, code.count("\n") + 2),
            layout=widgets.Layout(width="min(100%, 48em)", display="none"),
        )  # fmt: skip
        self.run_edited = _button("Run edited", icon="play", button_style="primary")
        self.run_edited.layout.display = "none"
        self.run_edited.layout.width = "fit-content"
        run.on_click(self._on_run_button_click)
        edit.on_click(self._on_edit_button_click)
        reject.on_click(self._on_reject_button_click)
        self.run_edited.on_click(self._on_run_edited_button_click)
        self.buttons = (run, edit, reject, self.run_edited)
        row = widgets.HBox([run, edit, reject, self.reason_box])
        return widgets.VBox([row, self.editor, self.run_edited])

    # -- events ------------------------------------------------------------------
    def _on_run_button_click(self, _: widgets.Button) -> None:
        self.submit({"action": "run", "shown": shown_digest(self.code)})

    def _on_edit_button_click(self, _: widgets.Button) -> None:
        assert self.editor is not None
        self.editor.layout.display = ""
        self.run_edited.layout.display = ""

    def _on_run_edited_button_click(self, _: widgets.Button) -> None:
        assert self.editor is not None
        self.submit({"action": "edit", "code": self.editor.value})

    def _on_reject_button_click(self, _: widgets.Button) -> None:
        assert self.reason_box is not None
        self.submit({"action": "reject", "reason": self.reason_box.value})

    def _on_option_button_click(self, button: widgets.Button) -> None:
        self.submit(button.description)

    def _on_yes_button_click(self, _: widgets.Button) -> None:
        self.submit(True)

    def _on_no_button_click(self, _: widgets.Button) -> None:
        self.submit(False)

    def _on_submit_button_click(self, _: widgets.Button) -> None:
        assert self.text_box is not None
        self.submit(self.text_box.value)

    # -- state ---------------------------------------------------------------------
    @property
    def _key(self) -> tuple[str, str, int, str]:
        return (self.chat.store.location(), self.chat.user, self.call.thread_id, self.call.call_id)

    def _set_error(self, message: str) -> None:
        self._error = message
        self._error_html.value = markup.styled(
            markup.text(f"{markup.MARK_PROBLEM} {message}", cls="nbchat-error")
            if message
            else markup.SafeHTML("")
        )

    def _lock(self, value: object, status: str) -> None:
        self.is_answered, self.answer = True, value
        if _LIVE_PROMPTS.get(self._key) is self:
            del _LIVE_PROMPTS[self._key]
        for button in self.buttons:
            button.disabled = True
            if _matches(button, value):
                button.button_style, button.icon = "success", "check"
        for box in (self.editor, self.reason_box):
            if box is not None:
                box.disabled = True
        if self.text_box is not None:
            self.text_box.disabled = True
            if value is not None:
                self.text_box.value = str(value)
        self._status = markup.text(status, cls="nbchat-ok")
        self._status_html.value = markup.styled(self._status)


def _safe_output(body: markup.SafeHTML) -> widgets.Output:
    """An Output widget showing ``body`` (HTML made by :mod:`nbchat.base.markup`)."""
    handle = OutputHandle()
    handle.update(markup.bundle(body, ""), raw=True)
    return handle.output


def _button(description: str, **kwargs: Any) -> widgets.Button:
    return widgets.Button(
        description=description, tooltip=description, layout=widgets.Layout(width="auto"), **kwargs
    )


def _matches(button: widgets.Button, value: object) -> bool:
    if isinstance(value, dict):  # a code answer: {"action": "run" | "edit" | "reject", ...}
        return button.description == {"run": "Run", "edit": "Run edited", "reject": "Reject"}.get(
            str(value.get("action")), ""
        )
    if value == "run":
        return button.description == "Run"
    if isinstance(value, bool):
        return button.description == ("Yes" if value else "No")
    return isinstance(value, str) and button.description == value.strip()


def _shown(value: object) -> str:
    if isinstance(value, dict):
        action, reason = value.get("action"), value.get("reason")
        return {"run": "ran", "edit": "ran the edited code", "reject": "rejected"}.get(
            str(action), "") + (
            f": {reason}" if reason else ""
        )
    if value == "run":
        return "ran"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip()


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
            return self.renderer.render(events)

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
