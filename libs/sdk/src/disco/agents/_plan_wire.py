"""What a saved plan publishes, as its record describes it: the first time or again.

Ids derive from the plan and the step, so publishing again after a crash (see
``Planner._recover``) publishes the very same envelopes and readers
deduplicate them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from disco.agents._common import answer, derived_id, publish_system_event
from disco.agents._durable import publish_again, scope_of
from disco_common.plans import PendingAction, PlanContextData, PlanHistoryEntry, PlanStatus
from disco_common.system_events import (
    PlanCompletedData,
    PlanFailedData,
    PlanPausedData,
    PlanResumedData,
    PlanStartedData,
    PlanStateChangedData,
    SystemEventData,
    SystemEventType,
)
from disco_common.topics import Topic

if TYPE_CHECKING:
    from datetime import datetime

    from disco.agents._platform import PlatformContext

__all__ = [
    "Moves",
    "announce_again",
    "announce_end",
    "announce_moves",
    "announce_paused",
    "announce_resumed",
    "answer_goal",
    "send_action",
    "state_changed",
]

Moves = list[tuple[int, PlanStateChangedData]]
"""``plan.state_changed`` events to announce, with their index in the plan's history."""


async def send_action(
    platform: PlatformContext, data: PlanContextData, pending: PendingAction, payload: JsonValue
) -> None:
    """Publish a pending action as its record describes it (the first time or again)."""
    request = pending.topic == Topic.ACTION_REQUESTS.value
    await publish_again(
        platform.bus,
        pending.topic,
        pending.event_type,
        payload,
        id=pending.request_id,
        time=pending.sent_at,
        traceparent=data.traceparent,
        correlation_id=pending.correlation_id,
        causation_id=pending.caused_by,
        response_event=pending.response_event if request else None,
        response_topic=Topic.ACTION_RESULTS.value if request else None,
        **scope_of(data),
    )


def _plan_fields(data: PlanContextData) -> dict[str, Any]:
    """What every ``plan.*`` event says of the plan."""
    return {"plan_id": data.plan_id, "agent_name": data.agent_name, "agent_id": data.agent_id}


async def _announce(
    platform: PlatformContext,
    data: PlanContextData,
    kind: SystemEventType,
    event: SystemEventData,
    *,
    id: str | None,
    time: datetime | None = None,
) -> None:
    await publish_system_event(platform.bus, kind, event, id=id, plan_id=data.plan_id, time=time)


def state_changed(
    data: PlanContextData, entry: PlanHistoryEntry, step: int
) -> PlanStateChangedData:
    """The ``plan.state_changed`` of the history entry at index ``step``."""
    return PlanStateChangedData(
        **_plan_fields(data),
        step=step,
        from_state=entry.from_state,
        to_state=entry.to_state,
        trigger_event=entry.event_type,
        trigger_event_id=entry.event_id,
        status=PlanStatus.RUNNING if data.status.is_final else data.status,
    )


async def announce_moves(
    platform: PlatformContext, data: PlanContextData, changes: Moves, *, start: bool
) -> None:
    """``plan.started`` (with ``start``) and the ``plan.state_changed`` of ``changes``.

    Each is dated when its move happened, not when it is announced: a plan
    announces its moves once their action is out, and a timeline ordered by
    time must show the plan entering a state before that state's request.
    """
    history = data.history
    if start:
        started = PlanStartedData(
            **_plan_fields(data),
            goal_event=data.goal_event,
            goal_task_id=data.goal_task_id,
            plan_type=data.plan_type,
            plan_type_version=data.plan_type_version,
            initial_state=data.initial_state,
            session_id=data.session_id,
            parent_plan_id=data.parent_plan_id,
        )
        await _announce(
            platform,
            data,
            SystemEventType.PLAN_STARTED,
            started,
            id=derived_id(data.plan_id, "started"),
            time=history[0].at if history else None,
        )
    for index, change in changes:
        await _announce(
            platform,
            data,
            SystemEventType.PLAN_STATE_CHANGED,
            change,
            id=derived_id(data.plan_id, "state", str(index)),
            time=history[index].at if index < len(history) else None,
        )


async def announce_again(
    platform: PlatformContext, data: PlanContextData, pending: PendingAction
) -> None:
    """Announce again the moves that entered the current state (a recovery's publishing).

    They are the history entries the handling that saved ``pending`` made:
    from the last one an event triggered (or the plan's start) to the end.
    """
    history = data.history
    first = len(history) - 1
    while first > 0 and history[first].event_id is None:
        first -= 1
    changes = [(i, state_changed(data, history[i], i)) for i in range(first, len(history))]
    await announce_moves(platform, data, changes, start=history[first].from_state is None)
    if pending.topic == Topic.NOTIFICATION_EVENTS.value:
        await announce_paused(platform, data, id=derived_id(pending.correlation_id, "paused"))


async def announce_paused(
    platform: PlatformContext, data: PlanContextData, *, id: str | None = None
) -> None:
    """``plan.paused`` (``id`` derived when the pause is a question: repeatable)."""
    paused = PlanPausedData(
        **_plan_fields(data), reason=data.pause_reason or "", current_state=data.current_state
    )
    await _announce(platform, data, SystemEventType.PLAN_PAUSED, paused, id=id)


async def announce_resumed(platform: PlatformContext, data: PlanContextData) -> None:
    """``plan.resumed``."""
    resumed = PlanResumedData(**_plan_fields(data), current_state=data.current_state)
    await _announce(platform, data, SystemEventType.PLAN_RESUMED, resumed, id=None)


async def answer_goal(platform: PlatformContext, data: PlanContextData) -> None:
    """Answer a final plan's goal with its saved outcome (id derived: repeatable)."""
    outcome = data.outcome
    assert outcome is not None
    await answer(
        platform.bus,
        data.response_event,
        outcome.model_dump(mode="json", exclude_none=True),
        correlation_id=data.goal_correlation_id or data.plan_id,
        topic=data.response_topic,
        id=derived_id(data.plan_id, "answer"),
        task_id=data.goal_task_id,
        **{**scope_of(data), "plan_id": data.parent_plan_id or data.plan_id},
    )


async def announce_end(platform: PlatformContext, data: PlanContextData) -> None:
    """``plan.completed`` or ``plan.failed`` of a final plan (id derived: repeatable)."""
    outcome = data.outcome
    assert outcome is not None
    event: PlanCompletedData | PlanFailedData
    if outcome.success:
        kind, suffix = SystemEventType.PLAN_COMPLETED, "completed"
        event = PlanCompletedData(
            **_plan_fields(data), final_state=data.current_state, result=outcome.result
        )
    else:
        assert outcome.error is not None
        kind, suffix = SystemEventType.PLAN_FAILED, "failed"
        event = PlanFailedData(
            **_plan_fields(data), error=outcome.error, final_state=data.current_state
        )
    await _announce(platform, data, kind, event, id=derived_id(data.plan_id, suffix))
