"""``/v1/tracker/tasks`` and ``/v1/tracker/delegations``: tasks and fan-out groups."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from disco_common.ids import Id
from disco_common.tracker import DelegationGroupProgress, TaskView
from disco_service import IdentityDep, SessionDep, error_responses
from disco_tracker.deps import TaskIdPath
from disco_tracker.errors import DelegationNotFound, TaskNotFound
from disco_tracker.hitl.repository import HitlRepository
from disco_tracker.tasks import service
from disco_tracker.tasks.repository import TaskRepository

__all__ = ["router"]

router = APIRouter(prefix="/v1/tracker", tags=["tasks"], responses=error_responses(401, 403))


@router.get("/tasks/{task_id}", response_model=TaskView, responses=error_responses(404))
async def get_task(task_id: TaskIdPath, session: SessionDep, identity: IdentityDep) -> TaskView:
    """Where a task stands (agent, status, attempt, times, duration, error), its questions to
    humans (waiting, answered, timed out) and what it delegated."""
    view = await service.get_task_view(
        TaskRepository(session, identity.tenant_id), HitlRepository(session), task_id
    )
    if view is None:
        raise TaskNotFound(f"no task {task_id!r} is known to the tracker")
    return view


@router.get(
    "/delegations/{group_id}",
    response_model=DelegationGroupProgress,
    responses=error_responses(404),
)
async def get_delegation(
    group_id: Annotated[Id, Path(description="The fan-out group's id.")],
    session: SessionDep,
    identity: IdentityDep,
) -> DelegationGroupProgress:
    """A fan-out group: how many of its sub-tasks completed, failed or are pending, and each."""
    group = await service.get_delegation(TaskRepository(session, identity.tenant_id), group_id)
    if group is None:
        raise DelegationNotFound(f"no fan-out group {group_id!r} is known to the tracker")
    return group
