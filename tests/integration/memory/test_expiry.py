"""The TTL sweeper deletes expired rows of every tenant (through a SECURITY DEFINER function)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
import httpx
from fastapi import FastAPI

from disco_memory import MemorySettings
from disco_memory.expiry import purge_expired
from disco_service import get_state
from tests.fixtures.infra import DatabaseUrls
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
    for tenant in (new_id("t"), new_id("t")):
        headers = bearer(tenant)
        await client.put(
            f"/v1/memory/working/{plan}/short", json={"value": 1, "ttl_seconds": 1}, headers=headers
        )
        await client.put(f"/v1/memory/working/{plan}/long", json={"value": 1}, headers=headers)
    await asyncio.sleep(1.2)

    # The app's own sweeper may purge them first: either way only the live keys remain.
    await purge_expired(get_state(memory_app).require_database())

    assert await keys_left(database, plan) == ["long", "long"]


async def test_the_sweeper_runs_in_the_background(
    memory_settings: Callable[..., MemorySettings], database: DatabaseUrls
) -> None:
    from disco_memory import create_app
    from tests.integration.memory.conftest import serve

    plan = new_id("plan")
    app = create_app(memory_settings(ttl_sweep_interval_seconds=0.3))
    async with serve(app) as client:
        await client.put(
            f"/v1/memory/working/{plan}/k",
            json={"value": 1, "ttl_seconds": 1},
            headers=bearer(new_id("t")),
        )
        async with asyncio.timeout(15):
            while await count_rows(database, plan):
                await asyncio.sleep(0.2)

    assert await count_rows(database, plan) == 0
