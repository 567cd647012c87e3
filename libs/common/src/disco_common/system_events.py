"""Lifecycle and progress events on ``system-events``: task.*, plan.*, agent.*, erasure.*.

Agents report progress by publishing these (never by calling the tracker);
the tracker consumes them. Each :class:`SystemEventType` has one payload model
(the envelope's ``data``); :data:`SYSTEM_EVENT_DATA` maps one to the other and
:func:`parse_system_event_data` reads an envelope's data by its type.

The envelope carries ``tenant_id``, ``plan_id``, ``task_id`` and the time; the
payloads repeat the ids they are about so that they read on their own.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from disco_common.ids import AgentName, EventType, Id, SemVer, UtcDatetime
from disco_common.memory import ErasureScope
from disco_common.plans import PlanStatus
from disco_common.tasks import ErrorInfo, TaskStatus

__all__ = [
    "SYSTEM_EVENT_DATA",
    "AgentDeregisteredData",
    "AgentExpiredData",
    "AgentRegisteredData",
    "DelegatedSubTask",
    "ErasureCompletedData",
    "ErasureRequestedData",
    "PlanCompletedData",
    "PlanFailedData",
    "PlanPausedData",
    "PlanResumedData",
    "PlanStartedData",
    "PlanStateChangedData",
    "SystemEventData",
    "SystemEventType",
    "TaskCancelRequestedData",
    "TaskCancelledData",
    "TaskCompletedData",
    "TaskDelegatedData",
    "TaskFailedData",
    "TaskProgressData",
    "TaskStartedData",
    "TaskTimeoutData",
    "parse_system_event_data",
]


class SystemEventType(StrEnum):
    """The event types on ``system-events``."""

    TASK_STARTED = "task.started"
    TASK_PROGRESS = "task.progress"
    TASK_DELEGATED = "task.delegated"
    TASK_COMPLETED = "task.completed"
    TASK_FAILED = "task.failed"
    TASK_TIMEOUT = "task.timeout"
    """Emitted by the tracker when a worker's HITL question outlives its timeout."""
    TASK_CANCEL_REQUESTED = "task.cancel_requested"
    """Someone (an A2A caller through the gateway, a plan) asks the agent to stop a task."""
    TASK_CANCELLED = "task.cancelled"
    """An agent stopped a task on request; its caller was answered with error ``cancelled``."""
    PLAN_STARTED = "plan.started"
    PLAN_STATE_CHANGED = "plan.state_changed"
    PLAN_PAUSED = "plan.paused"
    PLAN_RESUMED = "plan.resumed"
    PLAN_COMPLETED = "plan.completed"
    PLAN_FAILED = "plan.failed"
    AGENT_REGISTERED = "agent.registered"
    AGENT_EXPIRED = "agent.expired"
    AGENT_DEREGISTERED = "agent.deregistered"
    ERASURE_REQUESTED = "erasure.requested"
    """The memory service erased a user or a tenant: every other service erases its rows too."""
    ERASURE_COMPLETED = "erasure.completed"
    """A service erased its rows of a user or a tenant (one per service and request)."""


class SystemEventData(BaseModel):
    """Base of every system-event payload.

    Readers ignore fields they do not know, so producers may add fields without
    breaking older consumers.
    """

    model_config = ConfigDict(extra="ignore", from_attributes=True)


class _TaskEvent(SystemEventData):
    task_id: Id = Field(description="The task the event is about.")
    plan_id: Id | None = Field(default=None, description="The plan the task belongs to.")
    agent_name: AgentName | None = Field(default=None, description="The agent handling it.")
    agent_id: Id | None = Field(default=None, description="The agent instance handling it.")


class TaskStartedData(_TaskEvent):
    """``task.started``: an agent began working on a request."""

    event_type: EventType = Field(description="The request event type of the task.")
    correlation_id: Id | None = Field(default=None, description="The request's correlation id.")
    parent_task_id: Id | None = Field(
        default=None, description="The task that delegated this one, if known."
    )


class TaskProgressData(_TaskEvent):
    """``task.progress``: how far along a task is."""

    status: TaskStatus = Field(default=TaskStatus.RUNNING)
    progress: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Fraction done, 0 to 1, if known."
    )
    message: str | None = Field(default=None, max_length=2000, description="For people.")


class DelegatedSubTask(SystemEventData):
    """One sub-task in a ``task.delegated`` event."""

    sub_task_id: Id = Field(description="Also the sub-task request's correlation id.")
    event_type: EventType = Field(description="Its request event type.")
    response_event: EventType = Field(description="The event type its answer comes as.")


class TaskDelegatedData(_TaskEvent):
    """``task.delegated``: a task handed work to other agents (one or a parallel group)."""

    sub_tasks: list[DelegatedSubTask] = Field(min_length=1, description="The delegated sub-tasks.")
    parallel_group_id: Id | None = Field(
        default=None, description="The fan-out group, when delegated in parallel."
    )


class TaskCompletedData(_TaskEvent):
    """``task.completed``: a task answered with success."""

    result: JsonValue = Field(default=None, description="The result (or a summary of it).")
    duration_seconds: float | None = Field(default=None, ge=0.0)


class TaskFailedData(_TaskEvent):
    """``task.failed``: a task answered with an error."""

    error: ErrorInfo
    duration_seconds: float | None = Field(default=None, ge=0.0)


class TaskTimeoutData(_TaskEvent):
    """``task.timeout``: a task's HITL question was not answered in time.

    Published by the tracker with the question's ``correlation_id``, so the
    waiting agent (or a plan transition on ``task.timeout``) can take the
    timeout path; the task counts as failed with reason ``hitl_timeout``.
    """

    reason: str = Field(default="hitl_timeout", max_length=200)
    request_id: Id | None = Field(
        default=None, description="The envelope id of the unanswered question."
    )
    correlation_id: Id | None = Field(default=None, description="The question's correlation id.")
    response_event: EventType | None = Field(
        default=None, description="The event type the answer would have come as."
    )
    timeout_seconds: int = Field(gt=0, description="The timeout that passed.")
    deadline: UtcDatetime = Field(description="When it timed out.")


class TaskCancelRequestedData(SystemEventData):
    """``task.cancel_requested``: stop task ``task_id``.

    Published on ``system-events`` (envelope ``task_id`` and ``correlation_id``
    set to the task, so it shares the task's key). The agent running the task
    cancels its handler if one runs, answers the task's caller with an error of
    type ``cancelled`` (so the plan waiting on it is told), announces
    ``task.cancelled`` and asks its own pending sub-tasks to stop too. A task
    that is already over, or unknown to the agent, is left as it is.
    """

    task_id: Id = Field(description="The task to stop (a Worker's task id).")
    reason: str = Field(default="", max_length=2000, description="Why, for people.")
    requested_by: Id | None = Field(default=None, description="The user who asked.")


class TaskCancelledData(_TaskEvent):
    """``task.cancelled``: an agent stopped a task on request."""

    reason: str = Field(default="", max_length=2000)


class _PlanEvent(SystemEventData):
    plan_id: Id = Field(description="The plan the event is about.")
    agent_name: AgentName | None = Field(default=None, description="The planner running it.")
    agent_id: Id | None = Field(default=None, description="The planner instance running it.")


class PlanStartedData(_PlanEvent):
    """``plan.started``: a planner began a plan for a goal."""

    goal_event: EventType = Field(description="The goal request's event type.")
    plan_type: EventType | None = None
    plan_type_version: SemVer | None = Field(
        default=None, description="The registered version of the plan type it runs, if any."
    )
    goal_task_id: Id | None = Field(
        default=None,
        description="The goal request's task id (its `task_id`, else its envelope id).",
    )
    initial_state: str | None = Field(default=None, max_length=100)
    session_id: Id | None = None
    parent_plan_id: Id | None = Field(default=None, description="Set for a sub-plan.")


class PlanStateChangedData(_PlanEvent):
    """``plan.state_changed``: a plan moved from one state to another."""

    step: int | None = Field(
        default=None,
        ge=0,
        description=(
            "The move's index in the plan's history: orders moves that arrive out of order."
        ),
    )
    from_state: str | None = Field(default=None, max_length=100)
    to_state: str = Field(max_length=100)
    trigger_event: EventType | None = Field(
        default=None, description="The event type that caused it (None for default_next)."
    )
    trigger_event_id: Id | None = None
    status: PlanStatus = Field(default=PlanStatus.RUNNING)


class PlanPausedData(_PlanEvent):
    """``plan.paused``: a plan halted at a plan-level gate (no timeout)."""

    reason: str = Field(default="", max_length=1000)
    current_state: str | None = Field(default=None, max_length=100)


class PlanResumedData(_PlanEvent):
    """``plan.resumed``: a paused plan continues."""

    current_state: str | None = Field(default=None, max_length=100)


class PlanCompletedData(_PlanEvent):
    """``plan.completed``: a plan reached a terminal state and answered its goal."""

    final_state: str | None = Field(default=None, max_length=100)
    result: JsonValue = None


class PlanFailedData(_PlanEvent):
    """``plan.failed``: a plan ended with an error."""

    error: ErrorInfo
    final_state: str | None = Field(default=None, max_length=100)


class _AgentEvent(SystemEventData):
    agent_id: Id = Field(description="The registration the event is about.")
    name: AgentName = Field(description="The agent's name.")
    instance_id: Id | None = None


class AgentRegisteredData(_AgentEvent):
    """``agent.registered``: an agent instance registered (or re-registered)."""

    version: SemVer
    capabilities: list[str] = Field(default_factory=list, description="Capability task names.")
    expires_at: UtcDatetime


class AgentExpiredData(_AgentEvent):
    """``agent.expired``: the registry stopped hearing from an agent within its TTL."""

    last_heartbeat_at: UtcDatetime
    expired_at: UtcDatetime


class AgentDeregisteredData(_AgentEvent):
    """``agent.deregistered``: an agent left (usually on a clean stop)."""

    events_removed: int = Field(default=0, ge=0, description="Owned event definitions removed.")


class ErasureRequestedData(SystemEventData):
    """``erasure.requested``: forget a user (``user_id`` set) or the whole tenant.

    The envelope's ``tenant_id`` names the tenant; nothing else identifies the
    erased data (the event must not carry what it erases).
    """

    scope: ErasureScope
    user_id: Id | None = Field(default=None, description="Set for a user erasure.")
    requested_by: Id = Field(description="The user who asked (themselves, or an admin).")


class ErasureCompletedData(SystemEventData):
    """``erasure.completed``: one service erased its rows for an ``erasure.requested``."""

    service: str
    scope: ErasureScope
    user_id: Id | None = None
    request_id: Id = Field(description="The id of the erasure.requested envelope.")
    deleted: dict[str, int] = Field(default_factory=dict, description="Rows deleted per table.")


SYSTEM_EVENT_DATA: dict[SystemEventType, type[SystemEventData]] = {
    SystemEventType.TASK_STARTED: TaskStartedData,
    SystemEventType.TASK_PROGRESS: TaskProgressData,
    SystemEventType.TASK_DELEGATED: TaskDelegatedData,
    SystemEventType.TASK_COMPLETED: TaskCompletedData,
    SystemEventType.TASK_FAILED: TaskFailedData,
    SystemEventType.TASK_TIMEOUT: TaskTimeoutData,
    SystemEventType.TASK_CANCEL_REQUESTED: TaskCancelRequestedData,
    SystemEventType.TASK_CANCELLED: TaskCancelledData,
    SystemEventType.PLAN_STARTED: PlanStartedData,
    SystemEventType.PLAN_STATE_CHANGED: PlanStateChangedData,
    SystemEventType.PLAN_PAUSED: PlanPausedData,
    SystemEventType.PLAN_RESUMED: PlanResumedData,
    SystemEventType.PLAN_COMPLETED: PlanCompletedData,
    SystemEventType.PLAN_FAILED: PlanFailedData,
    SystemEventType.AGENT_REGISTERED: AgentRegisteredData,
    SystemEventType.AGENT_EXPIRED: AgentExpiredData,
    SystemEventType.AGENT_DEREGISTERED: AgentDeregisteredData,
    SystemEventType.ERASURE_REQUESTED: ErasureRequestedData,
    SystemEventType.ERASURE_COMPLETED: ErasureCompletedData,
}
"""The payload model of each system event type."""


def parse_system_event_data(event_type: str, data: JsonValue) -> SystemEventData:
    """Read a system event's ``data`` by its type.

    Raises:
        ValueError: ``event_type`` is not a :class:`SystemEventType` (the message
            lists the known ones), or ``data`` does not fit its payload model
            (a pydantic ``ValidationError``, which is a ValueError).
    """
    try:
        kind = SystemEventType(event_type)
    except ValueError:
        known = ", ".join(member.value for member in SystemEventType)
        raise ValueError(f"unknown system event type {event_type!r}; known: {known}") from None
    return SYSTEM_EVENT_DATA[kind].model_validate(data)
