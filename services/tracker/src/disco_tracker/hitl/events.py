"""What the tracker publishes when a question to a human times out."""

from __future__ import annotations

from typing import Any

from sqlalchemy import RowMapping

from disco_common.envelope import Envelope, Notification, SystemEvent
from disco_common.notifications import HumanInputResponse
from disco_common.system_events import SystemEventType, TaskTimeoutData

__all__ = ["SOURCE", "task_timeout", "timeout_answer"]

SOURCE = "disco://service/tracker"


def _scope(row: RowMapping) -> dict[str, Any]:
    return {
        "tenant_id": row["tenant_id"],
        "user_id": row["user_id"],
        "session_id": row["session_id"],
        "plan_id": row["plan_id"],
        "task_id": row["task_id"],
        "correlation_id": row["correlation_id"],
        "causation_id": row["request_id"],
    }


def timeout_answer(row: RowMapping) -> Envelope:
    """The ``response_event`` saying nobody answered (on ``notification-events``)."""
    data = HumanInputResponse(
        answer=None,
        timed_out=True,
        request_id=row["request_id"],
        task_id=row["task_id"],
        plan_id=row["plan_id"],
        answered_at=row["timed_out_at"],
    )
    return Notification(
        source=SOURCE,
        type=row["response_event"],
        data=data.model_dump(mode="json", exclude_none=True),
        **_scope(row),
    )


def task_timeout(row: RowMapping) -> Envelope | None:
    """``task.timeout`` on ``system-events``, for a task's question (None for a plan's)."""
    if row["task_id"] is None:
        return None
    data = TaskTimeoutData(
        task_id=row["task_id"],
        plan_id=row["plan_id"],
        request_id=row["request_id"],
        correlation_id=row["correlation_id"],
        response_event=row["response_event"],
        timeout_seconds=row["timeout_seconds"],
        deadline=row["deadline"],
    )
    return SystemEvent(
        source=SOURCE,
        type=SystemEventType.TASK_TIMEOUT,
        data=data.model_dump(mode="json", exclude_none=True),
        **_scope(row),
    )
