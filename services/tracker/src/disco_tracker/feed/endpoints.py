"""``/v1/tracker/feed``: changes to plans and tasks as server-sent events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent

from disco_common.ids import Id
from disco_service import IdentityDep, error_responses
from disco_tracker.deps import StateDep
from disco_tracker.feed import service

__all__ = ["router"]

router = APIRouter(prefix="/v1/tracker", tags=["feed"], responses=error_responses(401, 403))

_RETRY_MS = 2000


async def feed_start(
    state: StateDep,
    identity: IdentityDep,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="Resume after this change (what a browser sends when it reconnects).",
        ),
    ] = None,
    after: Annotated[
        str | None,
        Query(description="Resume after this change id (for clients that cannot set headers)."),
    ] = None,
) -> int:
    """Where the stream starts (checked before the response begins, so errors are plain 4xx)."""
    return await service.start_position(
        state.require_database(), identity.tenant_id, last_event_id or after
    )


@router.get(
    "/feed",
    response_class=EventSourceResponse,
    responses=error_responses(400),
    summary="Follow changes to plans and tasks (server-sent events)",
)
async def feed(
    state: StateDep,
    identity: IdentityDep,
    start: Annotated[int, Depends(feed_start)],
    plan_id: Annotated[Id | None, Query(description="Only the changes of this plan.")] = None,
) -> AsyncIterator[ServerSentEvent]:
    """One event per change to a plan (``event: plan``) or a task (``event: task``) of the
    caller's tenant, each a ``FeedEvent`` with an increasing ``id``. Without
    ``Last-Event-ID`` the stream starts with the next change; with it, every change after
    that id is sent first (kept for ``feed_retention_hours``)."""
    first = True
    async for change in service.changes(
        state.require_database(), state.feed, identity.tenant_id, start, plan_id=plan_id
    ):
        yield ServerSentEvent(
            id=str(change.id),
            event=change.kind.value,
            data=change.model_dump(mode="json", exclude_none=True),
            retry=_RETRY_MS if first else None,
        )
        first = False
