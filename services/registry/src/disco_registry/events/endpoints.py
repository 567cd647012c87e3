"""``/v1/events``: the event registry (read-only; agents write it by registering)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from disco_common.ids import EventType
from disco_common.pagination import Page
from disco_common.registry import EventListQuery, EventRecord
from disco_registry.errors import EventNotFound
from disco_registry.events import service
from disco_service import IdentityDep, SessionDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/events", tags=["events"], responses=error_responses(401, 403))


@router.get(
    "",
    response_model=Page[EventRecord],
    responses=error_responses(400),
    summary="List event definitions",
)
async def list_events(
    query: Annotated[EventListQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[EventRecord]:
    """Definitions visible to the caller (its tenant's and public agents'), by topic,
    owner or type; one per owning agent."""
    return await service.list_events(session, tenant_id=identity.tenant_id, query=query)


@router.get(
    "/{event_type:path}",
    response_model=EventRecord,
    responses=error_responses(404),
    summary="The definition of an event type that counts",
)
async def get_event(
    event_type: Annotated[EventType, Path(description="The event type, e.g. `calc.requested`.")],
    session: SessionDep,
    identity: IdentityDep,
) -> EventRecord:
    """The definition publishers validate against: the caller's tenant's before a public
    one, a live owner's before others, one with a schema before one without, newest first.
    ``json_schema`` is always resolved inline (``schema_ref`` says where it came from)."""
    found = await service.get_effective(
        session, tenant_id=identity.tenant_id, event_type=event_type
    )
    if found is None:
        raise EventNotFound(f"no agent visible to you defines the event type {event_type!r}")
    return found
