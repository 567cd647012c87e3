"""A task's sub-task book: what each delegation answered, and fan-in of parallel groups.

Pure functions on :class:`~disco_common.tasks.TaskContextData`, used by
:class:`~disco.agents.TaskContext` (which owns saving and the errors a handler sees).
"""

from __future__ import annotations

from typing import Any

from pydantic import JsonValue

from disco.agents._durable import as_error, utc_now
from disco.agents._handlers import to_json
from disco_common.tasks import (
    ErrorInfo,
    SubTaskInfo,
    SubTaskStatus,
    TaskContextData,
    TaskStatus,
)

__all__ = ["group_ids", "group_members", "group_results", "record_answer"]


def group_ids(data: TaskContextData) -> list[str]:
    """The fan-out group ids, in delegation order."""
    groups: dict[str, None] = {}
    for info in data.sub_tasks.values():
        if info.parallel_group_id is not None:
            groups[info.parallel_group_id] = None
    return list(groups)


def group_members(data: TaskContextData, parallel_group_id: str) -> list[SubTaskInfo]:
    """The sub-tasks of one fan-out group, in delegation order (empty: no such group)."""
    return [info for info in data.sub_tasks.values() if info.parallel_group_id == parallel_group_id]


def group_results(members: list[SubTaskInfo]) -> dict[str, JsonValue] | None:
    """The members' results by sub-task id once every one answered (a failed one: None)."""
    if any(info.status is SubTaskStatus.PENDING for info in members):
        return None
    return {
        info.sub_task_id: info.result if info.status is SubTaskStatus.COMPLETED else None
        for info in members
    }


def record_answer(
    data: TaskContextData,
    info: SubTaskInfo,
    result: Any,
    *,
    success: bool,
    error: ErrorInfo | BaseException | str | None,
) -> bool:
    """Record ``info``'s answer in ``data``; False when it had answered already."""
    if info.status is not SubTaskStatus.PENDING:
        return False
    # Answered: the request will never be re-sent, its payload need not be kept.
    info.request_data = None
    info.request_kept = False
    if success:
        info.status = SubTaskStatus.COMPLETED
        info.result = to_json(result)
    else:
        info.status = SubTaskStatus.FAILED
        info.result = to_json(result)
        info.error = as_error(error or "the sub-task failed", kind="TaskFailed")
    info.finished_at = utc_now()
    if data.human_input is not None and data.human_input.correlation_id == info.sub_task_id:
        data.human_input = None
    if data.status in (TaskStatus.WAITING, TaskStatus.AWAITING_INPUT) and not any(
        s.status is SubTaskStatus.PENDING for s in data.sub_tasks.values()
    ):
        data.status = TaskStatus.RUNNING
    return True
