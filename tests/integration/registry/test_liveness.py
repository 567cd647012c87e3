"""TTL expiry by the background sweeper, liveness announcements on system-events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from disco_common.envelope import Envelope
from disco_common.topics import Topic, topic_name
from disco_registry import RegistrySettings
from disco_registry.liveness.service import sweep_once
from disco_service import Database
from tests.fixtures.bus import read_envelopes
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.waiting import eventually
from tests.integration.registry.support import (
    age_instances,
    bearer,
    new_tenant,
    register,
    registration,
    sql,
)


def of(envelopes: list[Envelope], event_type: str, agent_id: str) -> list[Envelope]:
    return [e for e in envelopes if e.type == event_type and e.subject == agent_id]


async def test_an_agent_not_heard_from_within_its_ttl_is_expired_and_announced(
    http: httpx.AsyncClient, kafka_bootstrap: str, topic_prefix: str
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant, registration(ttl_seconds=5))
    agent_id = record["agent_id"]

    # No heartbeat: after 5 s the sweeper (every 0.2 s here) expires it.
    envelopes = await read_envelopes(
        kafka_bootstrap,
        topic_name(Topic.SYSTEM_EVENTS, topic_prefix),
        lambda seen: bool(of(seen, "agent.expired", agent_id)),
        timeout=30,
    )

    expired = of(envelopes, "agent.expired", agent_id)[0]
    assert expired.tenant_id == tenant
    assert expired.data is not None
    assert expired.data["name"] == record["name"]
    assert of(envelopes, "agent.registered", agent_id)
    fetched = (await http.get(f"/v1/agents/{agent_id}", headers=bearer(tenant))).json()
    assert fetched["status"] == "expired"
    assert fetched["live_instances"] == 0


async def test_an_expired_agent_is_hidden_from_discovery_and_from_the_default_list(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)
    await age_instances(database.admin, tenant, record["agent_id"])

    discovered = await http.get(
        "/v1/discover", params={"capability": "add"}, headers=bearer(tenant)
    )
    listed = await http.get("/v1/agents", headers=bearer(tenant))
    with_expired = await http.get(
        "/v1/agents", params={"include_expired": "true"}, headers=bearer(tenant)
    )

    assert discovered.json() == []
    assert listed.json()["items"] == []
    assert [a["agent_id"] for a in with_expired.json()["items"]] == [record["agent_id"]]
    assert with_expired.json()["items"][0]["status"] == "expired"


async def test_a_heartbeat_after_expiry_revives_the_agent_and_announces_it_again(
    http: httpx.AsyncClient,
    database: DatabaseUrls,
    make_settings: Callable[..., RegistrySettings],
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    tenant = new_tenant()
    record = await register(http, tenant)
    agent_id = record["agent_id"]
    await age_instances(database.admin, tenant, agent_id)
    # Sweep now rather than wait for the app's sweeper (which may win the race:
    # either way the agent is expired exactly once).
    sweeper_db = Database(make_settings(), schema="registry")
    try:
        await sweep_once(sweeper_db, batch_size=100)
    finally:
        await sweeper_db.dispose()
    topic = topic_name(Topic.SYSTEM_EVENTS, topic_prefix)
    await read_envelopes(
        kafka_bootstrap, topic, lambda seen: bool(of(seen, "agent.expired", agent_id)), timeout=30
    )

    beat = await http.post(
        f"/v1/agents/{agent_id}/heartbeat",
        json={"instance_id": record["instance_id"]},
        headers=bearer(tenant),
    )

    assert beat.status_code == 200
    envelopes = await read_envelopes(
        kafka_bootstrap,
        topic,
        lambda seen: len(of(seen, "agent.registered", agent_id)) >= 2,
        timeout=30,
    )
    assert len({e.id for e in of(envelopes, "agent.expired", agent_id)}) == 1  # one expiry
    discovered = await http.get(
        "/v1/discover", params={"capability": "add"}, headers=bearer(tenant)
    )
    assert [a["agent_ids"] for a in discovered.json()] == [[agent_id]]


async def test_one_instance_expiring_leaves_the_agent_live_on_its_other_instance(
    http: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    tenant = new_tenant()
    body = registration(instance_id="host-a:1")
    await register(http, tenant, body)
    await register(http, tenant, {**body, "instance_id": "host-b:2"})
    await sql(
        database.admin,
        "UPDATE registry.agent_instances SET expires_at = now() - interval '1 hour' "
        "WHERE tenant_id = $1 AND instance_id = 'host-a:1'",
        tenant,
    )

    async def only_b_left() -> bool:
        rows = await sql(
            database.admin,
            "SELECT instance_id FROM registry.agent_instances WHERE tenant_id = $1",
            tenant,
        )
        return [row["instance_id"] for row in rows] == ["host-b:2"]

    await eventually(only_b_left, timeout=10, interval=0.1, what="host-a:1 swept")
    record = (await http.get(f"/v1/agents/{body['agent_id']}", headers=bearer(tenant))).json()
    assert record["status"] == "live"
    assert record["live_instances"] == 1


async def test_sweepers_running_side_by_side_expire_each_agent_exactly_once(
    http: httpx.AsyncClient,
    database: DatabaseUrls,
    make_settings: Callable[..., RegistrySettings],
    kafka_bootstrap: str,
    topic_prefix: str,
) -> None:
    tenant = new_tenant()
    agent_ids = {(await register(http, tenant))["agent_id"] for _ in range(30)}
    settings = make_settings()
    databases = [Database(settings, schema="registry") for _ in range(2)]
    try:
        await sql(
            database.admin,
            "UPDATE registry.agent_instances SET expires_at = now() - interval '1 hour' "
            "WHERE tenant_id = $1",
            tenant,
        )
        # Four sweepers in small batches, racing the app's own sweeper.
        await asyncio.gather(*(sweep_once(db, batch_size=7) for db in databases for _ in range(2)))
    finally:
        for db in databases:
            await db.dispose()

    def ours(envelopes: list[Envelope]) -> list[Envelope]:
        # The database is shared by the session: the app's sweeper also expires
        # (and announces here) agents other tests left behind.
        return [e for e in envelopes if e.type == "agent.expired" and e.tenant_id == tenant]

    envelopes = await read_envelopes(
        kafka_bootstrap,
        topic_name(Topic.SYSTEM_EVENTS, topic_prefix),
        lambda seen: {e.subject for e in ours(seen)} >= agent_ids,
        timeout=30,
    )
    # The bus is at-least-once: a publish retried after a lost ack repeats the
    # same envelope (same id), which consumers deduplicate. What must hold is one
    # expiry per agent: exactly one distinct agent.expired envelope each.
    expiries = {(e.subject, e.id) for e in ours(envelopes)}
    assert sorted(subject for subject, _ in expiries) == sorted(agent_ids)
