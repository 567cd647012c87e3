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
from typing import Protocol

import structlog

from disco_service import Database, listening
from disco_tracker.ingest.repository import FEED_CHANNEL

__all__ = ["FeedHub", "FeedState", "feed_listener"]

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


class FeedState(Protocol):
    """What :func:`feed_listener` uses of the running service
    (:class:`~disco_tracker.state.TrackerState` satisfies it)."""

    @property
    def feed(self) -> FeedHub:
        """The hub whose streams a notification wakes."""
        ...

    def require_database(self) -> Database:
        """The database to listen on."""
        ...


@asynccontextmanager
async def feed_listener(state: FeedState) -> AsyncIterator[None]:
    """Lifespan hook: listen for feed notifications for the service's lifetime."""
    # Streams poll meanwhile when the connection is lost (a lost notification
    # delays a change, never loses it).
    async with listening(
        state.require_database(),
        FEED_CHANNEL,
        state.feed.changed,
        reconnect_seconds=_RECONNECT_SECONDS,
    ):
        yield
