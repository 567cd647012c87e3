"""Session streams hand events to sockets before Postgres has them, and lose none of them.

A gateway instance of its own (its own topics, so no other instance stores for
it, and its own database: see :func:`own`), a real broker and Postgres: the test
holds a lock that stalls every store of session events, so what the socket
receives meanwhile is not stored; the instance is killed (SIGKILL) with those
events unstored, and the restarted one still replays all of them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest

from disco.bus import BusClient
from disco.runtime import publish_ui_event
from disco.settings import BusSettings
from tests.e2e.gateway.conftest import TENANT, GatewayProcess, GatewayStack, bearer
from tests.e2e.gateway.streams import stream
from tests.e2e.gateway.support import until
from tests.fixtures.infra import migrated_database

_COUNT = 5


@dataclass
class Own:
    gateway: GatewayProcess
    bus: BusClient
    database_admin: str


@pytest.fixture
async def own(gateway_stack: GatewayStack, postgres_admin_url: str) -> AsyncIterator[Own]:
    """A gateway on topics and a database of its own, and a bus client of those topics;
    stopped at the end of the test.

    Its own database, not the stack's: an instance of another topic prefix on the same
    database is another environment sharing its rows (DESIGN: one database per
    environment). Its outbox relay claimed rows the shared gateway committed (a tool
    decision, an answer) and published them under its own prefix, where neither the
    shared gateway nor the agents read: the decisions of the tests after this one were
    lost whenever that relay's sweep came before the shared gateway's own relay.
    """
    prefix = f"{gateway_stack.prefix}own{uuid.uuid4().hex[:6]}."
    database = await asyncio.to_thread(migrated_database, postgres_admin_url)
    settings = BusSettings(kafka_bootstrap=gateway_stack.bootstrap, topic_prefix=prefix)
    async with BusClient(settings, name="gw-durability-test") as bus:
        await bus.ensure_topics()
        gateway = GatewayProcess(
            {
                **gateway_stack.gateway_env,
                "DISCO_TOPIC_PREFIX": prefix,
                "DISCO_DATABASE_URL": database.app,
            },
            gateway_stack.logs,
        )
        try:
            yield Own(gateway.start(), bus, database.admin)
        finally:
            gateway.stop()


async def _log(bus: BusClient, session: str, n: int) -> str:
    envelope = await publish_ui_event(
        bus, "TOOL_LOG", {"message": f"line {n}"}, session_id=session, tenant_id=TENANT
    )
    return envelope.id


async def _replay(url: str, session: str, after: str | None) -> list[str]:
    params = {"after": after} if after is not None else {}
    async with httpx.AsyncClient(headers=bearer(), timeout=60) as http:
        response = await http.get(f"{url}/v1/sessions/{session}/events", params=params)
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["gap"] is False
    return [item["id"] for item in page["items"]]


async def test_events_streamed_but_not_stored_when_the_gateway_dies_are_replayed_after_restart(
    own: Own,
) -> None:
    gateway, bus = own.gateway, own.bus
    session = f"s-{uuid.uuid4().hex[:12]}"
    first = await _log(bus, session, 0)

    async def kept() -> bool | None:
        return True if first in await _replay(gateway.url, session, None) else None

    await until(kept, what="the first event is stored")

    admin = await asyncpg.connect(own.database_admin)
    try:
        stall = admin.transaction()
        await stall.start()
        # Every store of session events waits behind this lock; reads go on.
        await admin.execute("LOCK TABLE gateway.session_events IN SHARE MODE")
        async with stream(gateway.url, session) as client:
            await client.request({"type": "PING"})  # answered once the socket is subscribed
            published = [await _log(bus, session, n) for n in range(1, _COUNT + 1)]
            await client.wait_for(lambda m: m["type"] == "TOOL_LOG", count=_COUNT)
        assert [m["id"] for m in client.received if m["type"] == "TOOL_LOG"] == published
        gateway.kill()
        await stall.rollback()
        stored = await admin.fetchval(
            "SELECT count(*) FROM gateway.session_events WHERE event_id = ANY($1::text[])",
            published,
        )
        assert stored == 0  # streamed, never stored: the instance died first
    finally:
        await admin.close()

    gateway.start()
    assert await _replay(gateway.url, session, first) == published
    async with stream(gateway.url, session, after=first) as again:
        await again.wait_for(lambda m: m["type"] == "TOOL_LOG", count=_COUNT)
    assert [m["id"] for m in again.received if m["type"] == "TOOL_LOG"] == published
    assert again.of_type("STREAM_GAP") == []
