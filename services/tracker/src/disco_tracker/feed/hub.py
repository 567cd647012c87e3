"""Waking feed streams: Postgres LISTEN/NOTIFY, with a poll as the safety net.

The ingest notifies ``disco_tracker_feed`` (payload: the tenant) in the
transaction that appends feed rows, so the notification arrives when they are
committed. One connection per app instance listens and wakes that tenant's
streams; a stream also looks on its own every ``feed_poll_seconds``, so a lost
notification (or a lost listening connection) delays a change, never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog

from disco_tracker.background import in_background
from disco_tracker.ingest.repository import FEED_CHANNEL

if TYPE_CHECKING:
    from disco_tracker.state import TrackerState

__all__ = ["FeedHub", "feed_listener"]

log = structlog.get_logger("disco_tracker.feed")

_RECONNECT_SECONDS = 5.0


class FeedHub:
    """Tickets that are punched when a tenant's feed changes."""

    def __init__(self, poll_seconds: float) -> None:
        self.poll_seconds = poll_seconds
        self._events: dict[str, asyncio.Event] = {}

    def ticket(self, tenant_id: str) -> asyncio.Event:
        """Take before reading the feed; :meth:`wait` on it after (no change is missed between)."""
        event = self._events.get(tenant_id)
        if event is None:
            event = self._events[tenant_id] = asyncio.Event()
        return event

    def changed(self, tenant_id: str) -> None:
        """Wake every stream of ``tenant_id`` holding a ticket."""
        event = self._events.pop(tenant_id, None)
        if event is not None:
            event.set()

    async def wait(self, ticket: asyncio.Event) -> None:
        """Until ``ticket`` is punched, or the poll interval passed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.poll_seconds):
                await ticket.wait()


def _setter(event: asyncio.Event) -> Any:
    def set_it(_connection: Any) -> None:
        event.set()

    return set_it


async def _listen(state: TrackerState) -> None:
    hub = state.feed

    def on_notify(_connection: Any, _pid: int, _channel: str, payload: str) -> None:
        hub.changed(payload)

    while True:
        try:
            database = state.require_database()
            async with database.engine.connect() as connection:
                raw = (await connection.get_raw_connection()).driver_connection
                assert raw is not None
                lost = asyncio.Event()
                raw.add_termination_listener(_setter(lost))
                await raw.add_listener(FEED_CHANNEL, on_notify)
                try:
                    await lost.wait()
                finally:
                    with contextlib.suppress(Exception):
                        await raw.remove_listener(FEED_CHANNEL, on_notify)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Streams poll meanwhile; try again shortly.
            log.warning("feed_listener_lost", error=repr(exc))
        await asyncio.sleep(_RECONNECT_SECONDS)


@asynccontextmanager
async def feed_listener(state: TrackerState) -> AsyncIterator[None]:
    """Lifespan hook: listen for feed notifications for the service's lifetime."""
    async with in_background(_listen(state), "tracker-feed-listener"):
        yield
