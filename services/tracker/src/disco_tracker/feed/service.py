"""The live feed: changes to plans and tasks, from a position on, as they are committed.

Every read is its own short transaction (a stream may last hours; it must not
hold a transaction or a pooled connection while it waits).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from disco_common.tracker import FeedEvent
from disco_service import Database
from disco_tracker.errors import InvalidLastEventId
from disco_tracker.feed.hub import FeedHub
from disco_tracker.feed.repository import FeedRepository

__all__ = ["FEED_PAGE", "changes", "start_position"]

FEED_PAGE = 500
"""Changes read per query."""


async def start_position(database: Database, tenant_id: str, position: str | None) -> int:
    """Where a stream starts: after ``position`` (a ``Last-Event-ID``), else at the latest change.

    Raises:
        InvalidLastEventId: ``position`` is not a feed id.
    """
    if position is not None:
        text = position.strip()
        if not text.isdigit() or len(text) > 19:
            raise InvalidLastEventId(
                f"Last-Event-ID {position!r} is not a feed id: send back the `id` of the last "
                "event received, or omit it to start with the next change",
                details={"last_event_id": position},
            )
        return int(text)
    async with database.unit_of_work(tenant_id) as session:
        return await FeedRepository(session, tenant_id).head()


async def changes(
    database: Database, hub: FeedHub, tenant_id: str, after: int, *, plan_id: str | None = None
) -> AsyncIterator[FeedEvent]:
    """Every change after ``after``, then each new one as it is committed, forever."""
    position = after
    while True:
        ticket = hub.ticket(tenant_id)
        async with database.unit_of_work(tenant_id) as session:
            rows = await FeedRepository(session, tenant_id).after(
                position, plan_id=plan_id, limit=FEED_PAGE
            )
        for row in rows:
            event = FeedEvent.model_validate(dict(row))
            position = event.id
            yield event
        if len(rows) < FEED_PAGE:
            await hub.wait(ticket)
