"""Task context (``/v1/memory/task-context``): a Worker's saved task, found by sub-task id."""

from __future__ import annotations

from pydantic import Field

from disco_common._base import Body
from disco_common.ids import Id, UtcDatetime
from disco_common.memory._shared import (
    EXPECTED_VERSION,
    TtlSeconds,
    Versioned,
)
from disco_common.tasks import TaskContextData

__all__ = [
    "TaskContextRecord",
    "TaskContextStore",
]


class TaskContextStore(Body):
    """Store a Worker's task context (``PUT /v1/memory/task-context/{task_id}``).

    The service indexes ``context.sub_tasks`` so that the task can be found by
    any of its sub-task ids.
    """

    context: TaskContextData = Field(description="The task context, at most 4 MiB encoded.")
    ttl_seconds: TtlSeconds | None = Field(
        default=None, description="Forget the context this long after the write."
    )
    expected_version: int | None = EXPECTED_VERSION


class TaskContextRecord(Versioned):
    """A stored task context."""

    task_id: Id
    plan_id: Id | None = None
    sub_task_ids: list[Id] = Field(
        default_factory=list, description="Indexed for by-subtask lookup."
    )
    context: TaskContextData
    expires_at: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
