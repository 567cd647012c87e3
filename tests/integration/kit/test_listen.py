"""``disco_service.listening``: NOTIFY payloads reach the callback, and a lost connection
is said (``on_lost``) and made again (``on_listening``), on a real Postgres."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import asyncpg

from disco_service import Database, ServiceSettings, listening
from tests.fixtures.infra import DatabaseUrls


class Heard:
    """What the listener called back with, each kind awaitable."""

    def __init__(self) -> None:
        self.payloads: asyncio.Queue[str] = asyncio.Queue()
        self.events: list[str] = []
        self.changed = asyncio.Event()

    def notify(self, payload: str) -> None:
        self.payloads.put_nowait(payload)

    def listening(self) -> None:
        self._note("listening")

    def lost(self) -> None:
        self._note("lost")

    def _note(self, event: str) -> None:
        self.events.append(event)
        self.changed.set()

    async def until(self, count: int) -> list[str]:
        async with asyncio.timeout(15):
            while len(self.events) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.events


async def notify(url: str, channel: str, payload: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SELECT pg_notify($1, $2)", channel, payload)
    finally:
        await conn.close()


async def test_payloads_arrive_and_a_lost_connection_is_said_and_made_again(
    make_settings: Callable[..., ServiceSettings], database: DatabaseUrls
) -> None:
    channel = f"kit_{uuid.uuid4().hex[:8]}"
    heard = Heard()
    db = Database(make_settings(), schema="kit")
    try:
        async with listening(
            db,
            channel,
            heard.notify,
            on_listening=heard.listening,
            on_lost=heard.lost,
            reconnect_seconds=0.1,
        ):
            assert await heard.until(1) == ["listening"]
            await notify(database.app, channel, "tenant-a")
            assert await asyncio.wait_for(heard.payloads.get(), 15) == "tenant-a"

            # The listening backend ends (a restart, an operator): lost, then back.
            killer = await asyncpg.connect(database.admin)
            try:
                ended = await killer.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE query = $1",
                    f'LISTEN "{channel}"',
                )
            finally:
                await killer.close()
            assert ended == 1
            assert await heard.until(3) == ["listening", "lost", "listening"]

            await notify(database.app, channel, "*")
            assert await asyncio.wait_for(heard.payloads.get(), 15) == "*"
        assert heard.events[-1] == "lost"  # leaving the block stops listening
    finally:
        await db.dispose()


async def test_listening_takes_no_connection_from_the_service_pool(
    make_settings: Callable[..., ServiceSettings], database: DatabaseUrls
) -> None:
    channel = f"kit_{uuid.uuid4().hex[:8]}"
    heard = Heard()
    # A pool of one connection, no overflow, a short wait for it.
    db = Database(
        make_settings(
            database_pool_size=1, database_max_overflow=0, database_pool_timeout_seconds=1
        ),
        schema="kit",
    )
    try:
        async with listening(db, channel, heard.notify, on_listening=heard.listening):
            assert await heard.until(1) == ["listening"]
            async with db.engine.connect() as connection:  # the pool's one connection
                assert (await connection.exec_driver_sql("SELECT 1")).scalar_one() == 1
            await notify(database.app, channel, "tenant-a")
            assert await asyncio.wait_for(heard.payloads.get(), 15) == "tenant-a"
    finally:
        await db.dispose()
