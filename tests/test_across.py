"""The names one process uses to reach another: every one served, spelt alike in TypeScript."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nbchat.base import _across
from nbchat.jupyter import kernel_api

ROOT = Path(__file__).resolve().parents[1]


def test_every_kernel_call_is_served_by_the_kernel_api():
    assert kernel_api.__name__ == _across.KERNEL_API
    assert sorted(kernel_api.__all__) == sorted(_across.KERNEL_CALLS)
    for name in _across.KERNEL_CALLS:
        assert callable(getattr(kernel_api, name)), name


def test_a_kernel_call_is_one_expression_of_reprs_and_nothing_else_is_one():
    call = _across.kernel_call("wake", "a'b.ipynb", ["a'b.ipynb"])
    assert call == ("__import__('nbchat.jupyter.kernel_api', fromlist=['_'])"
                    ".wake(\"a'b.ipynb\", [\"a'b.ipynb\"])")  # fmt: skip
    with pytest.raises(ValueError, match="'exec' is not a kernel call; they are variables_text"):
        _across.kernel_call("exec", "1")


def test_the_lab_extension_spells_the_same_names():
    source = ROOT / "labextension" / "src"
    opened = (source / "open.ts").read_text()
    assert f"export const KERNEL_API = '{_across.KERNEL_API}';" in opened
    assert re.search(r"\.open_from_lab\(", opened)
    completion = (source / "completion.ts").read_text()
    assert f"export const ROUTE = '{_across.COMPLETE_ROUTE}';" in completion
    loader = ROOT / "src" / "nbchat" / "jupyter" / "panel" / "_panel_loader.js"
    assert _across.STATIC_ROUTE == "nbchat/static/" and _across.STATIC_ROUTE in loader.read_text()
