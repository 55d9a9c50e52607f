"""Fixtures for the browser tests: one JupyterLab and one Chromium per session.

Kernels inherit the server's environment, fixed when the server starts. To
point them somewhere (a loopback model server, a store path), override
`jupyterlab_env` in this directory's conftest (a module-level override would
only win if its module happened to start the shared server first)::

    @pytest.fixture(scope="session")
    def jupyterlab_env(scripted_server):
        return {"NBCHAT_BASE_URL": scripted_server.url}

A test that needs its own server uses `start_jupyterlab(tmp_path, env=...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from .jupyterlab import (
    CHROMIUM,
    JupyterLab,
    NotebookPage,
    launch_chromium,
    open_notebook,
    safe_name,
    screenshot,
    start_jupyterlab,
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def jupyterlab_env() -> dict[str, str]:
    """Extra environment for the session's JupyterLab server and its kernels."""
    return {}


@pytest.fixture(scope="session")
def jupyterlab(
    tmp_path_factory: pytest.TempPathFactory, jupyterlab_env: dict[str, str]
) -> Iterator[JupyterLab]:
    """An isolated JupyterLab server on a free loopback port, shared by the session."""
    with start_jupyterlab(tmp_path_factory.mktemp("jupyterlab"), env=jupyterlab_env) as lab:
        yield lab


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Debian's headless Chromium; a missing binary fails the test, never skips it."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: run `apt-get install -y chromium` "
            "(the e2e tests use Debian's Chromium, not a Playwright download)",
            pytrace=False,
        )
    browser = launch_chromium(playwright)
    yield browser
    browser.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context and page; on failure, a screenshot and the console log."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
    yield page
    if request.node.stash.get(_CALL_FAILED, False):
        name = safe_name(request.node.name)
        path = screenshot(page, f"{name}/failure")
        path.with_name("failure-console.log").write_text("\n".join(console) + "\n")
    context.close()


@pytest.fixture
def notebook(
    page: Page, jupyterlab: JupyterLab, request: pytest.FixtureRequest
) -> Callable[[list[str]], NotebookPage]:
    """Open a notebook of code cells named after the test: `nb = notebook([src, ...])`."""

    def open_cells(cells: list[str]) -> NotebookPage:
        return open_notebook(page, jupyterlab, cells, name=safe_name(request.node.name))

    return open_cells
