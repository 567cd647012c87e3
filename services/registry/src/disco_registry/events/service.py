"""The event registry: who defines which event, on which topic, with which schema."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.pagination import Page
from disco_common.registry import EventListQuery, EventRecord
from disco_registry.errors import InvalidCursor
from disco_registry.events.repository import EventFilters, EventRepository
from disco_registry.pagination import CursorPosition, read_cursor, write_cursor

__all__ = ["get_effective", "list_events"]


class _EventCursor(CursorPosition):
    event_type: str
    tenant_id: str
    owner_agent_id: str
    filters: list[str | None]


def _filter_key(query: EventListQuery) -> list[str | None]:
    return [query.topic, query.owner_agent_id, query.event_type]


async def list_events(
    session: AsyncSession, *, tenant_id: str, query: EventListQuery
) -> Page[EventRecord]:
    """A page of the definitions visible to the tenant (its own and public agents').

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list and these filters.
    """
    position = read_cursor(query.cursor, _EventCursor, "events")
    if position is not None and position.filters != _filter_key(query):
        raise InvalidCursor("invalid cursor: it was issued for other filters")
    rows = await EventRepository(session).list(
        tenant_id=tenant_id,
        filters=EventFilters(
            topic=query.topic, owner_agent_id=query.owner_agent_id, event_type=query.event_type
        ),
        after=(position.event_type, position.tenant_id, position.owner_agent_id)
        if position
        else None,
        limit=query.limit + 1,
    )
    next_cursor = None
    if len(rows) > query.limit:
        last = rows[query.limit - 1]
        next_cursor = write_cursor(
            _EventCursor(
                kind="events",
                event_type=last.event_type,
                tenant_id=last.tenant_id,
                owner_agent_id=last.owner_agent_id,
                filters=_filter_key(query),
            )
        )
    return Page[EventRecord](items=rows[: query.limit], next_cursor=next_cursor)


async def get_effective(
    session: AsyncSession, *, tenant_id: str, event_type: str
) -> EventRecord | None:
    """The definition of ``event_type`` that counts for the tenant, or None.

    Several agents may define one event type. The one that counts: the
    tenant's own before a public one, then one whose owner is live, then one
    that gives a schema, then the most recently updated. Its ``json_schema`` is
    resolved (inline even when registered by reference), so a publisher can
    validate a payload against it directly.
    """
    return await EventRepository(session).effective(tenant_id=tenant_id, event_type=event_type)
