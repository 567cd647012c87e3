"""``/v1/tracker/plans``: plans, their tasks, timelines and sub-plan trees."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from disco_common.pagination import Page, PageQuery
from disco_common.tracker import (
    PlanProgress,
    PlanProgressQuery,
    PlanTreeNode,
    PlanView,
    TaskProgress,
    TaskProgressQuery,
    TimelineEntry,
)
from disco_service import IdentityDep, SessionDep, error_responses
from disco_tracker.deps import PlanIdPath
from disco_tracker.errors import PlanNotFound
from disco_tracker.plans import service
from disco_tracker.plans.repository import PlanRepository
from disco_tracker.tasks.repository import TaskRepository

__all__ = ["router"]

router = APIRouter(prefix="/v1/tracker/plans", tags=["plans"], responses=error_responses(401, 403))


def _missing(plan_id: str) -> PlanNotFound:
    return PlanNotFound(f"no plan {plan_id!r} is known to the tracker")


@router.get("", response_model=Page[PlanProgress], responses=error_responses(400))
async def list_plans(
    query: Annotated[PlanProgressQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[PlanProgress]:
    """The tenant's plans, newest first: by status, plan type, session, agent (the planner, or
    an agent that did one of its tasks), start time, parent plan, or only top-level ones."""
    return await service.list_plans(PlanRepository(session, identity.tenant_id), query)


@router.get("/{plan_id}", response_model=PlanView, responses=error_responses(404))
async def get_plan(plan_id: PlanIdPath, session: SessionDep, identity: IdentityDep) -> PlanView:
    """Where a plan stands (state, status, task counts), its registered state machine and
    its moves through it so far."""
    view = await service.get_plan_view(PlanRepository(session, identity.tenant_id), plan_id)
    if view is None:
        raise _missing(plan_id)
    return view


@router.get(
    "/{plan_id}/tasks", response_model=Page[TaskProgress], responses=error_responses(400, 404)
)
async def list_tasks(
    plan_id: PlanIdPath,
    query: Annotated[TaskProgressQuery, Query()],
    session: SessionDep,
    identity: IdentityDep,
) -> Page[TaskProgress]:
    """A plan's tasks (its actions, what its agents did and delegated), in the order they
    were asked for, with agents, durations and outcomes."""
    page = await service.list_tasks(
        PlanRepository(session, identity.tenant_id),
        TaskRepository(session, identity.tenant_id),
        plan_id,
        query,
    )
    if page is None:
        raise _missing(plan_id)
    return page


@router.get(
    "/{plan_id}/timeline", response_model=Page[TimelineEntry], responses=error_responses(400, 404)
)
async def timeline(
    plan_id: PlanIdPath,
    query: Annotated[PageQuery, Query()],
    session: SessionDep,
    identity: IdentityDep,
) -> Page[TimelineEntry]:
    """Every envelope of the plan in the order it happened: time, type, agent, ids, a summary."""
    page = await service.list_timeline(PlanRepository(session, identity.tenant_id), plan_id, query)
    if page is None:
        raise _missing(plan_id)
    return page


@router.get("/{plan_id}/tree", response_model=PlanTreeNode, responses=error_responses(404))
async def tree(plan_id: PlanIdPath, session: SessionDep, identity: IdentityDep) -> PlanTreeNode:
    """The plan and its sub-plans, nested (at most 1,000 plans)."""
    root = await service.get_tree(PlanRepository(session, identity.tenant_id), plan_id)
    if root is None:
        raise _missing(plan_id)
    return root
