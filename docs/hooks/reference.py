"""The reference pages against the code: every ``%chat`` option and every setting, no more.

What the code offers is read from the code itself: the options the magic's
parser declares, the ``ChatMagics`` traits ``%config`` sets, and the
environment variables nbchat reads (the ``ENV_*`` constants of
``nbchat.base.config`` and every ``"NBCHAT_…"`` name in the source). What the
pages list is the first column of their tables. As an MkDocs hook this fails
the strict build on a difference; ``tests/test_docs.py`` asserts the same.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAGIC_PAGE = ROOT / "docs" / "reference" / "magic.md"
SETTINGS_PAGE = ROOT / "docs" / "reference" / "settings.md"

_OPTION = re.compile(r"`(--?[A-Za-z][\w-]*)")
_SETTING = re.compile(r"`(ChatMagics\.\w+|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`")
_NBCHAT_NAME = re.compile(r"""["'](NBCHAT_[A-Z0-9_]+)["']""")

log = logging.getLogger("mkdocs.hooks.reference")


def magic_options() -> set[str]:
    """Every option string ``%chat`` accepts (``-t``, ``--thread``, …)."""
    from nbchat.jupyter.magic.magics import ChatMagics

    parser = ChatMagics.chat_magic.parser
    return {option for action in parser._actions for option in action.option_strings}


def settings() -> set[str]:
    """``ChatMagics.<trait>`` for every trait ``%config`` sets, and every variable read."""
    from nbchat.base import config
    from IPython.core.magic import Magics

    from nbchat.jupyter.magic.magics import ChatMagics

    own = set(ChatMagics.class_traits(config=True)) - set(Magics.class_traits(config=True))
    traits = {f"ChatMagics.{name}" for name in own}
    constants = {value for name, value in vars(config).items()
                 if name.startswith("ENV_") and isinstance(value, str)}
    in_source = {name for path in (ROOT / "src" / "nbchat").rglob("*.py")
                 for name in _NBCHAT_NAME.findall(path.read_text(encoding="utf-8"))}
    return traits | constants | in_source


def listed(page: Path, pattern: re.Pattern[str]) -> set[str]:
    """What the first column of the page's tables names."""
    names: set[str] = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and not set(cells[0]) <= set("|- "):
            names.update(pattern.findall(cells[0]))
    return names


def differences() -> list[str]:
    """One sentence for each option or setting the code and the reference disagree on."""
    problems = []
    for page, pattern, code in ((MAGIC_PAGE, _OPTION, magic_options()),
                                (SETTINGS_PAGE, _SETTING, settings())):
        documented = listed(page, pattern)
        where = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        problems += [f"{name} is in the code but not in {where}"
                     for name in sorted(code - documented)]
        problems += [f"{name} is in {where} but not in the code"
                     for name in sorted(documented - code)]
    return problems


def on_config(config):
    for problem in differences():
        log.warning(problem)
    return config
