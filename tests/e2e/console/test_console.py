"""The web console in headless Chromium against a real stack (services, agents, broker, Postgres).

Screenshots of every step land in the test's tmp dir (``screenshots/``).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator

import asyncpg
import httpx
import pytest
from playwright.async_api import Browser, BrowserContext, expect

from disco.bus import BusClient, BusConsumer, NonRetryableError
from disco_common.auth import TENANT_CREDENTIAL_HEADER, Role
from disco_common.envelope import Envelope, headers_dict
from disco_common.topics import Topic
from tests.e2e.conftest import TENANT, USER, AgentProcess, Stack, start_agents, stop_agents
from tests.e2e.console.conftest import OTHER_TENANT, Console, Screens, signed_in, token
from tests.fixtures.bus import read_records

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo_agents(e2e_stack: Stack) -> Iterator[AgentProcess]:
    """The demo's planners and fan-out worker (examples/), in one process."""
    agents = start_agents(e2e_stack, "tracker-demo")
    try:
        yield agents
    finally:
        stop_agents(agents)


async def _holiday(caller: BusClient) -> str:
    answer = await caller.request(
        "e2e.holiday.goal",
        {"city": "Lisbon"},
        response_event="e2e.holiday.done",
        tenant_id=TENANT,
        wait=120,
    )
    assert answer.plan_id is not None
    return answer.plan_id


async def test_a_bad_token_gets_the_login_page_and_never_data(
    browser: Browser, console: Console, screens: Screens, contexts: list[BrowserContext]
) -> None:
    context = await browser.new_context()
    contexts.append(context)
    page = await context.new_page()

    # No token: every page sends you to the login page.
    for path in ("/plans", "/agents", "/dlq", "/pushes", "/health", "/sessions/s-1"):
        response = await page.goto(f"{console.url}{path}")
        assert response is not None
        assert page.url.startswith(f"{console.url}/login"), path
        await expect(page.locator("#token")).to_be_visible()

    # A forged token (signed with another secret) is refused at the door.
    forged = token(TENANT).rsplit(".", 1)[0] + ".bm90LXRoZS1zaWduYXR1cmU"
    await page.fill("#token", forged)
    await page.click("#sign-in")
    await expect(page.locator("#login-error")).to_be_visible()
    await screens.shot(page, "bad-token")
    assert "/console/plans" not in page.url

    # A forged cookie fares no better, and is dropped.
    await context.add_cookies(
        [
            {
                "name": "disco_console_token",
                "value": forged,
                "domain": "127.0.0.1",
                "path": "/console",
            }
        ]
    )
    await page.goto(f"{console.url}/plans")
    assert page.url.startswith(f"{console.url}/login")
    assert not [c for c in await context.cookies() if c["name"] == "disco_console_token"]

    # Without a browser: no data either, just the way to the login page.
    async with httpx.AsyncClient(cookies={"disco_console_token": forged}) as http:
        answer = await http.get(f"{console.url}/plans")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/console/login")


async def test_a_plan_shows_with_its_state_machine_tasks_and_sub_plans_for_its_tenant_only(
    browser: Browser,
    console: Console,
    demo_agents: AgentProcess,
    caller: BusClient,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    plan_id = await _holiday(caller)
    acme = await signed_in(browser, console, token(TENANT))
    contexts.append(acme)
    page = await acme.new_page()

    await page.goto(f"{console.url}/plans")
    row = page.locator(f'tr.plan-row[data-plan-id="{plan_id}"]')
    await expect(row).to_be_visible(timeout=30_000)  # the list refreshes itself
    await screens.shot(page, "plans")

    # Filtering narrows the list without reloading the page.
    await page.select_option('select[name="status"]', "failed")
    await expect(row).to_have_count(0)
    await page.select_option('select[name="status"]', "completed")
    await expect(row).to_be_visible()

    await row.locator("a").first.click()
    await page.wait_for_url(f"{console.url}/plans/{plan_id}")
    await expect(page.locator("#plan-status")).to_have_text("completed", timeout=30_000)
    diagram = page.locator("#state-diagram")
    await expect(diagram).to_be_visible()
    current = (await page.locator("#current-state").inner_text()).strip()
    await expect(diagram.locator(f'g.current[data-state="{current}"]')).to_have_count(1)
    assert await page.locator("#tasks tr.task-row").count() >= 1
    await expect(page.locator("#plan-tree li li")).not_to_have_count(0)  # the nested trip plan
    assert await page.locator("#timeline tbody tr").count() >= 2
    await screens.shot(page, "plan-detail")

    await page.goto(f"{console.url}/agents")
    await expect(
        page.locator('tr.agent-row[data-agent="e2e-holiday-planner"] .badge')
    ).to_have_text("live")
    # Each capability's tool name at /mcp (<agent>__<skill>).
    tools = page.locator('tr.agent-row[data-agent="e2e-holiday-planner"] code.mcp-tool')
    await expect(tools.first).to_have_text(re.compile(r"^e2e-holiday-planner__[A-Za-z0-9.-]+$"))
    await page.goto(f"{console.url}/health")
    for name in ("gateway", "registry", "memory", "tracker"):
        badge = page.locator(f'tr.service-health[data-service="{name}"] td:nth-child(2) .badge')
        await expect(badge).to_have_text("ready")
    await screens.shot(page, "health")

    # Tenant B sees none of it: not in the list, not by its id.
    beta = await signed_in(browser, console, token(OTHER_TENANT))
    contexts.append(beta)
    other = await beta.new_page()
    await other.goto(f"{console.url}/plans")
    await expect(other.locator("#no-plans")).to_be_visible()
    assert plan_id not in await other.content()
    response = await other.goto(f"{console.url}/plans/{plan_id}")
    assert response is not None
    assert response.status == 404
    assert plan_id in await other.locator("main").inner_text()  # the id asked for, and no data
    await expect(other.locator("#state-diagram")).to_have_count(0)
    await screens.shot(other, "tenant-b")


async def test_a_dead_letter_shows_its_reason_and_an_admin_republishes_it(
    browser: Browser,
    console: Console,
    caller: BusClient,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    event_type = f"console.dlq.{uuid.uuid4().hex[:8]}"
    handled: list[Envelope] = []
    got_it_again = asyncio.Event()

    async def handle(envelope: Envelope) -> None:
        handled.append(envelope)
        if len(handled) == 1:
            raise NonRetryableError("the warehouse is closed")
        got_it_again.set()

    consumer = BusConsumer(caller, f"console-dlq-{uuid.uuid4().hex[:6]}")
    consumer.add_handler(Topic.BUSINESS_FACTS, event_type, handle)
    async with consumer:
        sent = await caller.announce(event_type, {"sku": "A-1"}, tenant_id=TENANT)

        admin_token = token(TENANT, "root", Role.USER, Role.ADMIN)
        acme = await signed_in(browser, console, admin_token)
        contexts.append(acme)
        page = await acme.new_page()
        row = page.locator("tr.dead-letter", has_text=sent.id)
        async with asyncio.timeout(60):
            while not await row.count():  # the consumer dead-letters it, then the page shows it
                await page.goto(f"{console.url}/dlq")
        await expect(row.locator("td.reason")).to_contain_text("the warehouse is closed")
        await expect(row.locator("td.reason")).to_contain_text("NonRetryableError")
        # The envelope's data as a key/value table; the raw record behind a toggle.
        data = row.locator(".payload table.kv tr", has=page.locator("th", has_text="sku"))
        await expect(data.locator("td")).to_have_text("A-1")
        await expect(row.locator("details.raw pre").first).to_be_hidden()
        await screens.shot(page, "dead-letters")

        # Tenant B does not see it; a user without the admin role gets no button.
        beta = await signed_in(browser, console, token(OTHER_TENANT, "root", Role.ADMIN))
        contexts.append(beta)
        other = await beta.new_page()
        await other.goto(f"{console.url}/dlq")
        assert sent.id not in await other.content()
        plain = await signed_in(browser, console, token(TENANT))
        contexts.append(plain)
        viewer = await plain.new_page()
        await viewer.goto(f"{console.url}/dlq")
        await expect(viewer.locator("tr.dead-letter", has_text=sent.id)).to_be_visible()
        await expect(viewer.locator("button.republish")).to_have_count(0)

        page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
        await row.locator("button.republish").click()
        await expect(page.locator("#republished")).to_contain_text(sent.id)
        await screens.shot(page, "republished")
        async with asyncio.timeout(60):
            await got_it_again.wait()
    assert [envelope.id for envelope in handled] == [sent.id, sent.id]
    assert handled[1].data == {"sku": "A-1"}
    log = console.gateway.log.read_text()
    assert "dead_letter_republished" in log
    assert sent.id in log
    # The admin vouches for the republished copy: their token is its credential now.
    copies = await read_records(
        caller.settings.kafka_bootstrap,
        caller.topic_name(Topic.BUSINESS_FACTS),
        lambda seen: sum(headers_dict(r.headers).get("ce_id") == sent.id for r in seen) >= 2,
    )
    credentials = [
        headers_dict(r.headers).get(TENANT_CREDENTIAL_HEADER)
        for r in copies
        if headers_dict(r.headers).get("ce_id") == sent.id
    ]
    assert len(credentials) == 2
    assert credentials[0] not in (None, admin_token)
    assert credentials[1] == admin_token


async def test_push_notifications_waiting_for_a_webhook_show_for_their_tenant_only(
    browser: Browser, console: Console, screens: Screens, contexts: list[BrowserContext]
) -> None:
    task_id = f"task-{uuid.uuid4().hex[:10]}"
    url = f"https://hooks.example.com/{task_id}"
    # What a webhook that keeps failing leaves: a notification tried twice, the next
    # try an hour away (so no sweeper takes it while the test looks).
    connection = await asyncpg.connect(console.stack.database_url.replace("+asyncpg", ""))
    try:
        async with connection.transaction():
            await connection.execute(
                "SELECT set_config('disco.tenant_id', $1, true), "
                "set_config('disco.user_id', $2, true)",
                TENANT,
                USER,
            )
            await connection.execute(
                "INSERT INTO gateway.a2a_push_configs (tenant_id, task_id, config_id, user_id,"
                " config) VALUES ($1, $2, 'hook', $3, $4::jsonb)",
                TENANT, task_id, USER, json.dumps({"id": "hook", "url": url}),
            )  # fmt: skip
            await connection.execute(
                "INSERT INTO gateway.a2a_push_deliveries (tenant_id, task_id, config_id, user_id,"
                " body, attempts, due_at) VALUES ($1, $2, 'hook', $3, $4::jsonb, 2,"
                " now() + interval '1 hour')",
                TENANT, task_id, USER,
                json.dumps({"statusUpdate": {"taskId": task_id,
                                             "status": {"state": "TASK_STATE_WORKING"}}}),
            )  # fmt: skip

        acme = await signed_in(browser, console, token(TENANT))
        contexts.append(acme)
        page = await acme.new_page()
        await page.goto(f"{console.url}/pushes")
        row = page.locator("tr.waiting-push", has_text=task_id)
        await expect(row).to_contain_text(url)
        await expect(row).to_contain_text("TASK_STATE_WORKING")
        await expect(row.locator("td.attempts")).to_have_text("2")
        await expect(row).to_contain_text(re.compile(r"in \d+m"))  # the next try, an hour away
        await screens.shot(page, "push-notifications")

        beta = await signed_in(browser, console, token(OTHER_TENANT))
        contexts.append(beta)
        other = await beta.new_page()
        await other.goto(f"{console.url}/pushes")
        assert task_id not in await other.content()
    finally:
        async with connection.transaction():
            await connection.execute("SELECT set_config('disco.tenant_id', $1, true)", TENANT)
            await connection.execute(
                "DELETE FROM gateway.a2a_push_configs WHERE task_id = $1", task_id
            )
        await connection.close()


@pytest.fixture(scope="module")
def runtime_agent(e2e_stack: Stack) -> Iterator[AgentProcess]:
    """An LLM agent on the runtime whose ``book_trip`` tool needs a person's approval."""
    agent = start_agents(e2e_stack, "runtime")
    try:
        yield agent
    finally:
        stop_agents(agent)


async def test_a_pending_tool_call_is_approved_in_the_session_view_and_the_agent_proceeds(
    browser: Browser,
    console: Console,
    runtime_agent: AgentProcess,
    caller: BusClient,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    session_id = f"sess-{uuid.uuid4().hex[:12]}"
    acme = await signed_in(browser, console, token(TENANT, USER))
    contexts.append(acme)
    page = await acme.new_page()
    await page.goto(f"{console.url}/sessions/{session_id}")
    await expect(page.locator("#stream-state")).to_have_text("live")

    answer = asyncio.ensure_future(
        caller.request(
            "e2e-runtime.requested",
            {"text": "book Lisbon on 2026-05-01"},
            response_event="e2e-runtime.answered",
            tenant_id=TENANT,
            user_id=USER,
            session_id=session_id,
            wait=120,
        )
    )
    try:
        card = page.locator(".card.approval")
        await expect(card).to_be_visible(timeout=60_000)
        await expect(card).to_contain_text("book_trip")
        # The question behind the approval came too, and is no second card.
        asked = page.locator('#events tr.event[data-type="HUMAN_INPUT_REQUESTED"]')
        approval = page.locator('#events tr.event[data-type="TOOL_APPROVAL_REQUESTED"]')
        await expect(asked).to_have_count(1, timeout=60_000)
        await expect(approval).to_have_count(1, timeout=60_000)
        await expect(page.locator("#pending .card")).to_have_count(1)
        await expect(card).to_contain_text("e2e-runtime")  # the agent, by name
        city = card.locator(".arguments table.kv tr", has=page.locator("th", has_text="city"))
        await expect(city.locator("td")).to_have_text("Lisbon")
        await screens.shot(page, "approval-pending")

        # Tenant B on the same session id sees nothing of it.
        beta = await signed_in(browser, console, token(OTHER_TENANT, USER))
        contexts.append(beta)
        other = await beta.new_page()
        await other.goto(f"{console.url}/sessions/{session_id}")
        await expect(other.locator("#stream-state")).to_have_text("live")
        await expect(other.locator("#events tr.event")).to_have_count(0)
        await expect(other.locator(".card.approval")).to_have_count(0)

        await card.locator("button.approve").click()
        result = await asyncio.wait_for(answer, 120)
    finally:
        answer.cancel()
    assert "TRIP-LIS-2026-05-01" in str(result.data)
    events = page.locator("#events tr.event")
    await expect(events.filter(has_text="TOOL_APPROVED")).to_have_count(1)
    await expect(events.filter(has_text="TOOL_EXECUTION_SUCCEEDED")).to_have_count(1)
    await expect(page.locator(".card.approval")).to_have_count(0)
    # The decided call left "Waiting for you", and stays gone when the page is read again.
    await expect(page.locator("#pending .card")).to_have_count(0)
    await expect(page.locator("#nothing-pending")).to_be_visible()
    await screens.shot(page, "approved")
    await page.reload()
    await expect(events.filter(has_text="TOOL_EXECUTION_SUCCEEDED")).to_have_count(1)
    await expect(page.locator("#pending .card")).to_have_count(0)
    await expect(page.locator("#nothing-pending")).to_be_visible()
    await expect(other.locator("#events tr.event")).to_have_count(0)


_LINES = """(cells) => cells.map((cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  const tops = new Set(Array.from(range.getClientRects())
    .filter((rect) => rect.width > 0).map((rect) => Math.round(rect.top)));
  return tops.size;
})"""
"""How many lines the text of each cell takes in the browser."""


async def test_the_session_view_shows_payloads_as_tables_and_times_on_one_line(
    browser: Browser,
    console: Console,
    runtime_agent: AgentProcess,
    caller: BusClient,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    session_id = f"sess-{uuid.uuid4().hex[:12]}"
    answer = await caller.request(
        "e2e-runtime.requested",
        {"text": "What is the weather in Lisbon?"},
        response_event="e2e-runtime.answered",
        tenant_id=TENANT,
        user_id=USER,
        session_id=session_id,
        wait=120,
    )
    assert answer.data["success"] is True  # type: ignore[index]
    acme = await signed_in(browser, console, token(TENANT, USER))
    contexts.append(acme)
    page = await acme.new_page()
    await page.set_viewport_size({"width": 900, "height": 900})  # where times wrapped
    await page.goto(f"{console.url}/sessions/{session_id}")
    started = page.locator('#events tr.event[data-type="TOOL_EXECUTION_STARTED"]')
    await expect(started).to_have_count(1, timeout=30_000)
    await expect(page.locator('#events tr.event[data-type="agent.status"]').last).to_contain_text(
        "completed"
    )

    times = page.locator("#events td.at")
    assert all(re.fullmatch(r"\d{2}:\d{2}:\d{2}", text) for text in await times.all_inner_texts())
    assert set(await times.evaluate_all(_LINES)) == {1}
    # Every event's payload is a key/value table, its JSON behind a toggle.
    rows = await page.locator("#events tr.event").count()
    await expect(page.locator("#events td.details > .payload")).to_have_count(rows)
    tool = started.locator("table.kv tr", has=page.locator("th", has_text="tool_name"))
    await expect(tool.locator("td")).to_have_text("lookup_weather")
    raw = started.locator("details.raw pre")
    await expect(raw).to_be_hidden()
    await started.locator("details.raw summary").click()
    await expect(raw).to_be_visible()
    assert json.loads(await raw.inner_text())["tool_name"] == "lookup_weather"
    await screens.shot(page, "session-payloads")


async def test_a_plans_timeline_is_numbered_in_order_with_times_on_one_line_and_its_data(
    browser: Browser,
    console: Console,
    demo_agents: AgentProcess,
    caller: BusClient,
    screens: Screens,
    contexts: list[BrowserContext],
) -> None:
    plan_id = await _holiday(caller)
    acme = await signed_in(browser, console, token(TENANT))
    contexts.append(acme)
    page = await acme.new_page()
    await page.set_viewport_size({"width": 900, "height": 900})
    await page.goto(f"{console.url}/plans/{plan_id}")
    await expect(page.locator("#plan-status")).to_have_text("completed", timeout=30_000)

    entries = page.locator("#timeline tr.timeline-entry")
    count = await entries.count()
    assert count >= 10
    numbers = await entries.locator("td.n").all_inner_texts()
    assert numbers == [str(n) for n in range(1, count + 1)]  # in order, as the rows are
    # The tracker's arrival number is kept as the tooltip.
    arrival = await entries.first.locator("td.n").get_attribute("title")
    assert re.fullmatch(r"arrival #\d+ at the tracker", arrival or "")
    assert set(await page.locator("#timeline td.at").evaluate_all(_LINES)) == {1}
    # An entry's data opens as a key/value table, its JSON behind a toggle of its own.
    request = entries.filter(has_text="trip.requested").first
    await request.locator("details.data > summary").click()
    city = request.locator("table.kv tr", has=page.locator("th", has_text="city"))
    await expect(city.locator("td")).to_have_text("Lisbon")
    await expect(request.locator("details.raw pre")).to_be_hidden()
    await screens.shot(page, "timeline")


async def test_every_console_page_has_a_favicon_and_nothing_it_loads_fails(
    browser: Browser, console: Console, contexts: list[BrowserContext]
) -> None:
    acme = await signed_in(browser, console, token(TENANT))
    contexts.append(acme)
    page = await acme.new_page()
    failed: list[str] = []
    page.on(
        "response",
        lambda response: (
            failed.append(f"{response.status} {response.url}") if response.status >= 400 else None
        ),
    )

    icons = set()
    for path in ("plans", "agents", "sessions", "dlq", "pushes", "health", "login"):
        await page.goto(f"{console.url}/{path}")
        await page.wait_for_load_state("networkidle")
        icons.add(await page.locator('link[rel="icon"]').get_attribute("href"))
    (icon,) = icons
    assert icon is not None
    served = await page.request.get(f"{console.gateway.url}{icon}")

    assert failed == []
    assert served.status == 200
    assert served.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in await served.text()
