"""The session side of a gateway instance: made and started in the lifespan, stopped with it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta

import structlog

from disco_common.ids import utcnow
from disco_common.topics import Topic, topic_name
from disco_gateway.sessions.hub import SessionHub
from disco_gateway.sessions.repository import forget_positions, purge
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
        database,
        state.require_bus(),
        a2a.directory,
        a2a.publisher,
        state.call_limits,
        settled=hub.settled,
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
    """Every ``stream_retention_interval_seconds``: :func:`sweep_sessions`."""
    while True:
        await asyncio.sleep(state.settings.stream_retention_interval_seconds)
        try:
            await sweep_sessions(state)
        except Exception as exc:
            _log.warning("session_retention_failed", error=repr(exc))


async def sweep_sessions(state: GatewayState) -> tuple[int, int]:
    """Purge session events past their age or their session's count (every tenant's),
    and forget the stream positions of other environments' topics that have been idle
    as long; the numbers of events purged and positions forgotten."""
    settings = state.settings
    cutoff = utcnow() - timedelta(seconds=settings.stream_retention_seconds)
    ours = [topic_name(Topic.NOTIFICATION_EVENTS.value, settings.topic_prefix)]
    async with state.require_database().unit_of_work(None) as session:
        purged = await purge(session, cutoff=cutoff, keep=settings.stream_max_events_per_session)
        forgotten = await forget_positions(session, keep=ours, cutoff=cutoff)
    if purged:
        _log.info("session_events_purged", count=purged)
    if forgotten:
        _log.info("session_stream_positions_forgotten", count=forgotten)
    return purged, forgotten
