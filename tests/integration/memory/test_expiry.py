"""The TTL sweeper deletes expired rows of every tenant (through a SECURITY DEFINER function)."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from disco_memory import MemorySettings
from disco_memory.expiry import SweepMetrics, purge_expired
from disco_service import get_state
from tests.fixtures.infra import DatabaseUrls
from tests.fixtures.memory import SharedEmbedder, started_memory_app
from tests.fixtures.waiting import eventually
from tests.integration.memory.conftest import bearer, new_id


async def count_rows(database: DatabaseUrls, plan: str) -> int:
    conn = await asyncpg.connect(database.admin)
    try:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM memory.working_memory WHERE plan_id = $1", plan
            )
        )
    finally:
        await conn.close()


async def keys_left(database: DatabaseUrls, plan: str) -> list[str]:
    conn = await asyncpg.connect(database.admin)
    try:
        rows = await conn.fetch(
            "SELECT key FROM memory.working_memory WHERE plan_id = $1 ORDER BY key", plan
        )
        return [str(row["key"]) for row in rows]
    finally:
        await conn.close()


async def test_expired_keys_of_every_tenant_are_purged_and_live_ones_kept(
    memory_app: FastAPI, client: httpx.AsyncClient, database: DatabaseUrls
) -> None:
    plan = new_id("plan")
    tenants = [bearer(new_id("t")), bearer(new_id("t"))]
    for headers in tenants:
        await client.put(
            f"/v1/memory/working/{plan}/short", json={"value": 1, "ttl_seconds": 1}, headers=headers
        )
        await client.put(f"/v1/memory/working/{plan}/long", json={"value": 1}, headers=headers)

    async def expired() -> bool:
        answers = [
            await client.get(f"/v1/memory/working/{plan}/short", headers=headers)
            for headers in tenants
        ]
        return all(answer.status_code == 404 for answer in answers)

    await eventually(expired, timeout=10, interval=0.1, what="the short keys expired")

    # The app's own sweeper may purge them first: either way only the live keys remain.
    await purge_expired(get_state(memory_app).require_database())

    assert await keys_left(database, plan) == ["long", "long"]


async def test_the_sweeper_runs_in_the_background(
    memory_settings: Callable[..., MemorySettings],
    database: DatabaseUrls,
    embedder: SharedEmbedder,
) -> None:
    from tests.fixtures.memory import memory_client

    plan = new_id("plan")
    settings = memory_settings(ttl_sweep_interval_seconds=0.3)
    async with (
        started_memory_app(settings, embedder) as app,
        memory_client(app, new_id("t")) as memory,
    ):
        await memory.put_working(plan, "k", 1, ttl_seconds=1)
        stored = await count_rows(database, plan)

        async def purged() -> bool:
            return await count_rows(database, plan) == 0

        await eventually(purged, timeout=15, interval=0.2, what="the row purged")

    assert stored == 1


async def _insert_expired(database: DatabaseUrls, tenant: str, count: int) -> None:
    """Expired dedup marks and step records of ``tenant`` (and one live of each)."""
    conn = await asyncpg.connect(database.admin)
    try:
        for n in range(count + 1):
            seconds = -60 if n < count else 3600  # expired a minute ago; live for an hour
            await conn.execute(
                "INSERT INTO memory.dedup_marks (tenant_id, consumer_group, event_id, user_id, "
                "expires_at) VALUES ($1, 'g', $2, 'u', now() + make_interval(secs => $3))",
                tenant,
                f"e{n}",
                seconds,
            )
            await conn.execute(
                "INSERT INTO memory.step_records (tenant_id, consumer_group, envelope_id, name, "
                "user_id, result, expires_at) "
                "VALUES ($1, 'g', $2, 's', 'u', '1', now() + make_interval(secs => $3))",
                tenant,
                f"e{n}",
                seconds,
            )
    finally:
        await conn.close()


async def _left(database: DatabaseUrls, tenant: str) -> tuple[list[str], list[str]]:
    conn = await asyncpg.connect(database.admin)
    try:
        marks = await conn.fetch(
            "SELECT event_id FROM memory.dedup_marks WHERE tenant_id = $1 ORDER BY 1", tenant
        )
        steps = await conn.fetch(
            "SELECT envelope_id FROM memory.step_records WHERE tenant_id = $1 ORDER BY 1", tenant
        )
        return [r[0] for r in marks], [r[0] for r in steps]
    finally:
        await conn.close()


async def test_expired_dedup_marks_and_step_records_are_swept_in_bounded_batches_and_counted(
    memory_app: FastAPI, database: DatabaseUrls
) -> None:
    tenants = [new_id("t"), new_id("t")]
    for tenant in tenants:
        await _insert_expired(database, tenant, 3)
    registry = CollectorRegistry()
    metrics = SweepMetrics(registry)
    db = get_state(memory_app).require_database()

    bounded = await purge_expired(db, batch_size=2, max_batches=1, metrics=metrics)
    rest = await purge_expired(db, batch_size=2, metrics=metrics)

    # One batch deletes at most two rows of each table (of any tenant); the round after
    # goes on until none is left.
    assert bounded["dedup_marks"] == 2
    assert bounded["step_records"] == 2
    assert rest["dedup_marks"] >= 4
    assert rest["step_records"] >= 4
    for tenant in tenants:
        assert await _left(database, tenant) == (["e3"], ["e3"])  # the live ones stay
    swept = registry.get_sample_value("disco_memory_swept_rows_total", {"table": "dedup_marks"})
    assert swept == bounded["dedup_marks"] + rest["dedup_marks"]
