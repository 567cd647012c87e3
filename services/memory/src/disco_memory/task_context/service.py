"""Task context: save, restore (by task or sub-task id), list by plan, delete."""

from __future__ import annotations

from datetime import timedelta

from disco_common.ids import UtcDatetime, utcnow
from disco_common.memory import CONTEXT_MAX_BYTES, TaskContextRecord, TaskContextStore
from disco_common.pagination import Page
from disco_memory._shared import limited_model_json, stored_record
from disco_memory.task_context.repository import TaskContextListing, TaskContextRepository
from disco_memory.task_context.schemas import TaskContextListQuery
from disco_service import Conflict, Paginator, UnprocessableEntity

__all__ = [
    "SubTaskClaimed",
    "delete_context",
    "find_by_sub_task",
    "get_context",
    "list_for_plan",
    "store_context",
]


class SubTaskClaimed(Conflict):
    """409: a sub-task id of this context already belongs to another live task."""

    code = "sub_task_claimed"


_CONTEXT_PAGES = Paginator("task_contexts", tuple[UtcDatetime, str])


def _record(record_json: str) -> TaskContextRecord:
    return TaskContextRecord.model_validate_json(record_json)


async def store_context(
    repository: TaskContextRepository,
    task_id: str,
    body: TaskContextStore,
    *,
    expected: int | None,
) -> TaskContextRecord:
    """Save a task context and make it findable by each of its sub-task ids, atomically.

    Also findable by the correlation id of its outstanding question to a human
    (``context.human_input``), so the answer restores the task the same way.

    Raises:
        UnprocessableEntity: ``context.task_id`` is not ``task_id``.
        PayloadTooLarge: the context is over 4 MiB encoded.
        SubTaskClaimed: another live task already waits for one of the ids.
        VersionConflict: ``expected`` is not the stored version.
    """
    context = body.context
    if context.task_id != task_id:
        raise UnprocessableEntity(
            f"context.task_id is {context.task_id!r} but the URL names task {task_id!r}; "
            "they must be the same"
        )
    context_json = limited_model_json(context, limit=CONTEXT_MAX_BYTES, what="the task context")
    ref_ids = list(context.sub_task_ids)
    if context.human_input is not None and context.human_input.correlation_id not in ref_ids:
        ref_ids.append(context.human_input.correlation_id)
    expires_at = (
        utcnow() + timedelta(seconds=body.ttl_seconds) if body.ttl_seconds is not None else None
    )
    stored = await repository.store(
        task_id,
        plan_id=context.plan_id,
        sub_task_ids=context.sub_task_ids,
        ref_ids=ref_ids,
        context_json=context_json,
        expires_at=expires_at,
        expected=expected,
    )
    return _record(
        stored_record(
            stored,
            what=f"task context {task_id!r}",
            expected=expected,
            claimed=SubTaskClaimed,
            ids="sub-task ids",
            owner="task",
        )
    )


async def get_context(repository: TaskContextRepository, task_id: str) -> TaskContextRecord | None:
    """The live context of ``task_id``, or None."""
    record = await repository.get(task_id)
    return _record(record) if record is not None else None


async def find_by_sub_task(
    repository: TaskContextRepository, sub_task_id: str
) -> TaskContextRecord | None:
    """The live context of the task waiting for ``sub_task_id``, or None."""
    record = await repository.by_ref(sub_task_id)
    return _record(record) if record is not None else None


async def delete_context(repository: TaskContextRepository, task_id: str) -> bool:
    """Delete a task's context; whether it was there."""
    return await repository.delete(task_id)


async def list_for_plan(
    listing: TaskContextListing, query: TaskContextListQuery
) -> Page[TaskContextRecord]:
    """One page of a plan's live task contexts, oldest first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this plan's list.
    """
    request = _CONTEXT_PAGES.open(query)
    rows = await listing.list_by_plan(query.plan_id, after=request.after, limit=request.fetch)
    items = [TaskContextRecord.model_validate(dict(row)) for row in rows]
    return request.page(items, key=lambda context: (context.created_at, context.task_id))
