"""Cancelling a Worker's task on request (``task.cancel_requested`` on ``system-events``).

Whoever wants a task stopped (the gateway, for an A2A caller's ``CancelTask``;
a plan) publishes :class:`~disco_common.system_events.TaskCancelRequestedData`.
The Worker that owns the task then:

1. cancels the handler running the task in this process, if one does (the
   handler is a child task, so cancelling it leaves the consumer alone);
2. ends the task as failed with an error of type ``cancelled``: the caller is
   answered (a plan waiting on the task takes its failure path, the gateway
   shows ``canceled``), the context is deleted, ``task.failed`` and
   ``task.cancelled`` are announced;
3. asks its pending sub-tasks to stop too.

A task already over, or owned by another agent, is left alone. A handler
running on another instance of the Worker finishes its step; the task it
saves or answers afterwards is over already (its write conflicts, its late
answer is ignored by the caller).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import structlog

from disco.agents._common import derived_id, publish_system_event
from disco.agents._task_wire import task_fields
from disco_common.notifications import NotificationType
from disco_common.system_events import (
    SystemEventType,
    TaskCancelledData,
    TaskCancelRequestedData,
)
from disco_common.tasks import ErrorInfo, SubTaskStatus

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext
    from disco.agents._task import TaskContext

__all__ = ["CANCELLED_ERROR", "RunningTasks", "cancel_task", "request_cancel"]

_log = structlog.get_logger("disco.agents")

CANCELLED_ERROR = "cancelled"
"""The error type a cancelled task's answer carries."""


class RunningTasks:
    """The task handlers running in this process, by task id, so that a cancel can reach them."""

    def __init__(self) -> None:
        self._running: dict[str, asyncio.Task[Any]] = {}
        self._reasons: dict[str, str] = {}

    async def run(self, task_id: str, work: Any) -> bool:
        """Run the coroutine ``work`` for ``task_id``; False when it was cancelled on request.

        Raises:
            asyncio.CancelledError: this caller itself was cancelled (a shutdown).
        """
        child: asyncio.Task[Any] = asyncio.ensure_future(work)
        self._running[task_id] = child
        try:
            await asyncio.shield(child)
        except asyncio.CancelledError:
            if task_id in self._reasons and child.cancelled():
                return False
            child.cancel()
            raise
        finally:
            if self._running.get(task_id) is child:
                del self._running[task_id]
        return True

    def cancel(self, task_id: str, reason: str) -> bool:
        """Cancel the handler running ``task_id`` here; whether one was running."""
        child = self._running.get(task_id)
        if child is None or child.done():
            return False
        self._reasons[task_id] = reason
        child.cancel()
        return True

    def reason(self, task_id: str) -> str:
        """Why ``task_id`` was cancelled (and forget it)."""
        return self._reasons.pop(task_id, "")


async def request_cancel(
    platform: PlatformContext, task_id: str, *, reason: str = "", requested_by: str | None = None
) -> None:
    """Publish ``task.cancel_requested`` for ``task_id`` (a derived id: asking twice is one ask)."""
    await publish_system_event(
        platform.bus,
        SystemEventType.TASK_CANCEL_REQUESTED,
        TaskCancelRequestedData(task_id=task_id, reason=reason, requested_by=requested_by),
        id=derived_id(task_id, "cancel_requested"),
        task_id=task_id,
    )


async def cancel_task(task: TaskContext[Any], reason: str) -> None:
    """End ``task`` as cancelled: answer its caller, stop its sub-tasks, announce it."""
    if task.finished:
        return
    platform = task._platform
    pending = [
        info.sub_task_id
        for info in task.sub_tasks.values()
        if info.status is SubTaskStatus.PENDING
        and info.event_type != NotificationType.HUMAN_INPUT.value
    ]
    await task.fail(
        ErrorInfo(type=CANCELLED_ERROR, message=reason or "the task was cancelled on request")
    )
    for sub_task_id in pending:
        await request_cancel(
            platform, sub_task_id, reason=f"its parent task {task.task_id} stopped"
        )
    await publish_system_event(
        platform.bus,
        SystemEventType.TASK_CANCELLED,
        TaskCancelledData(**task_fields(task._data), reason=reason),
        id=derived_id(task.task_id, "cancelled"),
        plan_id=task.plan_id,
        task_id=task.task_id,
    )
    _log.info("task cancelled", task_id=task.task_id, reason=reason)
