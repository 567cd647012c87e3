"""Erasure reaches every tenant-scoped table of every service, whatever tables exist.

Real processes: registry, memory, tracker and gateway on a database of the
test's own. Two tenants fill what they can through the public APIs and the
bus; then one user of the first tenant is erased, then the whole first
tenant. The list of tables to cover is read from the live database catalog
(every base table with a ``tenant_id`` column, in every service schema), so a
table a later migration adds is checked without anyone editing this test:

- each service reports (``erasure.completed``, or the memory's response) the
  tables it erased, and that set is the catalog's, for both scopes (a user
  erasure: the tables that also have ``user_id``);
- afterwards no row of the erased tenant is left in any of those tables, and
  the other tenant's rows are still there;
- and no row of any table of any service schema holds the erased tenant's id
  anywhere (its text, whatever the column: a key that embeds the tenant, such as
  a rate-limit window's, counts), where before the erasure rows of many tables did.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from disco.auth import DEV_AUTH_SECRET, mint_dev_token
from disco.bus import BusClient
from disco.settings import BusSettings
from disco_common.auth import Role
from disco_common.envelope import Envelope
from disco_common.notifications import NotificationType
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic, topic_name
from tests.fixtures.bus import read_envelopes
from tests.fixtures.infra import DatabaseUrls, migrated_database
from tests.fixtures.processes import ServiceProcess, start_services, stop_services
from tests.fixtures.waiting import eventually
from tests.integration.memory.test_erasure import fill
from tests.integration.registry.support import registration
from tests.integration.tracker.scenario import plan_scenario

SERVICES = ("registry", "memory", "tracker", "gateway")
SCHEMAS = SERVICES
FOLLOWERS = ("registry", "tracker", "gateway")
SESSION = "erasure-session"

CATALOG = """
SELECT c.table_schema, c.table_name,
       bool_or(c.column_name = 'user_id') AS has_user
  FROM information_schema.columns c
  JOIN information_schema.tables t
    ON t.table_schema = c.table_schema AND t.table_name = c.table_name
 WHERE t.table_type = 'BASE TABLE'
   AND c.table_schema = ANY($1::text[])
   AND c.table_name IN (SELECT table_name FROM information_schema.columns
                         WHERE table_schema = c.table_schema AND column_name = 'tenant_id')
 GROUP BY c.table_schema, c.table_name
"""


def _auth(tenant: str, user: str, *roles: Role) -> dict[str, str]:
    token = mint_dev_token(DEV_AUTH_SECRET, tenant, user, roles or (Role.USER,))
    return {"Authorization": f"Bearer {token}"}


class Stack:
    def __init__(
        self, services: dict[str, ServiceProcess], database: DatabaseUrls, bus: BusSettings
    ) -> None:
        self.services = services
        self.database = database
        self.bus = bus

    def url(self, name: str) -> str:
        return self.services[name].url


@pytest.fixture
def stack(
    postgres_admin_url: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    database = migrated_database(postgres_admin_url)
    bus = BusSettings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix)

    async def provision() -> None:
        async with BusClient(bus) as client:
            await client.ensure_topics()

    asyncio.run(provision())
    env = {
        "DISCO_ENV": "dev",
        "DISCO_DATABASE_URL": database.app,
        "DISCO_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "DISCO_TOPIC_PREFIX": topic_prefix,
        "DISCO_KAFKA_SESSION_TIMEOUT_MS": "2000",
        "DISCO_KAFKA_HEARTBEAT_INTERVAL_MS": "300",
        "DISCO_OUTBOX_SWEEP_INTERVAL_SECONDS": "1",
        "DISCO_LOG_JSON": "true",
        # Counted calls, shared through gateway.rate_limit_counts (keys embed the tenant).
        "DISCO_GATEWAY_RATE_LIMIT_TENANT": "1000/hour",
        "DISCO_GATEWAY_RATE_LIMIT_SHARE_SECONDS": "0.2",
    }
    services = start_services(SERVICES, env, tmp_path)
    try:
        yield Stack(services, database, bus)
    finally:
        stop_services(services.values())


async def _catalog(admin_url: str) -> dict[str, dict[str, bool]]:
    """schema -> {table: has a user_id column} for every tenant-scoped base table."""
    conn = await asyncpg.connect(admin_url)
    try:
        rows = await conn.fetch(CATALOG, list(SCHEMAS))
    finally:
        await conn.close()
    tables: dict[str, dict[str, bool]] = {schema: {} for schema in SCHEMAS}
    for row in rows:
        tables[row["table_schema"]][row["table_name"]] = row["has_user"]
    return tables


async def _count(admin_url: str, schema: str, table: str, tenant: str) -> int:
    conn = await asyncpg.connect(admin_url)
    try:
        count: int = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}"."{table}" WHERE tenant_id = $1',  # noqa: S608
            tenant,
        )
        return count
    finally:
        await conn.close()


async def _rows_of(admin_url: str, tenant: str, catalog: dict[str, dict[str, bool]]) -> int:
    conn = await asyncpg.connect(admin_url)
    try:
        total = 0
        for schema, tables in catalog.items():
            for table in tables:
                total += await conn.fetchval(
                    f'SELECT count(*) FROM "{schema}"."{table}" WHERE tenant_id = $1',  # noqa: S608
                    tenant,
                )
        return total
    finally:
        await conn.close()


async def _rows_holding(admin_url: str, tenant: str) -> dict[str, int]:
    """``schema.table`` -> how many of its rows hold ``tenant`` in any column, for every
    base table of the service schemas (the tenant ids of the test are unique strings)."""
    conn = await asyncpg.connect(admin_url)
    try:
        tables = await conn.fetch(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema = ANY($1::text[])",
            list(SCHEMAS),
        )
        found: dict[str, int] = {}
        for row in tables:
            schema, table = row["table_schema"], row["table_name"]
            count: int = await conn.fetchval(
                f'SELECT count(*) FROM "{schema}"."{table}" AS r '  # noqa: S608
                "WHERE strpos(r::text, $1) > 0",
                tenant,
            )
            if count:
                found[f"{schema}.{table}"] = count
        return found
    finally:
        await conn.close()


async def _outboxes_drained(admin_url: str, tenant: str) -> None:
    """Wait until no service's outbox holds a row of ``tenant`` (all relayed)."""

    async def drained() -> bool:
        holding = await _rows_holding(admin_url, tenant)
        return not any(table.endswith(".outbox") for table in holding)

    await eventually(
        drained, timeout=60, interval=0.2, what=f"every outbox relayed {tenant}'s rows"
    )


async def _completions(stack: Stack, tenant: str, scope: str) -> dict[str, dict[str, Any]]:
    """The followers' erasure.completed data for ``tenant`` and ``scope``, by service."""

    def mine(envelopes: list[Envelope]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for envelope in envelopes:
            data = envelope.data if isinstance(envelope.data, dict) else {}
            if (
                envelope.type == SystemEventType.ERASURE_COMPLETED
                and envelope.tenant_id == tenant
                and data.get("scope") == scope
            ):
                found[str(data["service"])] = data
        return found

    envelopes = await read_envelopes(
        stack.bus.kafka_bootstrap,
        topic_name(Topic.SYSTEM_EVENTS, stack.bus.topic_prefix),
        lambda seen: set(mine(seen)) >= set(FOLLOWERS),
        timeout=90,
    )
    return mine(envelopes)


async def test_erasure_covers_every_tenant_scoped_table_of_every_service(stack: Stack) -> None:
    erased, kept = f"erased-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    scenarios = [plan_scenario(erased, start=now), plan_scenario(kept, start=now)]
    async with httpx.AsyncClient(timeout=30) as http, BusClient(stack.bus) as bus:
        memory = httpx.AsyncClient(base_url=stack.url("memory"), timeout=30)
        async with memory:
            for tenant, user in ((erased, "alice"), (erased, "bob"), (kept, "alice")):
                await fill(memory, _auth(tenant, user), f"{tenant}-{user}")
        for tenant in (erased, kept):
            response = await http.post(
                f"{stack.url('registry')}/v1/agents",
                json=registration(),
                headers=_auth(tenant, "a"),
            )
            assert response.status_code in (200, 201), response.text
        for scenario in scenarios:
            for topic, envelope in scenario.envelopes:
                await bus.publish_envelope(topic, envelope)
        for scenario in scenarios:

            async def tracked(
                plan_id: str = scenario.plan_id, tenant: str = scenario.tenant
            ) -> bool:
                url = f"{stack.url('tracker')}/v1/tracker/plans/{plan_id}"
                return (await http.get(url, headers=_auth(tenant, "a"))).status_code == 200

            await eventually(tracked, timeout=60, what="the tracker has the plan")

        # A question in a session of each tenant: the gateway keeps it in its session
        # stream (gateway.session_events), one of the newer stores erasure must reach.
        for tenant, user in ((erased, "bob"), (kept, "alice")):
            question = await bus.publish(
                Topic.NOTIFICATION_EVENTS,
                NotificationType.HUMAN_INPUT,
                {"question": "Ship it?", "response_event": "ship.answered", "timeout_seconds": 600},
                tenant_id=tenant,
                user_id=user,
                session_id=SESSION,
            )

            async def kept_in_stream(
                tenant: str = tenant, user: str = user, event_id: str = question.id
            ) -> bool:
                url = f"{stack.url('gateway')}/v1/sessions/{SESSION}/events"
                response = await http.get(url, headers=_auth(tenant, user))
                return response.status_code == 200 and any(
                    item["id"] == event_id for item in response.json()["items"]
                )

            await eventually(kept_in_stream, timeout=60, what="the gateway kept the question")

        # A counted call of each tenant: the gateway shares its windows in Postgres.
        for tenant in (erased, kept):
            published = await http.post(
                f"{stack.url('gateway')}/v1/publish",
                json={"topic": "business-facts", "event_type": "erasure.probe", "data": {}},
                headers=_auth(tenant, "alice"),
            )
            assert published.status_code in (200, 202), published.text

            async def counted(tenant: str = tenant) -> bool:
                return "gateway.rate_limit_counts" in await _rows_holding(
                    stack.database.admin, tenant
                )

            await eventually(counted, timeout=60, what="the gateway shared its counts")

        catalog = await _catalog(stack.database.admin)
        holding_before = await _rows_holding(stack.database.admin, erased)
        stream_before = await _count(stack.database.admin, "gateway", "session_events", erased)
        before = await _rows_of(stack.database.admin, erased, catalog)
        kept_before = await _rows_of(stack.database.admin, kept, catalog)

        # One user first: every table with a user column, in every service.
        by_user = await http.delete(
            f"{stack.url('memory')}/v1/memory/erasure/users/bob", headers=_auth(erased, "bob")
        )
        assert by_user.status_code == 200, by_user.text
        user_done = await _completions(stack, erased, "user")

        # Then the whole tenant.
        by_tenant = await http.delete(
            f"{stack.url('memory')}/v1/memory/erasure/tenant",
            headers=_auth(erased, "root", Role.ADMIN),
        )
        assert by_tenant.status_code == 200, by_tenant.text
        tenant_done = await _completions(stack, erased, "tenant")
        # Each follower's erasure.completed was in its outbox until relayed; the relay
        # deletes a row just after publishing it, so one seen on the bus may still be
        # there for a moment (the CI failure: tracker.outbox 1 -> 0 a moment later).
        await _outboxes_drained(stack.database.admin, erased)

        after = await _rows_of(stack.database.admin, erased, catalog)
        holding_after = await _rows_holding(stack.database.admin, erased)
        kept_holding = await _rows_holding(stack.database.admin, kept)
        stream_after = await _count(stack.database.admin, "gateway", "session_events", erased)
        kept_after = await _rows_of(stack.database.admin, kept, catalog)
        kept_plan = await http.get(
            f"{stack.url('tracker')}/v1/tracker/plans/{scenarios[1].plan_id}",
            headers=_auth(kept, "a"),
        )

    user_tables = {
        schema: {table for table, has_user in tables.items() if has_user}
        for schema, tables in catalog.items()
    }
    print(
        f"\nerasure: {sum(len(t) for t in catalog.values())} tenant-scoped tables "
        f"({', '.join(f'{s} {len(t)}' for s, t in catalog.items())}); "
        f"rows of the erased tenant {before} -> {after}; of the other {kept_before} -> {kept_after}"
        f"\nrows holding the erased tenant's id, by table: {holding_before} -> {holding_after}"
    )
    assert set(by_user.json()["deleted"]) == user_tables["memory"]
    assert set(by_tenant.json()["deleted"]) == set(catalog["memory"])
    for service in FOLLOWERS:
        assert set(user_done[service]["deleted"]) == user_tables[service], service
        assert set(tenant_done[service]["deleted"]) == set(catalog[service]), service
    assert before > 0
    assert after == 0
    assert "gateway.rate_limit_counts" in holding_before
    assert len(holding_before) > 5
    assert holding_after == {}
    assert "gateway.rate_limit_counts" in kept_holding
    assert "session_events" in catalog["gateway"]
    assert (stream_before, stream_after) == (1, 0)
    assert kept_after > 0
    assert kept_plan.status_code == 200
