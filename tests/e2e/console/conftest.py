"""The console's stack: the e2e services plus one gateway process serving ``/console``,
and a headless Chromium (Debian's, driven by Playwright) to look at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, Page

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco_common.auth import Role
from tests.e2e.conftest import Stack
from tests.fixtures.browser import browser, chromium_path
from tests.fixtures.processes import ServiceProcess, start_services, stop_services

__all__ = ["browser", "chromium_path"]

OTHER_TENANT = "beta"


def token(tenant: str, user: str = "alice", *roles: Role) -> str:
    """A dev token of ``tenant``/``user`` (role ``user`` unless others are given)."""
    return mint_dev_token(DEV_AUTH_SECRET, tenant, user, list(roles) or [Role.USER])


@dataclass
class Console:
    """The gateway serving the console, beside the e2e stack."""

    stack: Stack
    gateway: ServiceProcess

    @property
    def url(self) -> str:
        return f"{self.gateway.url}/console"


@pytest.fixture(scope="package")
def console(e2e_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A gateway process on the e2e stack's database, broker and services."""
    logs = tmp_path_factory.mktemp("console-logs")
    env = {**e2e_stack.env, "DISCO_DATABASE_URL": e2e_stack.database_url}
    services = start_services(["gateway"], env, logs)
    try:
        yield Console(e2e_stack, services["gateway"])
    finally:
        stop_services(services.values())


class Screens:
    """Saves screenshots of a page under the test's tmp dir, numbered in order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.saved: list[Path] = []

    async def shot(self, page: Page, name: str) -> Path:
        path = self.folder / f"{len(self.saved) + 1:02d}-{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        self.saved.append(path)
        return path


@pytest.fixture
def screens(tmp_path: Path) -> Screens:
    folder = tmp_path / "screenshots"
    folder.mkdir()
    return Screens(folder)


async def signed_in(browser: Browser, console: Console, bearer: str) -> BrowserContext:
    """A browser context signed in to the console with ``bearer`` through the login page."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    await page.goto(f"{console.url}/login")
    await page.fill("#token", bearer)
    await page.click("#sign-in")
    await page.wait_for_url(f"{console.url}/plans")
    await page.close()
    return context


@pytest.fixture
async def contexts(browser: Browser) -> AsyncIterator[list[BrowserContext]]:
    """Contexts a test opened, closed at its end."""
    opened: list[BrowserContext] = []
    yield opened
    for context in opened:
        await context.close()
