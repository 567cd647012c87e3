"""Patches: what one or more envelopes say about a plan, a task or a fan-out group.

Every field has a merge rule that makes the result independent of the order
the envelopes arrive in (and of how they are cut into batches):

- ids and names are set once (the first non-null value stays; events agree on them);
- ``*_at`` times of the first sighting take the earliest, ``updated_at`` the latest;
- the live (non-final) status follows the latest event that states one
  (ties: the greater status name), with what travels with it (a pause reason);
- the final status comes from the earliest final event (ties: ``failed``), so a
  HITL timeout at its deadline stays the outcome although the worker's answer on
  its timeout path comes later;
- a plan's state follows the move with the highest ``(step, time)``;
- counters add up (every envelope is applied once: the timeline deduplicates).

The same rules are written in SQL in :mod:`disco_tracker.ingest.repository`
(``ON CONFLICT DO UPDATE``): a batch is folded here first, one patch per row,
then merged into the stored row there (the patches go to SQL as JSON as they
are: their fields are the columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol, Self, TypeVar

__all__ = [
    "EventCount",
    "Fold",
    "GroupPatch",
    "PendingAnswer",
    "PlanPatch",
    "TaskPatch",
    "earlier_final",
    "later_live",
]


def _first(current: Any, new: Any) -> Any:
    return current if current is not None else new


def _min(current: datetime | None, new: datetime | None) -> datetime | None:
    if current is None:
        return new
    if new is None:
        return current
    return min(current, new)


def later_live(
    current_at: datetime | None, current: str | None, new_at: datetime | None, new: str | None
) -> bool:
    """Whether a live status stated at ``new_at`` replaces the one stated at ``current_at``."""
    if new_at is None or new is None:
        return False
    if current_at is None or current is None:
        return True
    return (new_at, new) > (current_at, current)


def earlier_final(
    current_at: datetime | None, current: str | None, new_at: datetime | None, new: str | None
) -> bool:
    """Whether a final status reached at ``new_at`` replaces the one reached at ``current_at``."""
    if new_at is None or new is None:
        return False
    if current_at is None or current is None:
        return True
    return new_at < current_at or (new_at == current_at and new > current)


def _later_state(
    current: tuple[int, datetime | None, str | None], new: tuple[int, datetime | None, str | None]
) -> bool:
    if new[2] is None or new[1] is None:
        return False
    if current[2] is None or current[1] is None:
        return True
    return new > current


@dataclass(slots=True, kw_only=True)
class _Lifecycle:
    """What plan and task patches share: the rules for ids, live and final status, times.

    Subclasses name their columns for each rule (:attr:`SET_ONCE`, and the
    columns that travel with the live and the final status); the repository
    writes the same rules in SQL from the same names.
    """

    SET_ONCE: ClassVar[tuple[str, ...]] = ()
    """Columns set by the first envelope that has them."""
    WITH_LIVE: ClassVar[tuple[str, ...]] = ()
    """Columns that change with the live status (from the same envelope)."""
    WITH_FINAL: ClassVar[tuple[str, ...]] = ()
    """Columns that change with the final status (from the same envelope)."""

    at: datetime
    """The latest time of the envelopes folded in (the row's ``updated_at``)."""
    live_status: str | None = None
    live_at: datetime | None = None
    final_status: str | None = None
    final_at: datetime | None = None
    error: dict[str, Any] | None = None
    cause: str | None = None
    """The event type of the latest envelope folded in that changed the row (for the feed)."""
    cause_at: datetime | None = None

    def _merge_lifecycle(self, other: Self) -> None:
        for name in self.SET_ONCE:
            if getattr(self, name) is None:
                setattr(self, name, getattr(other, name))
        if later_live(self.live_at, self.live_status, other.live_at, other.live_status):
            self.live_status, self.live_at = other.live_status, other.live_at
            for name in self.WITH_LIVE:
                setattr(self, name, getattr(other, name))
        if earlier_final(self.final_at, self.final_status, other.final_at, other.final_status):
            self.final_status, self.final_at = other.final_status, other.final_at
            for name in self.WITH_FINAL:
                setattr(self, name, getattr(other, name))
        if other.cause is not None and (
            self.cause_at is None or (other.cause_at or other.at) >= self.cause_at
        ):
            self.cause, self.cause_at = other.cause, other.cause_at or other.at
        self.at = max(self.at, other.at)


@dataclass(slots=True, kw_only=True)
class PlanPatch(_Lifecycle):
    """What envelopes say about one plan."""

    SET_ONCE = (
        "plan_type",
        "plan_type_version",
        "goal_event",
        "goal_task_id",
        "session_id",
        "parent_plan_id",
        "agent_name",
        "agent_id",
        "initial_state",
    )
    WITH_LIVE = ("pause_reason",)
    WITH_FINAL = ("final_state", "error")

    plan_id: str
    started_at: datetime
    """The earliest time of the envelopes folded in."""
    plan_type: str | None = None
    plan_type_version: str | None = None
    goal_event: str | None = None
    goal_task_id: str | None = None
    session_id: str | None = None
    parent_plan_id: str | None = None
    agent_name: str | None = None
    agent_id: str | None = None
    initial_state: str | None = None
    pause_reason: str | None = None
    final_state: str | None = None
    state: str | None = None
    state_step: int = -1
    state_at: datetime | None = None

    @classmethod
    def touch(cls, plan_id: str, at: datetime) -> Self:
        """A patch that only says the plan exists and was active at ``at``."""
        return cls(plan_id=plan_id, at=at, started_at=at)

    def merge(self, other: PlanPatch) -> None:
        """Fold ``other`` (about the same plan) into this patch."""
        self._merge_lifecycle(other)
        if _later_state(
            (self.state_step, self.state_at, self.state),
            (other.state_step, other.state_at, other.state),
        ):
            self.state, self.state_step, self.state_at = (
                other.state,
                other.state_step,
                other.state_at,
            )
        self.started_at = min(self.started_at, other.started_at)


@dataclass(slots=True, kw_only=True)
class TaskPatch(_Lifecycle):
    """What envelopes say about one task (a request and its answer)."""

    SET_ONCE = (
        "plan_id",
        "parent_task_id",
        "parallel_group_id",
        "event_type",
        "response_event",
        "correlation_id",
        "agent_name",
        "agent_id",
        "requested_by",
    )
    WITH_FINAL = ("error", "reported_duration_ms")

    task_id: str
    first_seen_at: datetime
    plan_id: str | None = None
    parent_task_id: str | None = None
    parallel_group_id: str | None = None
    event_type: str | None = None
    response_event: str | None = None
    correlation_id: str | None = None
    agent_name: str | None = None
    agent_id: str | None = None
    requested_by: str | None = None
    progress: float | None = None
    message: str | None = None
    progress_at: datetime | None = None
    reported_duration_ms: float | None = None
    starts: int = 0
    requested_at: datetime | None = None
    started_at: datetime | None = None

    def merge(self, other: TaskPatch) -> None:
        """Fold ``other`` (about the same task) into this patch."""
        self._merge_lifecycle(other)
        if other.progress_at is not None and (
            self.progress_at is None or other.progress_at > self.progress_at
        ):
            self.progress, self.message, self.progress_at = (
                other.progress,
                other.message,
                other.progress_at,
            )
        self.starts += other.starts
        self.requested_at = _min(self.requested_at, other.requested_at)
        self.started_at = _min(self.started_at, other.started_at)
        self.first_seen_at = min(self.first_seen_at, other.first_seen_at)


@dataclass(slots=True)
class GroupPatch:
    """A fan-out group as ``task.delegated`` announced it."""

    group_id: str
    task_id: str
    created_at: datetime
    expected: int
    plan_id: str | None = None
    agent_name: str | None = None

    def merge(self, other: GroupPatch) -> None:
        """Fold ``other`` (the same group announced again) into this patch."""
        self.plan_id = _first(self.plan_id, other.plan_id)
        self.agent_name = _first(self.agent_name, other.agent_name)
        self.expected = max(self.expected, other.expected)
        self.created_at = min(self.created_at, other.created_at)


@dataclass(slots=True)
class PendingAnswer:
    """An answer without a task id whose request the tracker has not seen yet."""

    correlation_id: str
    event_id: str
    at: datetime
    success: bool
    error: dict[str, Any] | None = None
    agent_name: str | None = None

    def patch(self, task_id: str, response_event: str | None = None) -> TaskPatch:
        """What this answer says about the task it turned out to answer."""
        return TaskPatch(
            task_id=task_id,
            at=self.at,
            first_seen_at=self.at,
            correlation_id=self.correlation_id,
            response_event=response_event,
            agent_name=self.agent_name,
            final_status="completed" if self.success else "failed",
            final_at=self.at,
            error=self.error,
            cause=response_event,
            cause_at=self.at,
        )


@dataclass(slots=True)
class EventCount:
    """Envelopes of one type on one topic in one minute."""

    minute: datetime
    topic: str
    event_type: str
    count: int = 0
    errors: int = 0


@dataclass(slots=True)
class Fold:
    """The patches of a batch, one per row, merged as they come."""

    plans: dict[str, PlanPatch] = field(default_factory=dict)
    tasks: dict[str, TaskPatch] = field(default_factory=dict)
    groups: dict[str, GroupPatch] = field(default_factory=dict)
    counts: dict[tuple[datetime, str, str], EventCount] = field(default_factory=dict)

    def touch(self, plan_id: str, at: datetime) -> None:
        """Note that plan ``plan_id`` was active at ``at`` (an envelope of it passed)."""
        existing = self.plans.get(plan_id)
        if existing is None:
            self.plans[plan_id] = PlanPatch.touch(plan_id, at)
        elif at > existing.at:
            existing.at = at
        elif at < existing.started_at:
            existing.started_at = at

    def plan(self, patch: PlanPatch) -> None:
        """Merge what an envelope says about a plan."""
        _put(self.plans, patch.plan_id, patch)

    def task(self, patch: TaskPatch) -> None:
        """Merge what an envelope says about a task."""
        _put(self.tasks, patch.task_id, patch)

    def group(self, patch: GroupPatch) -> None:
        """Merge what an envelope says about a fan-out group."""
        _put(self.groups, patch.group_id, patch)

    def count(self, at: datetime, topic: str, event_type: str, *, error: bool) -> None:
        minute = at.replace(second=0, microsecond=0)
        key = (minute, topic, event_type)
        counter = self.counts.get(key)
        if counter is None:
            counter = self.counts[key] = EventCount(minute, topic, event_type)
        counter.count += 1
        if error:
            counter.errors += 1


class _Mergeable(Protocol):
    def merge(self, other: Self, /) -> None: ...


MergeableT = TypeVar("MergeableT", bound=_Mergeable)


def _put(rows: dict[str, MergeableT], key: str, patch: MergeableT) -> None:
    existing = rows.get(key)
    if existing is None:
        rows[key] = patch
    else:
        existing.merge(patch)
