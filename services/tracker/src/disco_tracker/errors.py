"""The tracker's domain errors: kit error classes with stable, specific codes."""

from __future__ import annotations

from disco_service import BadRequest, Conflict, NotFound

__all__ = [
    "DelegationNotFound",
    "InvalidLastEventId",
    "PlanNotFound",
    "PlanTypeNotFound",
    "PlanTypeVersionConflict",
    "TaskNotFound",
]


class PlanNotFound(NotFound):
    """No plan with that id is known in the caller's tenant."""

    code = "plan_not_found"


class TaskNotFound(NotFound):
    """No task with that id is known in the caller's tenant."""

    code = "task_not_found"


class DelegationNotFound(NotFound):
    """No fan-out group with that id is known in the caller's tenant."""

    code = "delegation_not_found"


class PlanTypeNotFound(NotFound):
    """No plan type (version) with that name is registered in the caller's tenant."""

    code = "plan_type_not_found"


class PlanTypeVersionConflict(Conflict):
    """A plan type version exists with another definition (versions are immutable)."""

    code = "plan_type_version_conflict"


class InvalidLastEventId(BadRequest):
    """A feed position that is not one the feed issued."""

    code = "invalid_last_event_id"
