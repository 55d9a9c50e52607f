"""What a user's kernels have spent, in the TinyDB folder: one small file beside the threads.

``spending.json`` holds one document per kernel: its key, the dollars it has
spent, when it started spending and when it last did. It is read and
rewritten whole under the user's lock (like every file of the folder), and a
kernel nobody added to for ``SPENDING_DAYS`` days is dropped on the next
write, so the file stays small however many kernels come and go.
"""

from __future__ import annotations

import time
from pathlib import Path

from tinydb import Query

from ._storage import open_db
from .base import SPENDING_DAYS

FILE = "spending.json"
_HINT = "it only holds what kernels spent: move it away and their spending starts again at 0"


def spent(folder: Path, kernel: str) -> float:
    """What ``kernel`` has spent (0 when it never spent anything). Call under the lock."""
    path = folder / FILE
    if not path.exists():
        return 0.0
    with open_db(path, hint=_HINT) as db:
        found = db.table("kernels").get(Query().kernel == kernel)
    return _amount(found)


def add(folder: Path, kernel: str, amount: float) -> float:
    """Add ``amount`` to what ``kernel`` has spent; the new total. Call under the lock."""
    now = time.time()
    with open_db(folder / FILE, hint=_HINT) as db:
        table = db.table("kernels")
        row = Query()
        table.remove(row.updated < now - SPENDING_DAYS * 86400)
        found = table.get(row.kernel == kernel)
        total = _amount(found) + amount
        if found is None:
            table.insert({"kernel": kernel, "spent": total, "started": now, "updated": now})
        else:
            table.update({"spent": total, "updated": now}, row.kernel == kernel)
    return total


def _amount(found: object) -> float:
    """The dollars a stored document holds; 0 for anything that is not such a number."""
    value = found.get("spent") if isinstance(found, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if 0 <= value < 1e12 else 0.0
