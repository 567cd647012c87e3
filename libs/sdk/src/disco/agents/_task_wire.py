"""What a saved task publishes, as its record describes it: the first time or again.

Every envelope here takes its id (and time) from the task context, so that
publishing it again after a crash (see ``Worker._recover``) publishes the very
same envelope and receivers deduplicate it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from pydantic import JsonValue

from disco.agents._common import answer, derived_id, publish_system_event
from disco.agents._durable import (
    FINISHER_GRACE,
    RESEND_GRACE,
    Recovery,
    publish_again,
    scope_of,
)
from disco.clients import ServiceNotFoundError
from disco_common.notifications import NotificationType
from disco_common.system_events import (
    DelegatedSubTask,
    SystemEventData,
    SystemEventType,
    TaskCompletedData,
    TaskDelegatedData,
    TaskFailedData,
)
from disco_common.tasks import HumanInputWait, SubTaskInfo, SubTaskStatus, TaskContextData
from disco_common.topics import Topic

if TYPE_CHECKING:
    from disco.agents._platform import PlatformContext

__all__ = [
    "announce_delegation",
    "announce_task",
    "delegation_order",
    "forget",
    "publish_due",
    "publish_outcome",
    "send_question",
    "send_request",
    "task_fields",
]

_log = structlog.get_logger("disco.agents")


def task_fields(data: TaskContextData) -> dict[str, Any]:
    """What every ``task.*`` event says of the task."""
    return {
        "task_id": data.task_id,
        "plan_id": data.plan_id,
        "agent_name": data.agent_name,
        "agent_id": data.agent_id,
    }


async def announce_task(
    platform: PlatformContext,
    data: TaskContextData,
    kind: SystemEventType,
    event: SystemEventData,
    *,
    id: str | None = None,
) -> None:
    """Publish a ``task.*`` event of ``data`` on ``system-events`` (never fails the caller)."""
    await publish_system_event(
        platform.bus, kind, event, id=id, plan_id=data.plan_id, task_id=data.task_id
    )


def delegation_order(info: SubTaskInfo) -> tuple[datetime, str]:
    """Sort key of sub-tasks in delegation order (contexts are JSONB: key order is not ours)."""
    return (info.delegated_at or datetime.min.replace(tzinfo=UTC), info.sub_task_id)


async def send_request(
    platform: PlatformContext, data: TaskContextData, info: SubTaskInfo, payload: JsonValue
) -> None:
    """Publish a sub-task's request as its saved record describes it (first time or again)."""
    assert info.delegated_at is not None
    await publish_again(
        platform.bus,
        Topic.ACTION_REQUESTS,
        info.event_type,
        payload,
        id=derived_id(info.sub_task_id, "request"),
        time=info.delegated_at,
        traceparent=data.traceparent,
        correlation_id=info.sub_task_id,
        causation_id=info.caused_by,
        response_event=info.response_event,
        response_topic=Topic.ACTION_RESULTS.value,
        task_id=info.sub_task_id,
        **scope_of(data),
    )


async def send_question(
    platform: PlatformContext, data: TaskContextData, wait: HumanInputWait
) -> None:
    """Publish a task's question to a human as its saved wait describes it."""
    await publish_again(
        platform.bus,
        Topic.NOTIFICATION_EVENTS,
        NotificationType.HUMAN_INPUT.value,
        wait.request_data,
        id=wait.request_id,
        time=wait.asked_at,
        traceparent=data.traceparent,
        correlation_id=wait.correlation_id,
        causation_id=wait.caused_by,
        task_id=data.task_id,
        **scope_of(data),
    )


async def announce_delegation(
    platform: PlatformContext,
    data: TaskContextData,
    infos: Sequence[SubTaskInfo],
    group: str | None,
) -> None:
    """``task.delegated`` for one delegation (its id derived: announcing again is harmless)."""
    delegated = TaskDelegatedData(
        **task_fields(data),
        sub_tasks=[
            DelegatedSubTask(
                sub_task_id=info.sub_task_id,
                event_type=info.event_type,
                response_event=info.response_event,
            )
            for info in infos
        ],
        parallel_group_id=group,
    )
    await announce_task(
        platform,
        data,
        SystemEventType.TASK_DELEGATED,
        delegated,
        id=derived_id(infos[0].sub_task_id, "delegated"),
    )


async def publish_outcome(
    platform: PlatformContext, data: TaskContextData, duration: float | None
) -> None:
    """Publish a final task's answer and its system event (ids derived: repeatable)."""
    outcome = data.outcome
    assert outcome is not None
    await answer(
        platform.bus,
        data.response_event,
        outcome.model_dump(mode="json", exclude_none=True),
        correlation_id=data.correlation_id or data.task_id,
        topic=data.response_topic,
        id=derived_id(data.task_id, "answer"),
        task_id=data.task_id,
        **scope_of(data),
    )
    kind: SystemEventType
    payload: TaskCompletedData | TaskFailedData
    if outcome.success:
        kind = SystemEventType.TASK_COMPLETED
        payload = TaskCompletedData(
            **task_fields(data), duration_seconds=duration, result=outcome.result
        )
    else:
        assert outcome.error is not None
        kind = SystemEventType.TASK_FAILED
        payload = TaskFailedData(
            **task_fields(data), duration_seconds=duration, error=outcome.error
        )
    suffix = "completed" if outcome.success else "failed"
    await announce_task(platform, data, kind, payload, id=derived_id(data.task_id, suffix))


async def forget(platform: PlatformContext, task_id: str) -> None:
    """Delete a finished task's context (best effort: the answer is out already)."""
    # A context left behind expires by its TTL, and a late answer that finds it
    # sees a final task and is ignored.
    try:
        await platform.context_memory.delete_task_context(task_id)
    except ServiceNotFoundError:
        pass
    except Exception as exc:
        _log.warning("finished task context not deleted", task_id=task_id, error=repr(exc))


async def publish_due(
    platform: PlatformContext,
    data: TaskContextData,
    recovery: Recovery,
    *,
    unkept: Mapping[str, JsonValue] | None = None,
) -> int:
    """Publish again what ``recovery`` finds due of what the saved task promised.

    That is the pending requests and question to a human (with their
    delegation's ``task.delegated``), or the final answer of a finished task
    (whose context is then deleted). ``unkept`` has payloads too large to keep
    in the context, from the handler run that delegated them.

    Returns:
        How many envelopes were published again.
    """
    if data.status.is_final:
        if data.outcome is None or not recovery.due(
            data.task_id, data.finished_by, data.updated_at, FINISHER_GRACE
        ):
            return 0
        _log.info("publishing a finished task's answer again", task_id=data.task_id)
        await publish_outcome(platform, data, None)
        recovery.sent(data.task_id)
        await forget(platform, data.task_id)
        return 1
    sent = 0
    announce: dict[str, None] = {}  # delegations to announce again, in order
    wait = data.human_input
    # Stored as JSONB, whose key order is not ours: delegation order by time.
    ordered = sorted(data.sub_tasks.values(), key=delegation_order)
    for info in ordered:
        if info.status is not SubTaskStatus.PENDING:
            continue
        if not recovery.due(info.sub_task_id, info.caused_by, info.delegated_at, RESEND_GRACE):
            continue
        if wait is not None and info.sub_task_id == wait.correlation_id:
            if wait.request_data is None:
                continue  # asked by an older SDK: the question is not kept
            await send_question(platform, data, wait)
        elif info.event_type == NotificationType.HUMAN_INPUT.value:
            continue  # a question no longer outstanding
        elif info.request_kept:
            await send_request(platform, data, info, info.request_data)
        elif unkept is not None and info.sub_task_id in unkept:
            await send_request(platform, data, info, unkept[info.sub_task_id])
        else:
            _log.warning(
                "a pending sub-task cannot be sent again: its payload was too large to keep",
                task_id=data.task_id,
                sub_task_id=info.sub_task_id,
            )
            recovery.sent(info.sub_task_id)  # say so once per grace, not per answer
            continue
        _log.info("published again", task_id=data.task_id, sub_task_id=info.sub_task_id)
        recovery.sent(info.sub_task_id)
        sent += 1
        if info.event_type != NotificationType.HUMAN_INPUT.value:
            announce.setdefault(info.parallel_group_id or info.sub_task_id, None)
    # The delegation was announced after its requests: announce it again too.
    for key in announce:
        members = [info for info in ordered if key in (info.parallel_group_id, info.sub_task_id)]
        group = members[0].parallel_group_id
        await announce_delegation(platform, data, members, group)
    return sent
