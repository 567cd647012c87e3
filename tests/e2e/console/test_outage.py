"""The console while a database is down: a page that says what is down, and that comes back
by itself (Chromium, on a stack whose PostgreSQL server the test stalls with SIGSTOP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, BrowserContext, expect

from tests.e2e.conftest import TENANT
from tests.e2e.console.conftest import Console, Screens, signed_in, token
from tests.fixtures.fault_stack import FaultStack, own_database_stack
from tests.fixtures.faults import stalled

SERVICES = ("registry", "memory", "tracker", "gateway")


@pytest.fixture
def outage_stack(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[FaultStack]:
    """The four services on a PostgreSQL server of this test's own."""
    with own_database_stack(kafka_bootstrap, topic_prefix, tmp_path, SERVICES) as stack:
        yield stack


async def test_a_page_whose_database_is_down_says_so_and_shows_itself_once_it_is_back(
    browser: Browser,
    outage_stack: FaultStack,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    console = Console(stack=None, gateway=outage_stack.services["gateway"])  # type: ignore[arg-type]
    context = await signed_in(browser, console, token(TENANT))
    contexts.append(context)
    page = await context.new_page()

    with stalled(outage_stack.server):
        # The plans come from the tracker, whose database is stalled.
        plans = await page.goto(f"{console.url}/plans")
        assert plans is not None
        assert plans.status == 503
        assert plans.headers["retry-after"] == "5"
        await expect(page.locator("#outage-title")).to_have_text("The tracker's database is down")
        await expect(page.locator("#outage-lead")).to_contain_text("cannot reach its database")
        await expect(page.locator("#retry-now")).to_have_attribute("href", "/console/plans")
        await expect(page.locator("header.top nav")).to_be_visible()  # still the console
        await screens.shot(page, "tracker-down")

        # The push notifications come from the gateway's own database.
        pushes = await page.goto(f"{console.url}/pushes")
        assert pushes is not None
        assert pushes.status == 503
        await expect(page.locator("#outage-title")).to_have_text("The gateway's database is down")
        await expect(page.locator("#outage-lead")).to_contain_text("cannot reach its database")
        await screens.shot(page, "gateway-database-down")

    # Back: the page asks again by itself and shows what it was asked for.
    await expect(page.locator("h1")).to_have_text("Push notifications", timeout=60_000)
    await expect(page.locator("#outage")).to_have_count(0)
    await screens.shot(page, "back")
    await page.goto(f"{console.url}/plans")  # the tracker may take a moment more to be back
    await expect(page.locator("h1")).to_have_text("Plans", timeout=60_000)
