"""Plan context (``/v1/memory/plan-context``): a Planner's saved plan, found by correlation id."""

from __future__ import annotations

from pydantic import Field

from disco_common._base import Body
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    EXPECTED_VERSION,
    Versioned,
)
from disco_common.plans import PlanContextData

__all__ = [
    "PlanContextRecord",
    "PlanContextStore",
]


class PlanContextStore(Body):
    """Store a Planner's plan context (``PUT /v1/memory/plan-context/{plan_id}``).

    The service indexes ``context.correlation_ids`` so that the plan can be
    found by the correlation id of any answer it is waiting for.
    """

    context: PlanContextData = Field(description="The plan context, at most 4 MiB encoded.")
    expected_version: int | None = EXPECTED_VERSION


class PlanContextRecord(Versioned):
    """A stored plan context."""

    plan_id: Id
    session_id: Id | None = None
    correlation_ids: list[Id] = Field(
        default_factory=list, description="Indexed for by-correlation lookup."
    )
    context: PlanContextData
    created_at: UtcDatetime
    updated_at: UtcDatetime
