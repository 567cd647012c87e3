"""From envelopes to facts: a timeline row each, and patches of plans, tasks and groups.

Pure functions (no I/O): :func:`read_envelope` turns one consumed envelope
into its :class:`EventRow` and the patches it implies, folded into a
:class:`~disco_tracker.ingest.patches.Fold`.

How envelopes map to tasks. A task is what one agent does for one request:

- a request on ``action-requests`` is task ``task_id`` (set for sub-tasks),
  else its envelope ``id`` — the same rule the SDK's Worker uses;
- ``task.*`` events name the task in their data;
- an answer on ``action-results`` names its task in ``task_id`` (the SDK sets
  it); one that does not is matched to its request by ``correlation_id``
  (see :class:`Unmatched`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from disco_common.envelope import Envelope
from disco_common.system_events import (
    PlanCompletedData,
    PlanFailedData,
    PlanPausedData,
    PlanResumedData,
    PlanStartedData,
    PlanStateChangedData,
    SystemEventData,
    TaskCompletedData,
    TaskDelegatedData,
    TaskFailedData,
    TaskProgressData,
    TaskStartedData,
    TaskTimeoutData,
    parse_system_event_data,
)
from disco_common.tasks import ActionResultData, TaskStatus
from disco_common.topics import Topic
from disco_common.tracker import HITL_TIMEOUT_REASON
from disco_tracker.ingest.patches import (
    Fold,
    GroupPatch,
    PendingAnswer,
    PlanPatch,
    TaskPatch,
)

__all__ = [
    "EventRow",
    "Problem",
    "Reading",
    "Unmatched",
    "agent_of",
    "read_envelope",
    "timeline_row",
]

_AGENT_SOURCE = "disco://agent/"
_LIVE_TASK_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.WAITING})


class Problem(StrEnum):
    """Why an envelope said nothing beyond its timeline row."""

    MALFORMED = "malformed"
    """Its data does not fit its (known) event type."""
    UNKNOWN = "unknown"
    """A system event type this tracker does not know (a newer SDK's, say)."""


@dataclass(slots=True)
class EventRow:
    """The timeline row of one envelope."""

    event_id: str
    topic: str
    event_type: str
    source: str
    at: datetime
    agent_name: str | None
    plan_id: str | None
    task_id: str | None
    correlation_id: str | None
    causation_id: str | None
    summary: str | None
    data: Any


@dataclass(slots=True)
class Unmatched:
    """An answer that names no task: it is matched to its request by correlation id."""

    answer: PendingAnswer
    response_event: str


@dataclass(slots=True)
class Reading:
    """What one envelope said: its timeline row, its patches, what could not be read."""

    topic: str
    row: EventRow
    patches: list[PlanPatch | TaskPatch | GroupPatch] = field(default_factory=list)
    touched_plan: str | None = None
    """The plan the envelope belongs to (it was active then)."""
    unmatched: Unmatched | None = None
    """An answer that names no task, to match to its request by correlation id."""
    error: bool = False
    """Whether it reports a failure (an error answer, ``task.failed``...)."""
    problem: Problem | None = None
    reason: str | None = None

    def plan(self, patch: PlanPatch) -> None:
        self.patches.append(patch)

    def task(self, patch: TaskPatch) -> None:
        self.patches.append(patch)

    def group(self, patch: GroupPatch) -> None:
        self.patches.append(patch)

    def fold_into(self, fold: Fold) -> None:
        """Merge what it says into ``fold`` (and count it)."""
        for patch in self.patches:
            if isinstance(patch, TaskPatch):
                fold.task(patch)
            elif isinstance(patch, PlanPatch):
                fold.plan(patch)
            else:
                fold.group(patch)
        row = self.row
        if self.touched_plan is not None:
            fold.touch(self.touched_plan, row.at)
        fold.count(row.at, self.topic, row.event_type, error=self.error)


def agent_of(source: str) -> str | None:
    """The agent name in a ``disco://agent/<name>`` source (None for other sources)."""
    if source.startswith(_AGENT_SOURCE):
        name = source[len(_AGENT_SOURCE) :]
        return name or None
    return None


def _error(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if hasattr(value, "model_dump"):
        dumped: dict[str, Any] = value.model_dump(mode="json", exclude_none=True)
        return dumped
    return dict(value)


def timeline_row(
    topic: str, envelope: Envelope, *, keep_data: bool, summary: str | None = None
) -> EventRow:
    """The timeline row of ``envelope`` as it came (no summary unless given)."""
    return EventRow(
        event_id=envelope.id,
        topic=topic,
        event_type=envelope.type,
        source=envelope.source,
        at=envelope.time,
        agent_name=agent_of(envelope.source),
        plan_id=envelope.plan_id,
        task_id=envelope.task_id,
        correlation_id=envelope.correlation_id,
        causation_id=envelope.causation_id,
        summary=summary,
        data=envelope.data if keep_data else None,
    )


def read_envelope(topic: str, envelope: Envelope, *, keep_data: bool) -> Reading:
    """What ``envelope`` (consumed on ``topic``) says.

    Args:
        topic: the logical topic it came from.
        envelope: the envelope.
        keep_data: whether its data is small enough to keep in the timeline.

    Returns:
        Its timeline row and patches; the answer to match by correlation id if it
        is one that names no task; and the :class:`Problem` when its data could
        not be read (it says nothing but its row and count then).
    """
    row = timeline_row(topic, envelope, keep_data=keep_data)
    source_agent = row.agent_name
    reading = Reading(topic, row)
    fold = reading
    try:
        if topic == Topic.ACTION_REQUESTS.value:
            _request(envelope, row, fold, source_agent)
        elif topic == Topic.ACTION_RESULTS.value:
            reading.unmatched, reading.error = _answer(envelope, row, fold, source_agent)
        elif topic == Topic.SYSTEM_EVENTS.value:
            reading.error = _system_event(
                envelope, parse_system_event_data(envelope.type, envelope.data), row, fold
            )
    except ValidationError as exc:
        reading.patches.clear()
        reading.problem, reading.reason = Problem.MALFORMED, f"{envelope.type}: {_first_error(exc)}"
        row.summary = "malformed data"
    except ValueError as exc:  # parse_system_event_data: an unknown type
        reading.problem, reading.reason = Problem.UNKNOWN, str(exc).split(";")[0]
        row.summary = envelope.type
    reading.touched_plan = row.plan_id
    return reading


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "data"
    return f"{where}: {first['msg']}"


def _request(envelope: Envelope, row: EventRow, fold: Reading, source_agent: str | None) -> None:
    task_id = envelope.task_id or envelope.id
    row.task_id = task_id
    row.summary = f"request {envelope.type} -> {envelope.response_event}"
    fold.task(
        TaskPatch(
            task_id=task_id,
            at=envelope.time,
            first_seen_at=envelope.time,
            plan_id=envelope.plan_id,
            event_type=envelope.type,
            response_event=envelope.response_event,
            correlation_id=envelope.correlation_id,
            requested_by=source_agent or envelope.source,
            requested_at=envelope.time,
            cause=envelope.type,
            cause_at=envelope.time,
        )
    )


def _answer(
    envelope: Envelope, row: EventRow, fold: Reading, source_agent: str | None
) -> tuple[Unmatched | None, bool]:
    data = ActionResultData.model_validate(envelope.data)
    outcome = "succeeded" if data.success else "failed"
    row.summary = f"answer {envelope.type}: {outcome}" + (
        f" ({data.error.type}: {data.error.message})" if data.error is not None else ""
    )
    task_id = envelope.task_id or data.task_id
    answer = PendingAnswer(
        correlation_id=envelope.correlation_id or "",
        event_id=envelope.id,
        at=envelope.time,
        success=data.success,
        error=_error(data.error),
        agent_name=source_agent,
    )
    if task_id is None:
        return Unmatched(answer, envelope.type), not data.success
    row.task_id = task_id
    fold.task(answer.patch(task_id, envelope.type))
    return None, not data.success


def _task(data: Any, envelope: Envelope, **values: Any) -> TaskPatch:
    return TaskPatch(
        task_id=data.task_id,
        at=envelope.time,
        first_seen_at=envelope.time,
        plan_id=data.plan_id or envelope.plan_id,
        agent_name=data.agent_name,
        agent_id=data.agent_id,
        cause=envelope.type,
        cause_at=envelope.time,
        **values,
    )


def _plan(data: Any, envelope: Envelope, **values: Any) -> PlanPatch:
    return PlanPatch(
        plan_id=data.plan_id,
        at=envelope.time,
        started_at=envelope.time,
        agent_name=data.agent_name,
        agent_id=data.agent_id,
        cause=envelope.type,
        cause_at=envelope.time,
        **values,
    )


def _system_event(envelope: Envelope, data: SystemEventData, row: EventRow, fold: Reading) -> bool:
    """Fold a system event; whether it reports an error."""
    at = envelope.time
    plan_id = getattr(data, "plan_id", None)
    if plan_id is not None:
        row.plan_id = row.plan_id or plan_id
    task_id = getattr(data, "task_id", None)
    if task_id is not None:
        row.task_id = task_id
    if row.agent_name is None:
        row.agent_name = getattr(data, "agent_name", None) or getattr(data, "name", None)
    match data:
        case TaskStartedData():
            row.summary = f"task {data.event_type} started by {data.agent_name or '?'}"
            fold.task(
                _task(
                    data,
                    envelope,
                    event_type=data.event_type,
                    correlation_id=data.correlation_id,
                    parent_task_id=data.parent_task_id,
                    live_status=TaskStatus.RUNNING.value,
                    live_at=at,
                    started_at=at,
                    starts=1,
                )
            )
        case TaskProgressData():
            live = data.status if data.status in _LIVE_TASK_STATUSES else None
            shown = f"{data.progress:.0%}" if data.progress is not None else data.status.value
            row.summary = f"task progress {shown}" + (f": {data.message}" if data.message else "")
            fold.task(
                _task(
                    data,
                    envelope,
                    live_status=live.value if live is not None else None,
                    live_at=at if live is not None else None,
                    progress=data.progress,
                    message=data.message,
                    progress_at=at,
                )
            )
        case TaskDelegatedData():
            _delegated(data, envelope, row, fold)
        case TaskCompletedData():
            row.summary = f"task completed by {data.agent_name or '?'}" + _took(
                data.duration_seconds
            )
            fold.task(
                _task(
                    data,
                    envelope,
                    final_status=TaskStatus.COMPLETED.value,
                    final_at=at,
                    reported_duration_ms=_ms(data.duration_seconds),
                )
            )
        case TaskFailedData():
            row.summary = f"task failed ({data.error.type}: {data.error.message})"
            fold.task(
                _task(
                    data,
                    envelope,
                    final_status=TaskStatus.FAILED.value,
                    final_at=at,
                    error=_error(data.error),
                    reported_duration_ms=_ms(data.duration_seconds),
                )
            )
            return True
        case TaskTimeoutData():
            row.summary = (
                f"task failed: nobody answered its question within {data.timeout_seconds} s"
            )
            fold.task(
                _task(
                    data,
                    envelope,
                    final_status=TaskStatus.FAILED.value,
                    final_at=data.deadline,
                    error={
                        "type": data.reason or HITL_TIMEOUT_REASON,
                        "message": (
                            f"nobody answered the question {data.correlation_id or ''} within "
                            f"{data.timeout_seconds} s"
                        ),
                        "details": {
                            "correlation_id": data.correlation_id,
                            "request_id": data.request_id,
                            "deadline": data.deadline.isoformat(),
                        },
                    },
                )
            )
            return True
        case PlanStartedData():
            row.summary = f"plan started for {data.goal_event}" + (
                f" ({data.plan_type})" if data.plan_type else ""
            )
            fold.plan(
                _plan(
                    data,
                    envelope,
                    plan_type=data.plan_type,
                    plan_type_version=data.plan_type_version,
                    goal_event=data.goal_event,
                    goal_task_id=data.goal_task_id,
                    session_id=data.session_id,
                    parent_plan_id=data.parent_plan_id,
                    initial_state=data.initial_state,
                    live_status="running",
                    live_at=at,
                    state=data.initial_state,
                    state_at=at if data.initial_state is not None else None,
                )
            )
        case PlanStateChangedData():
            trigger = f" on {data.trigger_event}" if data.trigger_event else ""
            row.summary = f"{data.from_state or '·'} -> {data.to_state}{trigger}"
            plan_live = data.status.value if data.status.value in ("running", "paused") else None
            fold.plan(
                _plan(
                    data,
                    envelope,
                    live_status=plan_live,
                    live_at=at if plan_live is not None else None,
                    state=data.to_state,
                    state_step=data.step if data.step is not None else -1,
                    state_at=at,
                )
            )
        case PlanPausedData():
            row.summary = "plan paused" + (f": {data.reason}" if data.reason else "")
            fold.plan(
                _plan(data, envelope, live_status="paused", live_at=at, pause_reason=data.reason)
            )
        case PlanResumedData():
            row.summary = "plan resumed"
            fold.plan(_plan(data, envelope, live_status="running", live_at=at))
        case PlanCompletedData():
            row.summary = "plan completed" + (f" in {data.final_state}" if data.final_state else "")
            fold.plan(
                _plan(
                    data,
                    envelope,
                    final_status="completed",
                    final_at=at,
                    final_state=data.final_state,
                )
            )
        case PlanFailedData():
            row.summary = f"plan failed ({data.error.type}: {data.error.message})"
            fold.plan(
                _plan(
                    data,
                    envelope,
                    final_status="failed",
                    final_at=at,
                    final_state=data.final_state,
                    error=_error(data.error),
                )
            )
            return True
        case _:
            row.summary = envelope.type
    return False


def _delegated(data: TaskDelegatedData, envelope: Envelope, row: EventRow, fold: Reading) -> None:
    at = envelope.time
    group = data.parallel_group_id
    count = len(data.sub_tasks)
    row.summary = (
        f"task fanned out to {count} sub-tasks" if group else f"task delegated {count} sub-task(s)"
    )
    plan_id = data.plan_id or envelope.plan_id
    fold.task(_task(data, envelope, live_status=TaskStatus.WAITING.value, live_at=at))
    for sub in data.sub_tasks:
        fold.task(
            TaskPatch(
                task_id=sub.sub_task_id,
                at=at,
                first_seen_at=at,
                plan_id=plan_id,
                parent_task_id=data.task_id,
                parallel_group_id=group,
                event_type=sub.event_type,
                response_event=sub.response_event,
                correlation_id=sub.sub_task_id,
                cause=envelope.type,
                cause_at=at,
            )
        )
    if group is not None:
        fold.group(
            GroupPatch(
                group_id=group,
                task_id=data.task_id,
                created_at=at,
                expected=count,
                plan_id=plan_id,
                agent_name=data.agent_name,
            )
        )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _took(seconds: float | None) -> str:
    return "" if seconds is None else f" in {seconds * 1000:.0f} ms"
