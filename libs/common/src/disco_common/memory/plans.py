"""Plan records (``/v1/memory/plans``): a plan's goal, status and lineage."""

from __future__ import annotations

from pydantic import Field, JsonValue

from disco_common._base import Body
from disco_common.ids import EventType, Id, UtcDatetime
from disco_common.memory._shared import (
    EXPECTED_VERSION,
    Versioned,
)
from disco_common.pagination import PageQuery
from disco_common.plans import PlanStatus

__all__ = [
    "PlanCreate",
    "PlanListQuery",
    "PlanRecord",
    "PlanStatusUpdate",
]


class PlanCreate(Body):
    """Create a plan record (``POST /v1/memory/plans``)."""

    plan_id: Id | None = Field(default=None, description="Choose the id (generated if absent).")
    goal_event: EventType = Field(description="The goal request's event type.")
    goal_data: dict[str, JsonValue] = Field(default_factory=dict, description="The goal's data.")
    response_event: EventType = Field(description="The event type the result goes out as.")
    plan_type: EventType | None = Field(default=None, description="The plan type, if registered.")
    session_id: Id | None = Field(default=None, description="The session it belongs to.")
    parent_plan_id: Id | None = Field(default=None, description="The plan it is a sub-plan of.")
    status: PlanStatus = Field(default=PlanStatus.PENDING)


class PlanRecord(Versioned):
    """A plan record."""

    plan_id: Id
    goal_event: EventType
    goal_data: dict[str, JsonValue] = Field(default_factory=dict)
    response_event: EventType
    plan_type: EventType | None = None
    status: PlanStatus
    status_reason: str | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
    user_id: Id
    created_at: UtcDatetime
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = Field(default=None, description="Set on completed/failed.")


class PlanStatusUpdate(Body):
    """Change a plan's status (``PATCH /v1/memory/plans/{plan_id}``)."""

    status: PlanStatus
    reason: str | None = Field(default=None, max_length=1000, description="Why (pause, failure).")
    expected_version: int | None = EXPECTED_VERSION


class PlanListQuery(PageQuery):
    """Filters for listing plans (newest first)."""

    status: PlanStatus | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
