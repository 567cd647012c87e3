"""Plans: where they stand, their state machines, timelines and sub-plan trees."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from sqlalchemy import RowMapping

from disco_common.ids import UtcDatetime
from disco_common.pagination import Page, PageQuery
from disco_common.system_events import PlanStateChangedData
from disco_common.tracker import (
    PlanProgress,
    PlanProgressQuery,
    PlanTransition,
    PlanTreeNode,
    PlanTypeRecord,
    PlanView,
    TaskProgress,
    TaskProgressQuery,
    TimelineEntry,
)
from disco_service import Paginator
from disco_tracker.plans.repository import PlanRepository
from disco_tracker.tasks.repository import TaskRepository
from disco_tracker.tasks.service import list_plan_tasks

__all__ = [
    "get_plan_view",
    "get_tree",
    "list_plans",
    "list_tasks",
    "list_timeline",
    "plan_progress",
]

# Sort key: (started_at, plan_id), newest first.
_PLAN_PAGES = Paginator("plans", tuple[UtcDatetime, str])
# Sort key: (at, sequence), in the order things happened.
_TIMELINE_PAGES = Paginator("plan_timeline", tuple[UtcDatetime, int])


def plan_progress(row: RowMapping) -> PlanProgress:
    """A plan row as :class:`PlanProgress`."""
    values: dict[str, Any] = dict(row)
    values["task_counts"] = values.get("task_counts") or {}
    return PlanProgress.model_validate(values)


async def list_plans(repository: PlanRepository, query: PlanProgressQuery) -> Page[PlanProgress]:
    """One page of the tenant's plans, newest first, filtered.

    Raises:
        InvalidCursor: the cursor was not issued by this list with these filters.
    """
    request = _PLAN_PAGES.open(query)
    rows = await repository.list(
        status=query.status.value if query.status is not None else None,
        plan_type=query.plan_type,
        session_id=query.session_id,
        parent_plan_id=query.parent_plan_id,
        root_only=query.root_only,
        agent_name=query.agent_name,
        started_after=query.started_after,
        started_before=query.started_before,
        after=request.after,
        limit=request.fetch,
    )
    return request.page(
        rows, key=lambda row: (row["started_at"], row["plan_id"]), item=plan_progress
    )


def _transition(move: dict[str, Any]) -> PlanTransition | None:
    try:
        data = PlanStateChangedData.model_validate(move["data"])
    except ValidationError:
        return None  # its data was not kept (too large) or is not a state change
    return PlanTransition(
        step=data.step,
        from_state=data.from_state,
        to_state=data.to_state,
        trigger_event=data.trigger_event,
        at=move["at"],
    )


async def get_plan_view(repository: PlanRepository, plan_id: str) -> PlanView | None:
    """A plan, its state machine (when its type is registered) and its moves (None if unknown).

    The definition is the registered version the plan started with, else the
    latest version of its plan type.
    """
    row = await repository.view(plan_id)
    if row is None:
        return None
    plan = plan_progress(row)
    definition = row["definition"]
    moves = [m for m in map(_transition, row["moves"] or []) if m is not None]
    # In history order when the planner said it (moves of one handling share a time).
    moves.sort(key=lambda m: (m.step if m.step is not None else -1, m.at))
    return PlanView(
        plan=plan,
        definition=PlanTypeRecord.model_validate(definition) if definition else None,
        transitions=moves,
    )


async def get_tree(repository: PlanRepository, plan_id: str) -> PlanTreeNode | None:
    """The plan and its sub-plans, nested (None if unknown)."""
    rows = await repository.tree(plan_id)
    if not rows:
        return None
    nodes: dict[str, PlanTreeNode] = {}
    root: PlanTreeNode | None = None
    for row in rows:  # level by level: a parent comes before its children
        node = PlanTreeNode.model_validate(dict(row))
        nodes[node.plan_id] = node
        parent = nodes.get(row["parent_plan_id"]) if row["depth"] > 0 else None
        if parent is not None:
            parent.children.append(node)
        elif root is None:
            root = node
    return root


async def list_timeline(
    repository: PlanRepository, plan_id: str, query: PageQuery
) -> Page[TimelineEntry] | None:
    """One page of a plan's timeline, in the order things happened (None if the plan is unknown).

    Raises:
        InvalidCursor: the cursor was not issued for this plan's timeline.
    """
    request = _TIMELINE_PAGES.open(query, scope=plan_id)
    rows = await repository.timeline(plan_id, after=request.after, limit=request.fetch)
    if not rows and request.after is None and not await repository.exists(plan_id):
        return None
    return request.page(
        rows,
        key=lambda row: (row["at"], row["sequence"]),
        item=lambda row: TimelineEntry.model_validate(dict(row)),
    )


async def list_tasks(
    plans: PlanRepository, tasks: TaskRepository, plan_id: str, query: TaskProgressQuery
) -> Page[TaskProgress] | None:
    """One page of a plan's tasks in the order they were asked for (None if the plan is unknown).

    Raises:
        InvalidCursor: the cursor was not issued for this plan's list with these filters.
    """
    page = await list_plan_tasks(tasks, plan_id, query)
    if not page.items and query.cursor is None and not await plans.exists(plan_id):
        return None
    return page
