"""The HITL watch: a consumer of ``notification-events`` and the timeout sweeper.

Both run for the service's lifetime (a lifespan hook). Several tracker
instances share the consumer group and claim timeouts with SKIP LOCKED, so
each timeout is published once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog

from disco.bus import BusConsumer
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from disco_service import Database
from disco_tracker.hitl.service import handle_notification, sweep_timeouts
from disco_tracker.state import TrackerState

__all__ = ["hitl_watch"]

log = structlog.get_logger("disco_tracker.hitl")


async def _sweep_forever(database: Database, interval_seconds: float) -> None:
    while True:
        try:
            await sweep_timeouts(database)
        except Exception:
            # A database hiccup must not end the sweeper; the next round retries.
            log.exception("hitl_sweep_failed")
        await asyncio.sleep(interval_seconds)


@asynccontextmanager
async def hitl_watch(state: TrackerState) -> AsyncIterator[None]:
    """Consume questions and answers; publish timeouts; stop both on exit."""
    settings = state.settings
    database = state.require_database()
    consumer = BusConsumer(state.require_bus(), settings.hitl_consumer_group)

    @consumer.on(Topic.NOTIFICATION_EVENTS)
    async def on_notification(envelope: Envelope) -> None:
        await handle_notification(database, envelope)

    await consumer.start()
    sweeper = asyncio.create_task(
        _sweep_forever(database, settings.hitl_sweep_interval_seconds), name="hitl-sweeper"
    )
    try:
        yield
    finally:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
        await consumer.stop(grace=settings.shutdown_grace_seconds)
