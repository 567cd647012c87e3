"""Tracker read models (``/v1/tracker/...``): progress, timelines, hierarchy, metrics.

The tracker builds these from what it consumes (``system-events``,
``action-requests``, ``action-results`` and, for questions to humans,
``notification-events``); agents never write to it over HTTP. The one thing a
caller registers is a plan type (:class:`~disco_common.plans.PlanRegistrationRequest`
to ``POST /v1/tracker/plan-types``), so that a plan's view can show its state
machine.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, JsonValue

from disco_common._base import Record
from disco_common.ids import AgentName, EventType, Id, SemVer, TopicName, UtcDatetime
from disco_common.pagination import PageQuery
from disco_common.plans import PlanDefinition, PlanStatus
from disco_common.tasks import ErrorInfo, SubTaskStatus, TaskStatus

__all__ = [
    "HITL_TIMEOUT_REASON",
    "METRICS_WINDOW_MAX_SECONDS",
    "AgentMetrics",
    "DelegationGroupProgress",
    "EventTypeMetrics",
    "FeedEvent",
    "FeedKind",
    "HumanInputWaitQuery",
    "HumanInputWaitRecord",
    "HumanInputWaitStatus",
    "MetricsQuery",
    "PlanProgress",
    "PlanProgressQuery",
    "PlanTransition",
    "PlanTreeNode",
    "PlanTypeRecord",
    "PlanView",
    "SubTaskProgress",
    "TaskProgress",
    "TaskProgressQuery",
    "TaskView",
    "TimelineEntry",
]

HITL_TIMEOUT_REASON = "hitl_timeout"
"""The error type of a task failed because its question to a human timed out."""

METRICS_WINDOW_MAX_SECONDS = 90 * 24 * 3600
"""The longest metrics window a caller may ask for (90 days)."""


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


class PlanProgress(Record):
    """Where a plan stands, as the tracker last saw it."""

    plan_id: Id
    plan_type: EventType | None = None
    plan_type_version: SemVer | None = Field(
        default=None, description="The registered version of its plan type it runs."
    )
    goal_event: EventType | None = None
    goal_task_id: Id | None = Field(
        default=None, description="The task of the goal request that started it."
    )
    status: PlanStatus
    current_state: str | None = None
    pause_reason: str | None = None
    error: ErrorInfo | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = None
    agent_name: AgentName | None = Field(default=None, description="The planner running it.")
    agent_id: Id | None = Field(default=None, description="The planner instance running it.")
    task_counts: dict[TaskStatus, int] = Field(
        default_factory=dict, description="How many of its tasks are in each status."
    )
    sub_plan_count: int = Field(default=0, ge=0)
    started_at: UtcDatetime | None = None
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = None
    duration_ms: float | None = Field(
        default=None, ge=0.0, description="From its start to its end, once it ended."
    )


class TaskProgress(Record):
    """Where a task (a request and its answer) stands, as the tracker last saw it.

    A task is what one agent does for one request on ``action-requests``: a
    Worker's task, a Tool's invocation, a plan's action or a goal.
    """

    task_id: Id
    plan_id: Id | None = None
    parent_task_id: Id | None = Field(default=None, description="The task that delegated it.")
    parallel_group_id: Id | None = Field(
        default=None, description="The fan-out group it belongs to, if delegated in parallel."
    )
    event_type: EventType | None = Field(default=None, description="Its request event type.")
    response_event: EventType | None = Field(
        default=None, description="The event type its answer comes as."
    )
    agent_name: AgentName | None = Field(default=None, description="The agent doing it.")
    agent_id: Id | None = None
    requested_by: str | None = Field(
        default=None, description="Who asked: the request's source agent name (or source)."
    )
    status: TaskStatus
    attempt: int = Field(default=0, ge=0, description="How many times an agent started it.")
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    message: str | None = None
    correlation_id: Id | None = None
    error: ErrorInfo | None = None
    hitl_deadline: UtcDatetime | None = Field(
        default=None, description="When its open question to a human times out."
    )
    requested_at: UtcDatetime | None = None
    started_at: UtcDatetime | None = None
    updated_at: UtcDatetime
    completed_at: UtcDatetime | None = None
    duration_ms: float | None = Field(
        default=None,
        ge=0.0,
        description="How long the agent took: as it reported, else from start (or request) to end.",
    )


class TimelineEntry(Record):
    """One envelope in a plan's or task's history (a compact summary of it)."""

    sequence: int = Field(ge=1, description="Order of arrival at the tracker.")
    at: UtcDatetime = Field(description="The event's own time.")
    event_id: Id
    event_type: EventType
    topic: TopicName
    source: str
    agent_name: AgentName | None = Field(
        default=None, description="The agent that published it (from its source)."
    )
    plan_id: Id | None = None
    task_id: Id | None = None
    correlation_id: Id | None = None
    causation_id: Id | None = None
    summary: str | None = Field(default=None, description="One line for people.")
    data: JsonValue = Field(
        default=None, description="The event's data (left out when larger than the tracker keeps)."
    )


class SubTaskProgress(Record):
    """One sub-task of a delegation."""

    sub_task_id: Id
    event_type: EventType | None = None
    response_event: EventType | None = None
    status: SubTaskStatus
    agent_name: AgentName | None = Field(default=None, description="The agent that answered.")
    completed_at: UtcDatetime | None = None
    duration_ms: float | None = Field(default=None, ge=0.0)


class DelegationGroupProgress(Record):
    """A fan-out group: how many of its sub-tasks came back."""

    parallel_group_id: Id
    task_id: Id = Field(description="The task that fanned out.")
    plan_id: Id | None = None
    agent_name: AgentName | None = Field(default=None, description="The agent that fanned out.")
    total: int = Field(ge=0, description="How many sub-tasks it fanned out to.")
    completed: int = Field(ge=0)
    failed: int = Field(ge=0)
    pending: int = Field(ge=0)
    sub_tasks: list[SubTaskProgress] = Field(default_factory=list)
    created_at: UtcDatetime
    completed_at: UtcDatetime | None = Field(default=None, description="When the last came back.")


class PlanTreeNode(Record):
    """A plan and its sub-plans (the hierarchy under a plan)."""

    plan_id: Id
    status: PlanStatus
    plan_type: EventType | None = None
    goal_event: EventType | None = None
    current_state: str | None = None
    agent_name: AgentName | None = None
    started_at: UtcDatetime | None = None
    completed_at: UtcDatetime | None = None
    children: list[PlanTreeNode] = Field(default_factory=list)


class PlanTransition(Record):
    """One move of a plan through its state machine."""

    step: int | None = Field(default=None, ge=0, description="Its index in the plan's history.")
    from_state: str | None = None
    to_state: str
    trigger_event: EventType | None = Field(
        default=None, description="The event type that caused it (None for default_next)."
    )
    at: UtcDatetime


class PlanTypeRecord(Record):
    """A registered version of a plan type: its state machine (immutable)."""

    plan_type: EventType
    version: SemVer
    definition: PlanDefinition
    content_hash: str = Field(description="SHA-256 of the definition's canonical JSON.")
    created_at: UtcDatetime


class PlanView(Record):
    """A plan with what a UI needs to draw it: its state machine and its path through it."""

    plan: PlanProgress
    definition: PlanTypeRecord | None = Field(
        default=None,
        description=(
            "The registered plan type it runs (the version it started with, else the latest); "
            "None for a plan without a registered type."
        ),
    )
    transitions: list[PlanTransition] = Field(
        default_factory=list, description="Its moves so far, in order."
    )


class TaskView(Record):
    """A task with its questions to humans and what it delegated."""

    task: TaskProgress
    waits: list[HumanInputWaitRecord] = Field(
        default_factory=list, description="Its questions to humans and where they stand."
    )
    sub_tasks: list[SubTaskProgress] = Field(
        default_factory=list, description="What it delegated, in order (at most 500)."
    )
    delegations: list[Id] = Field(
        default_factory=list, description="Its fan-out groups (GET /v1/tracker/delegations/{id})."
    )


class AgentMetrics(Record):
    """Work done by one agent (all instances) over a window.

    Counts and durations are of the tasks that ended in the window; durations
    are what the agent took (as it reported, else from start or request to end).
    """

    agent_name: AgentName
    count: int = Field(default=0, ge=0, description="Tasks that ended in the window.")
    errors: int = Field(default=0, ge=0, description="Of those, the failed ones.")
    timed_out: int = Field(
        default=0, ge=0, description="Of the failed, those whose question to a human timed out."
    )
    in_progress: int = Field(
        default=0, ge=0, description="Tasks not ended yet that were active in the window."
    )
    mean_duration_ms: float | None = Field(default=None, ge=0.0)
    p50_duration_ms: float | None = Field(default=None, ge=0.0)
    p95_duration_ms: float | None = Field(default=None, ge=0.0)
    p99_duration_ms: float | None = Field(default=None, ge=0.0)
    last_activity_at: UtcDatetime | None = None
    window_start: UtcDatetime
    window_end: UtcDatetime


class EventTypeMetrics(Record):
    """Traffic of one event type on one topic over a window."""

    event_type: EventType
    topic: TopicName
    count: int = Field(ge=0, description="Envelopes seen in the window.")
    error_count: int = Field(
        default=0, ge=0, description="Answers (or task.failed) of this type that carried an error."
    )
    mean_duration_ms: float | None = Field(
        default=None,
        ge=0.0,
        description="For request types: mean time from the request to its answer.",
    )
    p50_duration_ms: float | None = Field(default=None, ge=0.0)
    p95_duration_ms: float | None = Field(default=None, ge=0.0)
    p99_duration_ms: float | None = Field(default=None, ge=0.0)
    last_seen_at: UtcDatetime | None = Field(
        default=None, description="The start of the last minute it was seen in."
    )
    window_start: UtcDatetime
    window_end: UtcDatetime


class FeedKind(StrEnum):
    """What a feed event is about."""

    PLAN = "plan"
    TASK = "task"


class FeedEvent(Record):
    """A change to a plan or a task (``GET /v1/tracker/feed``, server-sent events).

    ``id`` increases with every change the tracker commits; a client that
    reconnects with ``Last-Event-ID: <id>`` gets every change after it.
    """

    id: int = Field(ge=1, description="The change's position in the feed.")
    kind: FeedKind
    plan_id: Id | None = None
    task_id: Id | None = None
    status: str = Field(description="The plan's or task's status after the change.")
    current_state: str | None = Field(default=None, description="A plan's state after it.")
    event_type: EventType | None = Field(default=None, description="A task's request type.")
    agent_name: AgentName | None = None
    cause: EventType | None = Field(default=None, description="The event type that changed it.")
    at: UtcDatetime = Field(description="When the tracker recorded the change.")


class PlanProgressQuery(PageQuery):
    """Filters for listing plans in the tracker (newest first)."""

    status: PlanStatus | None = None
    plan_type: EventType | None = None
    session_id: Id | None = None
    parent_plan_id: Id | None = Field(default=None, description="Only the sub-plans of this plan.")
    root_only: bool = Field(default=False, description="Only plans that are nobody's sub-plan.")
    agent_name: AgentName | None = Field(
        default=None, description="Plans run by this planner, or in which this agent did a task."
    )
    started_after: UtcDatetime | None = Field(default=None, description="Started at or after.")
    started_before: UtcDatetime | None = Field(default=None, description="Started before.")


class TaskProgressQuery(PageQuery):
    """Filters for listing a plan's tasks (in the order they were asked for)."""

    status: TaskStatus | None = None
    agent_name: AgentName | None = None


class MetricsQuery(PageQuery):
    """The window of a metrics list: the last ``window_seconds`` up to now."""

    window_seconds: int = Field(
        default=3600,
        ge=1,
        le=METRICS_WINDOW_MAX_SECONDS,
        description="How far back the window reaches, in seconds (default one hour).",
    )
