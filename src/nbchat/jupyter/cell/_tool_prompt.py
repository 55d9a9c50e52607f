"""One pending client-tool call as a widget (:class:`ToolPrompt`), and the live prompts.

The controls follow the tool's prompt (choice buttons, Yes / No, a text box,
or Run / Edit / Reject for code). An answer, clicked or given with
:meth:`ToolPrompt.submit`, is checked by the engine; a rejected one is shown
beside the prompt, an accepted one locks it. :func:`pending_prompts` lists
the prompts shown in this kernel that still wait. Grouping a turn's prompts and resuming the turn
is :mod:`nbchat.jupyter.cell.prompts`' part.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ...base import markup
from ...base.errors import AlreadyAnswered, InputError, NoPendingCall, StaleProposal
from ...context.run_code import shown_digest
from .._loaded import turn_ended
from ._widget_output import OutputHandle, shows_errors

if TYPE_CHECKING:
    from ...base.events import Event
    from ...base.records import PendingCall, Prompt
    from ...engine.chat import Chat

__all__ = ["ToolPrompt", "pending_prompts"]

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
        self.chunk_toggles: tuple[widgets.ToggleButton, ...] = ()  # proposals: which chunks
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
        question = markup.for_terminal(self.question)
        if self.is_answered:
            return f"{question} → {markup.for_terminal(_shown(self.answer))}"
        if self.buttons and self.submit_button is None:
            choices = " / ".join(button.description for button in self.buttons)
            return markup.for_terminal(f"{question} [{choices}]")
        return f"{question} [type an answer]"

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
        except StaleProposal:  # the proposal again, on the cell's new text
            self._show_again()
            raise
        self._set_error("")
        self._lock(value, f"✓ {_shown(value)}")
        self._answer_callbacks(self, value)
        try:
            if self._on_accepted is None:
                for _ in events:
                    pass
            else:
                self._on_accepted(self, events)
        finally:
            turn_ended()  # the page redraws what still waits (this answer's proposal is gone)

    def _show_again(self) -> None:
        """Draw the call as the store now holds it (its prompt made again)."""
        for call in self.chat.pending_calls(self.call.thread_id):
            if call.call_id == self.call.call_id:
                self.call = call
                self.children = self._build(call.prompt)

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
        elif self.call.shows_arguments:
            children.append(_safe_output(self._arguments_view(prompt)))
        elif prompt.markdown:
            children.append(_safe_output(markup.markdown(str(prompt.markdown))))
        children.append(widgets.HTML(markup.styled(markup.element("b", markup.marked(
            self.question)))))
        if int(prompt.extra.get("chunks") or 0) > 1 and prompt.extra.get("op") in _CHUNKED:
            children.append(self._chunk_controls(int(prompt.extra["chunks"])))
        elif prompt.extra.get("view") == "plan":
            children.append(self._plan_controls(str(prompt.extra.get("plan") or "")))
        elif self.kind == "choice" and prompt.options:
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
        asks = str(prompt.extra.get("asks") or "")  # an outside agent's call says why it asks
        why = ("It needs your yes because it " + "; ".join(risks) + "." if risks else
               asks or "Your approval policy asks before any code runs.")
        lines = self.code.rstrip("\n").count("\n") + 1
        note = f"{lines} line{'s' * (lines != 1)} · {why}"
        if prompt.extra.get("agent"):
            reason = " ".join(str(prompt.extra.get("reason") or "").split())
            note += f" Agent {prompt.extra['agent']} (token {prompt.extra.get('token', '?')})"
            note += f" gives as its reason: “{reason}”" if reason else " gives no reason."
        language = None if self.call.arguments.get("cell_type") == "markdown" else "python"
        view = markup.approval(self.code, language, note=note)
        if prompt.markdown:  # what the cell holds now, above what it would hold
            return markup.join([markup.markdown(str(prompt.markdown)), view])
        return view

    def _arguments_view(self, prompt: Prompt) -> markup.SafeHTML:
        """The call's whole arguments, as the call is sent them, and why it needs a yes."""
        asks = str(prompt.extra.get("asks") or "your approval settings ask before this call")
        return markup.approval(self.call.arguments_text, "json", lead="These arguments hold",
                               note=f"With these arguments. It asks because {asks}.")

    def _choice_controls(self, options: list[str]) -> widgets.Widget:
        self.buttons = tuple(_button(option) for option in options)
        for button in self.buttons:
            button.on_click(self._on_option_button_click)
        return widgets.HBox(self.buttons, layout=widgets.Layout(flex_flow="row wrap"))

    def _chunk_controls(self, count: int) -> widgets.Widget:
        """A toggle per chunk of the diff above (all on), Accept (the chunks on) and Reject."""
        self.chunk_toggles = tuple(
            widgets.ToggleButton(value=True, description=f"chunk {n}", icon="check",
                                 tooltip=f"take chunk {n} of the diff above",
                                 layout=widgets.Layout(width="auto"))
            for n in range(1, count + 1))  # fmt: skip
        for toggle in self.chunk_toggles:
            toggle.observe(self._on_chunk_toggle_change, "value")
        accept = _button("Accept", icon="check", button_style="primary")
        reject = _button("Reject", icon="times")
        self.reason_box = widgets.Text(placeholder="why not (optional)",
                                       layout=widgets.Layout(flex="1 1 10em", min_width="8em"))
        accept.on_click(self._on_accept_chunks_button_click)
        reject.on_click(self._on_reject_button_click)
        self.buttons = (accept, reject, *self.chunk_toggles)
        wrap = widgets.Layout(flex_flow="row wrap")
        return widgets.VBox([widgets.HBox(list(self.chunk_toggles), layout=wrap),
                             widgets.HBox([accept, reject, self.reason_box], layout=wrap)])

    def _plan_controls(self, plan: str) -> widgets.Widget:
        """Approve / Edit / Reject for a plan; Edit opens it in an editor, Approve edited."""
        approve = _button("Approve", icon="check", button_style="primary")
        edit, reject = _button("Edit"), _button("Reject", icon="times")
        self.reason_box = widgets.Text(placeholder="why not (optional)",
                                       layout=widgets.Layout(flex="1 1 10em", min_width="8em"))
        self.editor = widgets.Textarea(
            markup.escape_hidden(plan), rows=min(20, plan.count("\n") + 2),
            layout=widgets.Layout(width="min(100%, 48em)", display="none"))  # fmt: skip
        self.run_edited = _button("Approve edited", icon="check", button_style="primary")
        self.run_edited.layout.display = "none"
        self.run_edited.layout.width = "fit-content"
        approve.on_click(self._on_approve_button_click)
        edit.on_click(self._on_edit_button_click)
        reject.on_click(self._on_reject_button_click)
        self.run_edited.on_click(self._on_approve_edited_button_click)
        self.buttons = (approve, edit, reject, self.run_edited)
        row = widgets.HBox([approve, edit, reject, self.reason_box],
                           layout=widgets.Layout(flex_flow="row wrap"))
        return widgets.VBox([row, self.editor, self.run_edited])

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
        self.reason_box = widgets.Text(placeholder="why not (optional)",
                                       layout=widgets.Layout(flex="1 1 10em", min_width="8em"))
        # The editor holds what it draws: hidden characters as their escapes.
        self.editor = widgets.Textarea(
            markup.escape_hidden(code), rows=min(20, code.count("\n") + 2),
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
        row = widgets.HBox([run, edit, reject, self.reason_box],
                           layout=widgets.Layout(flex_flow="row wrap"))
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

    def _on_chunk_toggle_change(self, change: dict[str, Any]) -> None:
        change["owner"].icon = "check" if change["new"] else ""

    def _on_accept_chunks_button_click(self, _: widgets.Button) -> None:
        chosen = [n for n, toggle in enumerate(self.chunk_toggles, 1) if toggle.value]
        if not chosen:
            self.show_error("no chunk is chosen: choose one or more, or Reject")
            return
        everything = len(chosen) == len(self.chunk_toggles)
        self.submit({"action": "accept"} if everything else {"action": "accept", "chunks": chosen})

    def _on_approve_button_click(self, _: widgets.Button) -> None:
        self.submit({"action": "approve"})

    def _on_approve_edited_button_click(self, _: widgets.Button) -> None:
        assert self.editor is not None
        self.submit({"action": "approve", "plan": self.editor.value})

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


_CHUNKED = ("edit_cell", "insert_cell")  # the ops whose chunks are taken one by one
_ACTION_BUTTONS = {"run": "Run", "edit": "Run edited", "reject": "Reject", "accept": "Accept"}


def _safe_output(body: markup.SafeHTML) -> widgets.Output:
    """An Output widget showing ``body`` (HTML made by :mod:`nbchat.base.markup`)."""
    handle = OutputHandle()
    handle.update(markup.bundle(body, ""), raw=True)
    return handle.output


def _button(description: str, **kwargs: Any) -> widgets.Button:
    # Never shrunk below its label: a row too narrow wraps instead.
    layout = widgets.Layout(width="auto", flex="0 0 auto", min_width="fit-content")
    return widgets.Button(description=description, tooltip=description, layout=layout, **kwargs)


def _matches(button: widgets.Button, value: object) -> bool:
    if isinstance(value, dict):  # {"action": "run" | "edit" | "accept" | "approve" | ...}
        action = str(value.get("action"))
        if action == "approve":
            return button.description == ("Approve edited" if "plan" in value else "Approve")
        return button.description == _ACTION_BUTTONS.get(action, "")
    if value == "run":
        return button.description == "Run"
    if isinstance(value, bool):
        return button.description == ("Yes" if value else "No")
    return isinstance(value, str) and button.description == value.strip()


def _shown(value: object) -> str:
    if isinstance(value, dict):
        action, reason, chunks = value.get("action"), value.get("reason"), value.get("chunks")
        if action == "accept" and chunks:
            return "accepted chunk" + "s" * (len(chunks) != 1) + " " + ", ".join(map(str, chunks))
        if action == "approve":
            return "approved the edited plan" if "plan" in value else "approved"
        return {"run": "ran", "edit": "ran the edited code", "reject": "rejected",
                "accept": "accepted"}.get(str(action), "") + (f": {reason}" if reason else "")
    if value == "run":
        return "ran"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip()
