"""The HITL watch: a consumer of ``notification-events`` and the timeout sweeper.

Both run for the service's lifetime (a lifespan hook). Several tracker
instances share the consumer group and claim timeouts with SKIP LOCKED, so
each timeout is published once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from disco.bus import BusConsumer
from disco_common.envelope import Envelope
from disco_common.topics import Topic
from disco_service import retry_while_unavailable
from disco_tracker.background import periodically
from disco_tracker.hitl.service import handle_notification, sweep_timeouts
from disco_tracker.state import TrackerState

__all__ = ["hitl_watch"]


@asynccontextmanager
async def hitl_watch(state: TrackerState) -> AsyncIterator[None]:
    """Consume questions and answers; publish timeouts; stop both on exit."""
    settings = state.settings
    database = state.require_database()
    # It trails the bus by the ingest's linger, as the ingest does: notification-events
    # carry every UI event of every stream, and a question listed a few tens of
    # milliseconds later is no later for a person (deadlines are swept by the second).
    consumer = BusConsumer(
        state.require_bus(),
        settings.hitl_consumer_group,
        fetch_wait_floor_ms=settings.ingest_linger_ms or None,
    )
    state.hitl = consumer

    @consumer.on(Topic.NOTIFICATION_EVENTS)
    @retry_while_unavailable  # a database outage pauses the watch; it dead-letters nothing
    async def on_notification(envelope: Envelope) -> None:
        await handle_notification(database, envelope)

    async def sweep() -> int:
        return await sweep_timeouts(database)

    state.start_alongside(consumer.start(), name=consumer.group)
    try:
        async with periodically(sweep, settings.hitl_sweep_interval_seconds, "hitl_sweep"):
            yield
    finally:
        await consumer.stop(grace=settings.shutdown_grace_seconds)
        state.hitl = None
