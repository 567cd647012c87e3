"""The TTL sweeper deletes expired rows of every tenant (through a SECURITY DEFINER function)."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import httpx
from fastapi import FastAPI

from disco_memory import MemorySettings
from disco_memory.expiry import purge_expired
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
