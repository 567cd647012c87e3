"""``/v1/tracker/metrics``: what agents did and what passed on the bus, over a window."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from disco_common.pagination import Page
from disco_common.tracker import AgentMetrics, EventTypeMetrics, MetricsQuery
from disco_service import IdentityDep, SessionDep, error_responses
from disco_tracker.metrics import service
from disco_tracker.metrics.repository import MetricsRepository

__all__ = ["router"]

router = APIRouter(
    prefix="/v1/tracker/metrics", tags=["metrics"], responses=error_responses(401, 403)
)


@router.get("/agents", response_model=Page[AgentMetrics], responses=error_responses(400))
async def agents(
    query: Annotated[MetricsQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[AgentMetrics]:
    """Per agent, over the last ``window_seconds``: tasks ended, failed, timed out (HITL),
    unfinished, and the mean/p50/p95/p99 of how long they took."""
    return await service.agent_metrics(MetricsRepository(session, identity.tenant_id), query)


@router.get("/event-types", response_model=Page[EventTypeMetrics], responses=error_responses(400))
async def event_types(
    query: Annotated[MetricsQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[EventTypeMetrics]:
    """Per event type and topic, over the last ``window_seconds``: envelopes, errors, and
    for requests the mean/p50/p95/p99 time to their answer."""
    return await service.event_type_metrics(MetricsRepository(session, identity.tenant_id), query)
