"""``disco_service.on_driver`` on a real Postgres: connections go back to the pool, and
an overflow connection is closed as the pool closes it (not left open)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import asyncpg
import pytest

from disco_service import Database, ServiceSettings, on_driver
from tests.fixtures.waiting import eventually

_STATEMENT = "SELECT pg_backend_pid()"
_ALIVE = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])"


async def test_an_overflow_connection_handed_back_is_closed_without_an_error(
    make_settings: Callable[..., ServiceSettings], caplog: pytest.LogCaptureFixture
) -> None:
    db = Database(make_settings(database_pool_size=1, database_max_overflow=1), schema="kit")
    both_in = asyncio.Event()
    inside = 0

    async def backend(driver: asyncpg.Connection) -> int:
        nonlocal inside
        inside += 1
        if inside == 2:
            both_in.set()
        await both_in.wait()  # both connections are out: one is the overflow
        pid: int = await driver.fetchval(_STATEMENT)
        return pid

    try:
        with caplog.at_level(logging.ERROR):
            pids = await asyncio.gather(
                on_driver(db.engine, _STATEMENT, backend), on_driver(db.engine, _STATEMENT, backend)
            )
        pool = db.engine.sync_engine.pool
        assert len(set(pids)) == 2
        assert pool.checkedout() == 0
        assert pool.checkedin() == 1  # the other was closed, not kept
        assert not [r for r in caplog.records if "closing connection" in r.getMessage()]

        async def one_left() -> bool:
            alive = await on_driver(db.engine, _ALIVE, lambda driver: driver.fetchval(_ALIVE, pids))
            return bool(alive == 1)

        # The closed one leaves the server too (its backend exits just after).
        await eventually(one_left, timeout=10, what="the overflow connection's backend gone")
    finally:
        await db.dispose()
