"""The event registry: who defines which event, on which topic, with which schema."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.pagination import Page
from disco_common.registry import EventListQuery, EventRecord
from disco_registry.events.repository import EventFilters, EventRepository
from disco_service import Paginator

__all__ = ["get_effective", "list_events"]


# Sort key: (event type, tenant, owner agent id).
_EVENT_PAGES = Paginator("events", tuple[str, str, str])


async def list_events(
    session: AsyncSession, *, tenant_id: str, query: EventListQuery
) -> Page[EventRecord]:
    """A page of the definitions visible to the tenant (its own and public agents').

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list and these filters.
    """
    request = _EVENT_PAGES.open(query)
    rows = await EventRepository(session).list(
        tenant_id=tenant_id,
        filters=EventFilters(
            topic=query.topic, owner_agent_id=query.owner_agent_id, event_type=query.event_type
        ),
        after=request.after,
        limit=request.fetch,
    )
    return request.page(
        rows, key=lambda event: (event.event_type, event.tenant_id, event.owner_agent_id)
    )


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
