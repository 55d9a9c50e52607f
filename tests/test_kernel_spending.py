"""What a kernel spent, kept in each store per person, and which kernel a process is."""

from __future__ import annotations

import time

import pytest

from nbchat.base.errors import InputError
from nbchat.engine._kernel_spending import StoreLedger, kernel_key
from nbchat.store.base import SPENDING_DAYS
from store_backends import Opener


def test_a_kernels_spending_adds_up_per_person_and_kernel(open_for: Opener) -> None:
    ana, bob = open_for("ana"), open_for("bob")
    assert ana.kernel_spent("kernel-1") == 0.0
    assert ana.add_kernel_spent("kernel-1", 0.25) == pytest.approx(0.25)
    assert ana.add_kernel_spent("kernel-1", 0.5) == pytest.approx(0.75)
    ana.add_kernel_spent("kernel-2", 1.0)
    assert open_for("ana").kernel_spent("kernel-1") == pytest.approx(0.75)  # reopened: kept
    assert ana.kernel_spent("kernel-2") == pytest.approx(1.0)
    assert bob.kernel_spent("kernel-1") == 0.0  # another person's kernel of the same name
    ledger = StoreLedger(ana, "kernel-1")
    ledger.add(0.25)
    assert ledger.spent == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "0.5", None])
def test_an_amount_that_is_not_dollars_is_refused(open_for: Opener, bad: object) -> None:
    store = open_for("ana")
    with pytest.raises(InputError, match="dollars of 0 or more"):
        store.add_kernel_spent("kernel-1", bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="kernel is named"):
        store.add_kernel_spent("", 0.5)
    assert store.kernel_spent("kernel-1") == 0.0


def test_a_kernel_nobody_added_to_for_weeks_is_forgotten(open_for: Opener, monkeypatch) -> None:
    store = open_for("ana")
    store.add_kernel_spent("old", 2.0)
    later = time.time() + SPENDING_DAYS * 86400 + 60
    monkeypatch.setattr(time, "time", lambda: later)
    store.add_kernel_spent("new", 0.1)  # a write drops what is older
    assert store.kernel_spent("old") == 0.0 and store.kernel_spent("new") == pytest.approx(0.1)


def test_a_kernel_is_named_by_its_connection_file_which_a_restart_keeps() -> None:
    launcher = ["/x/ipykernel_launcher.py", "-f", "/run/jupyter/kernel-3f2a.json"]
    assert kernel_key(launcher) == "kernel-3f2a"
    assert kernel_key(["launcher", "--f=/run/kernel-v3abc.json"]) == "kernel-v3abc"
    assert kernel_key(["x", "--IPKernelApp.connection_file=/r/kernel-9.json"]) == "kernel-9"
    process = kernel_key(["script.py", "-f", "data.csv"])  # not a connection file
    assert process.startswith("process-") and process == kernel_key([])
    assert kernel_key() == process  # this test process is no kernel
