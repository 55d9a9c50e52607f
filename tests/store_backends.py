"""Both thread stores for the same tests: a TinyDB folder, or a schema in a real PostgreSQL.

PostgreSQL tests need ``NBCHAT_TEST_POSTGRES_URL``, a superuser URL (``.ci/run``
starts a throwaway cluster and sets it). Without it they skip with one reason;
under ``CI=true`` they fail instead, so CI never passes without running them.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

# Read at import: the autouse fixture clears every NBCHAT_* variable for each test.
POSTGRES_URL = os.environ.get("NBCHAT_TEST_POSTGRES_URL", "")
PG_CTL = os.environ.get("NBCHAT_TEST_PG_CTL", "")
NO_POSTGRES = (
    "no PostgreSQL server: set NBCHAT_TEST_POSTGRES_URL "
    "(.ci/run starts a throwaway cluster)"
)
BACKENDS = ("tinydb", "postgresql")

Opener = Callable[[str], Any]


_skipped: list[str] = []


def need_postgres() -> None:
    if POSTGRES_URL:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but no PostgreSQL: {NO_POSTGRES}")
    _skipped.append(NO_POSTGRES)
    pytest.skip(NO_POSTGRES)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One loud line when the PostgreSQL half of the store tests did not run."""
    if _skipped:
        terminalreporter.write_sep(
            "!", f"{len(_skipped)} PostgreSQL store tests SKIPPED: {NO_POSTGRES}",
            yellow=True, bold=True,
        )  # fmt: skip


def with_options(url: str, **settings: str) -> str:
    """*url* with libpq ``options`` that set server settings for each session."""
    options = "%20".join(f"-c{name}%3D{value}" for name, value in settings.items())
    return f"{url}{'&' if '?' in url else '?'}options={options}"


def admin() -> Any:
    import psycopg

    return psycopg.connect(POSTGRES_URL, autocommit=True)


class PgSchema:
    """A fresh schema in the test cluster, dropped (with its pools closed) afterwards."""

    def __init__(self) -> None:
        need_postgres()
        self.name = f"t_{secrets.token_hex(6)}"
        self.roles: list[str] = []
        with admin() as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
            conn.execute(f"GRANT USAGE ON SCHEMA {self.name} TO PUBLIC")
        self.url = self.url_for()
        self.urls = [self.url]

    def url_for(self, role: str | None = None) -> str:
        base = POSTGRES_URL
        if role is not None:
            parts = urlsplit(POSTGRES_URL)
            netloc = f"{quote(role)}@{parts.netloc.rsplit('@', 1)[-1]}"
            base = urlunsplit(parts._replace(netloc=netloc))
        url = with_options(base, search_path=self.name)
        if role is not None:
            self.urls.append(url)
        return url

    def login_role(self, name: str) -> str:
        """A role that logs in (trust, no password) and reaches this schema."""
        with admin() as conn:
            conn.execute(f'CREATE ROLE "{name}" LOGIN')
        self.roles.append(name)
        return self.url_for(name)

    def drop(self) -> None:
        from nbchat.store import _pg

        for url in self.urls:
            _pg.close(url)
        with admin() as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")
            for role in self.roles:
                conn.execute(f'DROP OWNED BY "{role}"')
                conn.execute(f'DROP ROLE "{role}"')


@pytest.fixture
def pg_schema() -> Iterator[PgSchema]:
    schema = PgSchema()
    try:
        yield schema
    finally:
        schema.drop()


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store lives, for each backend: a folder or a ``postgresql://`` URL."""
    if request.param == "tinydb":
        yield str(tmp_path / "store")
        return
    schema = PgSchema()
    try:
        yield schema.url
    finally:
        schema.drop()


@pytest.fixture
def open_for(location: str) -> Opener:
    """Opens the store at ``location`` for a user."""
    from nbchat.store import open_store

    return lambda user: open_store(location, user)


def pg_ctl(*args: str) -> None:
    """Run the test cluster's pg_ctl (as the postgres OS user when we are root)."""
    if not PG_CTL:
        reason = "stopping PostgreSQL needs NBCHAT_TEST_PG_CTL (.ci/run sets it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    command = PG_CTL.split() + list(args)
    if os.getuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=60)
