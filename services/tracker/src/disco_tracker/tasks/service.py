"""Tasks, their questions to humans, what they delegated, and fan-out groups."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import RowMapping

from disco_common.ids import UtcDatetime
from disco_common.pagination import Page
from disco_common.tasks import SubTaskStatus, TaskStatus
from disco_common.tracker import (
    DelegationGroupProgress,
    HumanInputWaitRecord,
    SubTaskProgress,
    TaskProgress,
    TaskProgressQuery,
    TaskView,
)
from disco_service import Paginator
from disco_tracker.hitl.repository import HitlRepository
from disco_tracker.tasks.repository import TaskRepository

__all__ = [
    "SUB_TASKS_SHOWN",
    "get_delegation",
    "get_task_view",
    "list_plan_tasks",
    "sub_task",
    "task_progress",
]

SUB_TASKS_SHOWN = 500
"""The most sub-tasks a task view lists."""
_WAITS_SHOWN = 100

# Sort key: (first_seen_at, task_id), in the order tasks were first seen.
_PLAN_TASK_PAGES = Paginator("plan_tasks", tuple[UtcDatetime, str])

_SUB_STATUS = {
    TaskStatus.COMPLETED.value: SubTaskStatus.COMPLETED,
    TaskStatus.FAILED.value: SubTaskStatus.FAILED,
}


def task_progress(row: RowMapping) -> TaskProgress:
    """A task row as :class:`TaskProgress`."""
    return TaskProgress.model_validate(dict(row))


def sub_task(row: RowMapping) -> SubTaskProgress:
    """A task row as one sub-task of its parent."""
    return SubTaskProgress(
        sub_task_id=row["task_id"],
        event_type=row["event_type"],
        response_event=row["response_event"],
        status=_SUB_STATUS.get(row["status"], SubTaskStatus.PENDING),
        agent_name=row["agent_name"],
        completed_at=row["completed_at"],
        duration_ms=row["duration_ms"],
    )


async def get_task_view(
    repository: TaskRepository, hitl: HitlRepository, task_id: str
) -> TaskView | None:
    """A task with its questions to humans and what it delegated (None if unknown)."""
    row = await repository.get(task_id)
    if row is None:
        return None
    waits = await hitl.list(
        status=None, task_id=task_id, plan_id=None, after=None, limit=_WAITS_SHOWN
    )
    children = await repository.children(task_id, SUB_TASKS_SHOWN)
    return TaskView(
        task=task_progress(row),
        waits=[HumanInputWaitRecord.model_validate(dict(wait)) for wait in waits],
        sub_tasks=[sub_task(child) for child in children],
        delegations=await repository.group_ids(task_id),
    )


def _group_progress(group: RowMapping, members: Sequence[RowMapping]) -> DelegationGroupProgress:
    subs = [sub_task(member) for member in members]
    completed = sum(1 for s in subs if s.status is SubTaskStatus.COMPLETED)
    failed = sum(1 for s in subs if s.status is SubTaskStatus.FAILED)
    total = max(group["expected"], len(subs))
    ended = [s.completed_at for s in subs if s.completed_at is not None]
    done = completed + failed == total and len(ended) == total
    return DelegationGroupProgress(
        parallel_group_id=group["group_id"],
        task_id=group["task_id"],
        plan_id=group["plan_id"],
        agent_name=group["agent_name"],
        total=total,
        completed=completed,
        failed=failed,
        pending=total - completed - failed,
        sub_tasks=subs,
        created_at=group["created_at"],
        completed_at=max(ended) if done and ended else None,
    )


async def get_delegation(
    repository: TaskRepository, group_id: str
) -> DelegationGroupProgress | None:
    """A fan-out group and how many of its sub-tasks came back (None if unknown)."""
    group = await repository.group(group_id)
    if group is None:
        return None
    members = await repository.members(group["task_id"], group_id)
    return _group_progress(group, members)


async def list_plan_tasks(
    repository: TaskRepository, plan_id: str, query: TaskProgressQuery
) -> Page[TaskProgress]:
    """One page of a plan's tasks, in the order they were first seen.

    Raises:
        InvalidCursor: the cursor was not issued for this plan's list with these filters.
    """
    request = _PLAN_TASK_PAGES.open(query, scope=plan_id)
    rows = await repository.of_plan(
        plan_id,
        status=query.status.value if query.status is not None else None,
        agent_name=query.agent_name,
        after=request.after,
        limit=request.fetch,
    )
    return request.page(rows, key=TaskRepository.key, item=task_progress)
