"""The console's Bus page in headless Chromium against the e2e stack: the registry's
AsyncAPI document of the tenant's bus rendered for people, and nothing of another
tenant's. Screenshots land in the test's tmp dir (``screenshots/``)."""

from __future__ import annotations

import uuid

import httpx
import pytest
import yaml
from playwright.async_api import Browser, BrowserContext, expect

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.clients import RegistryClient, StaticToken
from disco_common.auth import Role
from tests.e2e.console.conftest import Console, Screens, signed_in, token
from tests.fixtures.bus_agents import register_bus

pytestmark = pytest.mark.e2e


async def test_the_bus_page_shows_topics_payloads_senders_and_receivers_of_its_tenant_only(
    browser: Browser, console: Console, screens: Screens, contexts: list[BrowserContext]
) -> None:
    tenant, other = f"bus-{uuid.uuid4().hex[:8]}", f"bus-{uuid.uuid4().hex[:8]}"
    registry = RegistryClient(
        console.stack.urls["registry"],
        token=StaticToken(mint_dev_token(DEV_AUTH_SECRET, tenant, "alice", [Role.USER], 600)),
    )
    async with registry:
        names = await register_bus(registry)
    prefix = console.stack.prefix

    context = await signed_in(browser, console, token(tenant))
    contexts.append(context)
    page = await context.new_page()
    await page.goto(f"{console.url}/bus")
    await expect(page.locator("header nav a.on")).to_have_text("Bus")

    # Topics with their addresses on Kafka and their event types.
    requests = page.locator('#bus-topics tr.topic-row[data-topic="action-requests"]')
    await expect(requests).to_contain_text(f"{prefix}action-requests")
    await expect(requests).to_contain_text(f"{prefix}action-requests.dlq")
    await expect(requests.locator("a.event-link", has_text="quote.requested")).to_be_visible()
    await screens.shot(page, "bus-topics")

    # An event type: its payload as a table (nested fields under their parent), and who
    # sends and receives it, linked to the agents.
    request = page.locator('section.event-type[data-event-type="quote.requested"]')
    await requests.locator("a.event-link", has_text="quote.requested").click()
    assert page.url.endswith("#event-quote.requested")
    kg = request.locator('tr.field-row[data-field="kg"]')
    await expect(kg.locator("td.required")).to_have_text("yes")
    await expect(kg).to_contain_text("> 0")
    await expect(request.locator('tr.field-row[data-field="to.city"]')).to_be_visible()
    await expect(request.locator("dd.senders")).to_contain_text(names["worker"])
    await expect(request.locator("dd.receivers")).to_contain_text(names["tool"])
    await expect(request.locator("details pre")).to_contain_text('"carrier": "swift"')
    await screens.shot(page, "bus-event-type")

    fact = page.locator('section.event-type[data-event-type="order.shipped"]')
    await expect(fact.locator("h3 .badge")).to_have_text("order.shipped@1.0.0")
    await expect(fact.locator("dd.senders")).to_contain_text(names["planner"])
    # disco's own system events are there, folded away until asked for.
    progress = page.locator('section.event-type[data-event-type="task.progress"]')
    await expect(progress).to_be_hidden()
    await page.locator("#platform-events > summary").click()
    await expect(progress.locator('tr.field-row[data-field="task_id"] td.required')).to_have_text(
        "yes"
    )
    await expect(progress.locator("dd.senders")).to_contain_text(names["worker"])

    # From a receiver to its agent, and from there to the Agents page.
    await request.locator("dd.receivers a.agent-link", has_text=names["tool"]).click()
    agent = page.locator(f'tr.bus-agent[data-agent="{names["tool"]}"]')
    await expect(agent).to_contain_text("quote.requested")
    assert page.url.endswith(f"#bus-agent-{names['tool']}")
    await screens.shot(page, "bus-agent")
    await agent.locator("td a").first.click()
    await page.wait_for_url(f"{console.url}/agents#agent-{names['tool']}")
    await expect(page.locator(f"#agent-{names['tool']}")).to_be_visible()

    # Narrowed to one agent: only what it uses.
    await page.goto(f"{console.url}/bus?agent={names['worker']}")
    await expect(page.locator("tr.bus-agent")).to_have_count(1)
    await expect(page.locator('section.event-type[data-event-type="order.shipped"]')).to_have_count(
        0
    )
    missing = await page.goto(f"{console.url}/bus?agent=nobody")
    assert missing is not None
    assert missing.status == 404
    await expect(page.locator("main")).to_contain_text(names["worker"])  # the live agents named

    # The document itself, to open in AsyncAPI tools.
    cookies = {c["name"]: c["value"] for c in await context.cookies()}
    async with httpx.AsyncClient(cookies=cookies) as http:
        download = await http.get(f"{console.url}/bus/asyncapi.yaml")
    assert download.status_code == 200
    assert "attachment" in download.headers["content-disposition"]
    assert yaml.safe_load(download.text)["info"]["x-disco-tenant"] == tenant

    # Another tenant's bus has none of it.
    elsewhere = await signed_in(browser, console, token(other))
    contexts.append(elsewhere)
    theirs = await elsewhere.new_page()
    await theirs.goto(f"{console.url}/bus")
    await expect(theirs.locator("#bus-topics")).to_be_visible()
    await expect(theirs.locator("#no-bus-agents")).to_be_visible()
    content = await theirs.content()
    for name in names.values():
        assert name not in content
    assert "quote.requested" not in content
    await screens.shot(theirs, "bus-other-tenant")
