"""open_store: one door to a thread store, whichever kind its location names.

It stands apart from both engines so that neither imports the other.
"""

from __future__ import annotations

import os

from ..base.config import store_location
from .base import Store
from .tinydb import ThreadStore


def open_store(
    location: str | os.PathLike[str] | Store | None = None, user: str | None = None
) -> Store:
    """The store at *location*: a ``postgresql://`` URL, a folder, or a store object as it is.

    None means ``NBCHAT_STORE_URL``, else ``NBCHAT_STORE``, else the Jupyter data
    dir (see :func:`nbchat.base.config.store_location`); *user* defaults as
    :class:`ThreadStore`'s does.
    """
    if location is not None and not isinstance(location, (str, os.PathLike)):
        return location
    where = store_location(location)
    if isinstance(where, str):
        from .postgres import PostgresStore

        return PostgresStore(where, user)
    return ThreadStore(where, user)
