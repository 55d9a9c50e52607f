"""A preview as a person sees it: the request's parts in order, folded when big, nothing sent.

Pure functions from a :class:`~nbchat.engine._preview.Preview` to safe HTML
(with a plain-text twin). Every byte of the request is reachable: each part
unfolds, and the whole body is the last fold. A secret-named variable's value
that a part holds as typed is masked here (and named), never shown.
"""

from __future__ import annotations

from ...base import markup
from ...base._secrets import known_secrets, scrub_names
from ...base.markup import SafeHTML
from ...engine._preview import Preview, PreviewPart
from ...engine._usage import dollars

FOLD_CHARS = 600  # a part longer than this is folded
HEAD_CHARS = 160  # what a folded part shows of itself


def preview_lines(preview: Preview) -> list[str]:
    """The few lines above the parts: what, how big, what it costs, what was left out."""
    size = f"~{preview.tokens:,} tokens"
    if preview.context_size:
        size += f" ({preview.share:.0%} of the {preview.context_size:,}-token window)"
    cost = "no price configured for this model (NBCHAT_PRICES)"
    if preview.cost is not None:
        cost = f"≈ {dollars(preview.cost)} for the prompt"
        if preview.max_cost is not None:
            cost += f", at most {dollars(preview.max_cost)} with the answer"
    lines = [
        f"Preview: nothing was sent. {preview.model} at {preview.url} ({preview.provider})",
        f"{preview.messages} messages · {size} · {cost}",
    ]
    if preview.summary_of:
        lines.append(f"a summary stands for {_turns(preview.summary_of)}")
    if preview.left_out:
        lines.append(f"left out by the window: {_turns(preview.left_out)}")
    lines += [f"scrubbed: {name} in {source}" for source, name in preview.scrubs]
    lines += [f"sent as typed (masked here): the value of {name} in {part.source}"
              for part in preview.parts for name in part.unscrubbed]  # fmt: skip
    return lines


def preview_html(preview: Preview) -> tuple[SafeHTML, str]:
    """The preview as HTML and as plain text."""
    lines = preview_lines(preview)
    head = [markup.element("p", markup.element("strong", lines[0]))]
    head += [markup.text(line, block=True) for line in lines[1:]]
    secrets = known_secrets()
    rows = [_row(part, secrets) for part in preview.parts]
    table = markup.table(("#", "role", "source", "tokens", "what the model reads"), rows)
    body = _shown(preview.content.decode("utf-8", "replace"), secrets)
    whole = markup.details(f"the request body ({len(preview.content):,} bytes)",
                           markup.code(body, None), cls="nbchat-preview")  # fmt: skip
    plain = "\n".join([*lines, *(_plain(part, secrets) for part in preview.parts)])
    return markup.join([*head, table, whole]), plain


def _row(part: PreviewPart, secrets: dict[str, str]) -> list[SafeHTML | str]:
    where = "" if part.message < 0 else str(part.message + 1)
    notes = [f"scrubbed: {', '.join(part.scrubbed)}"] if part.scrubbed else []
    notes += ["an image goes with it"] if part.image else []
    source = part.source + (f" ({'; '.join(notes)})" if notes else "")
    return [where, part.role, source, f"{part.tokens:,}", _folded(_shown(part.text, secrets))]


def _folded(text: str) -> SafeHTML:
    """Short text as it is; long text folded under its first line, all of it inside."""
    if len(text) <= FOLD_CHARS:
        return markup.code(text, None)
    first = text[:HEAD_CHARS].split("\n", 1)[0]
    summary = f"{first} … ({len(text):,} characters)"
    return markup.details(summary, markup.code(text, None), cls="nbchat-preview")


def _shown(text: str, secrets: dict[str, str]) -> str:
    """``text`` with the value of any secret-named variable masked (a preview never shows one)."""
    return scrub_names(text, secrets).text


def _plain(part: PreviewPart, secrets: dict[str, str]) -> str:
    where = "tools" if part.message < 0 else f"{part.message + 1}"
    text = _shown(part.text, secrets)
    shown = text if len(text) <= HEAD_CHARS else text[:HEAD_CHARS] + f"… ({len(text):,} chars)"
    return f"[{where}] {part.role} · {part.source} · {part.tokens:,} tokens\n    {shown}"


def _turns(indexes: tuple[int, ...]) -> str:
    """``turns 1–12`` (1-based, as a person counts), or a list when they are not a run."""
    numbers = [i + 1 for i in indexes]
    if len(numbers) == 1:
        return f"turn {numbers[0]}"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"turns {numbers[0]}–{numbers[-1]}"
    return "turns " + ", ".join(map(str, numbers))
