"""The session side of a gateway instance: made and started in the lifespan, stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import structlog

from disco_common.ids import utcnow
from disco_common.topics import Topic
from disco_gateway.sessions.hub import SessionHub
from disco_gateway.sessions.repository import purge
from disco_gateway.sessions.service import SessionService
from disco_gateway.state import GatewayState

__all__ = ["sessions_lifespan"]

_log = structlog.get_logger("disco_gateway.sessions")


@contextlib.asynccontextmanager
async def sessions_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Start the session hub (after the A2A side: it uses its directory and publisher)."""
    settings = state.settings
    a2a = state.require_a2a()
    database = state.require_database()
    hub = SessionHub(
        settings,
        database,
        max_payload_bytes=settings.stream_payload_max_bytes,
        metrics=state.stream_metrics,
        # The A2A fan-out follows notification-events through the hub's reader.
        feed=a2a.runtime.fanout.feed(Topic.NOTIFICATION_EVENTS.value),
    )
    await hub.start()
    state.hub = hub
    state.sessions = SessionService(
        database, state.require_bus(), a2a.directory, a2a.publisher, settled=hub.settled
    )
    sweeper = asyncio.create_task(_retention(state), name="disco-gateway-session-retention")
    try:
        yield
    finally:
        sweeper.cancel()
        state.sessions = None
        state.hub = None
        await hub.stop()


async def _retention(state: GatewayState) -> None:
    """Purge session events past their age or their session's count (every tenant's)."""
    settings = state.settings
    while True:
        await asyncio.sleep(settings.stream_retention_interval_seconds)
        cutoff = utcnow() - timedelta(seconds=settings.stream_retention_seconds)
        try:
            async with state.require_database().unit_of_work(None) as session:
                purged = await purge(
                    session, cutoff=cutoff, keep=settings.stream_max_events_per_session
                )
            if purged:
                _log.info("session_events_purged", count=purged)
        except Exception as exc:
            _log.warning("session_retention_failed", error=repr(exc))
