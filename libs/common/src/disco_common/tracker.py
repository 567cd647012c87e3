"""Tracker read models (``/v1/tracker/...``): progress, timelines, hierarchy, metrics.

The tracker builds these from what it consumes (``system-events``,
``action-requests``, ``action-results``); nobody writes to it over HTTP.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, JsonValue

from disco_common._base import Record
from disco_common.ids import AgentName, EventType, Id, TopicName, UtcDatetime
from disco_common.pagination import PageQuery
from disco_common.plans import PlanStatus
from disco_common.tasks import ErrorInfo, SubTaskStatus, TaskStatus

__all__ = [
    "AgentMetrics",
    "DelegationGroupProgress",
    "EventTypeMetrics",
    "HumanInputWaitQuery",
    "HumanInputWaitRecord",
    "HumanInputWaitStatus",
    "PlanProgress",
    "PlanProgressQuery",
    "PlanTreeNode",
    "SubTaskProgress",
    "TaskProgress",
    "TaskProgressQuery",
    "TimelineEntry",
]


class PlanProgress(Record):
    """Where a plan stands, as the tracker last saw it."""

    plan_id: Id
    plan_type: EventType | None = None
    goal_event: EventType | None = None
    status: PlanStatus
    current_state: str | None = None
    pause_reason: str | None = None
    error: ErrorInfo | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
    agent_name: AgentName | None = Field(default=None, description="The planner running it.")
    task_counts: dict[TaskStatus, int] = Field(
        default_factory=dict, description="How many of its tasks are in each status."
    )
    sub_plan_count: int = Field(default=0, ge=0)
    started_at: UtcDatetime | None = None
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = None


class TaskProgress(Record):
    """Where a task stands, as the tracker last saw it."""

    task_id: Id
    plan_id: Id | None = None
    parent_task_id: Id | None = Field(default=None, description="The task that delegated it.")
    event_type: EventType | None = Field(default=None, description="Its request event type.")
    agent_name: AgentName | None = None
    agent_id: Id | None = None
    status: TaskStatus
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    message: str | None = None
    correlation_id: Id | None = None
    error: ErrorInfo | None = None
    hitl_deadline: UtcDatetime | None = Field(
        default=None, description="When its open question to a human times out."
    )
    started_at: UtcDatetime | None = None
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = None


class TimelineEntry(Record):
    """One event in a plan's or task's history."""

    sequence: int = Field(ge=1, description="Order of arrival at the tracker.")
    at: UtcDatetime = Field(description="The event's own time.")
    event_id: Id
    event_type: EventType
    topic: TopicName
    source: str
    plan_id: Id | None = None
    task_id: Id | None = None
    correlation_id: Id | None = None
    summary: str | None = Field(default=None, description="One line for people.")
    data: JsonValue = Field(default=None, description="The event's data (may be truncated).")


class SubTaskProgress(Record):
    """One sub-task of a delegation group."""

    sub_task_id: Id
    event_type: EventType
    response_event: EventType
    status: SubTaskStatus
    completed_at: UtcDatetime | None = None


class DelegationGroupProgress(Record):
    """A fan-out group: how many of its sub-tasks came back."""

    parallel_group_id: Id
    task_id: Id = Field(description="The task that fanned out.")
    plan_id: Id | None = None
    total: int = Field(ge=0)
    completed: int = Field(ge=0)
    failed: int = Field(ge=0)
    pending: int = Field(ge=0)
    sub_tasks: list[SubTaskProgress] = Field(default_factory=list)
    created_at: UtcDatetime
    completed_at: UtcDatetime | None = Field(default=None, description="When the last came back.")


class PlanTreeNode(Record):
    """A plan and its sub-plans (the hierarchy under a root plan)."""

    plan_id: Id
    status: PlanStatus
    plan_type: EventType | None = None
    goal_event: EventType | None = None
    current_state: str | None = None
    started_at: UtcDatetime | None = None
    completed_at: UtcDatetime | None = None
    children: list[PlanTreeNode] = Field(default_factory=list)


class AgentMetrics(Record):
    """Work done by one agent (all instances) over a window."""

    agent_name: AgentName
    tasks_started: int = Field(default=0, ge=0)
    tasks_completed: int = Field(default=0, ge=0)
    tasks_failed: int = Field(default=0, ge=0)
    tasks_timed_out: int = Field(default=0, ge=0)
    mean_duration_ms: float | None = Field(default=None, ge=0.0)
    p95_duration_ms: float | None = Field(default=None, ge=0.0)
    last_activity_at: UtcDatetime | None = None
    window_start: UtcDatetime | None = None
    window_end: UtcDatetime | None = None


class EventTypeMetrics(Record):
    """Traffic of one event type over a window."""

    event_type: EventType
    topic: TopicName
    count: int = Field(ge=0)
    error_count: int = Field(default=0, ge=0, description="Results of this type that failed.")
    mean_response_ms: float | None = Field(
        default=None, ge=0.0, description="For requests: mean time until the correlated answer."
    )
    first_seen_at: UtcDatetime | None = None
    last_seen_at: UtcDatetime | None = None


class PlanProgressQuery(PageQuery):
    """Filters for listing plans in the tracker."""

    status: PlanStatus | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
    agent_name: AgentName | None = None


class TaskProgressQuery(PageQuery):
    """Filters for listing tasks in the tracker."""

    plan_id: Id | None = None
    status: TaskStatus | None = None
    agent_name: AgentName | None = None


class HumanInputWaitStatus(StrEnum):
    """Where a question to a human stands."""

    WAITING = "waiting"
    """Asked, not answered, deadline not reached."""
    ANSWERED = "answered"
    """Answered in time."""
    TIMED_OUT = "timed_out"
    """Nobody answered by the deadline: the tracker published the timeout."""
    ANSWERED_LATE = "answered_late"
    """An answer came after the timeout had been published (the asker ignores it)."""


class HumanInputWaitRecord(Record):
    """A question to a human the tracker watches (``/v1/tracker/hitl``)."""

    correlation_id: Id = Field(description="The correlation id the answer carries.")
    response_event: EventType = Field(description="The event type the answer comes as.")
    status: HumanInputWaitStatus
    request_id: Id | None = Field(default=None, description="The question's envelope id.")
    user_id: Id | None = None
    session_id: Id | None = None
    plan_id: Id | None = None
    task_id: Id | None = None
    question: str | None = None
    timeout_seconds: int | None = Field(default=None, gt=0)
    asked_at: UtcDatetime | None = None
    deadline: UtcDatetime | None = None
    answered_at: UtcDatetime | None = None
    timed_out_at: UtcDatetime | None = None


class HumanInputWaitQuery(PageQuery):
    """Filters for listing questions to humans."""

    status: HumanInputWaitStatus | None = None
    task_id: Id | None = None
    plan_id: Id | None = None
