"""Plans: create (touching the session), read, move between statuses, list."""

from __future__ import annotations

from disco_common.ids import UtcDatetime, new_id
from disco_common.memory import (
    CONTEXT_MAX_BYTES,
    PlanCreate,
    PlanListQuery,
    PlanRecord,
    PlanStatusUpdate,
)
from disco_common.pagination import Page
from disco_common.plans import PlanStatus
from disco_memory._shared import VersionConflict, limited_json
from disco_memory.plans.repository import PlanRepository
from disco_memory.sessions.repository import SessionRepository
from disco_memory.sessions.service import touch_session
from disco_service import Conflict, Paginator, UnprocessableEntity

__all__ = ["PlanExists", "PlanFinished", "create_plan", "get_plan", "list_plans", "update_status"]


class PlanExists(Conflict):
    """409: a plan with that id exists already."""

    code = "plan_exists"


class PlanFinished(Conflict):
    """409: the plan completed or failed; its status no longer changes."""

    code = "plan_finished"


_PLAN_PAGES = Paginator("plans", tuple[UtcDatetime, str])


async def create_plan(
    repository: PlanRepository,
    sessions: SessionRepository,
    body: PlanCreate,
    *,
    user_id: str,
) -> PlanRecord:
    """Create a plan record; its session (created if new) counts it and is touched.

    Raises:
        UnprocessableEntity: ``parent_plan_id`` names no plan of the tenant.
        PlanExists: ``plan_id`` is taken.
        PayloadTooLarge: ``goal_data`` is over 4 MiB encoded.
    """
    goal_data_json = limited_json(body.goal_data, limit=CONTEXT_MAX_BYTES, what="goal_data")
    if body.parent_plan_id is not None and await repository.get(body.parent_plan_id) is None:
        raise UnprocessableEntity(
            f"parent_plan_id {body.parent_plan_id!r} names no plan: create the parent first",
            code="unknown_parent_plan",
        )
    plan_id = body.plan_id or new_id()
    row = await repository.insert(
        plan_id,
        user_id=user_id,
        goal_event=body.goal_event,
        goal_data_json=goal_data_json,
        response_event=body.response_event,
        plan_type=body.plan_type,
        status=body.status.value,
        final=body.status.is_final,
        session_id=body.session_id,
        parent_plan_id=body.parent_plan_id,
    )
    if row is None:
        raise PlanExists(f"plan {plan_id!r} exists already")
    if body.session_id is not None:
        await touch_session(sessions, body.session_id, plans=1)
    return PlanRecord.model_validate(dict(row))


async def get_plan(repository: PlanRepository, plan_id: str) -> PlanRecord | None:
    """One plan record, or None."""
    row = await repository.get(plan_id)
    return PlanRecord.model_validate(dict(row)) if row is not None else None


async def update_status(
    repository: PlanRepository, plan_id: str, body: PlanStatusUpdate, *, expected: int | None
) -> PlanRecord | None:
    """Move a plan to ``body.status``; None when there is no such plan.

    Setting the status it already has changes nothing (a redelivered event is
    harmless).

    Raises:
        VersionConflict: ``expected`` is not the stored version.
        PlanFinished: the plan completed or failed and would move elsewhere.
    """
    row = await repository.get(plan_id, for_update=True)
    if row is None:
        return None
    current = PlanRecord.model_validate(dict(row))
    if expected is not None and expected != current.version:
        raise VersionConflict(f"plan {plan_id!r}", expected=expected, current=current.version)
    if current.status == body.status and current.status_reason == body.reason:
        return current
    if current.status.is_final and current.status != body.status:
        raise PlanFinished(
            f"plan {plan_id!r} is {current.status.value}; a finished plan cannot become "
            f"{body.status.value}"
        )
    updated = await repository.update_status(
        plan_id, status=body.status.value, reason=body.reason, final=body.status.is_final
    )
    return PlanRecord.model_validate(dict(updated))


async def list_plans(
    repository: PlanRepository, query: PlanListQuery, *, user_id: str
) -> Page[PlanRecord]:
    """One page of the caller's plans, newest first.

    Raises:
        InvalidCursor: ``query.cursor`` was not issued for this list and these filters.
    """
    request = _PLAN_PAGES.open(query)
    rows = await repository.list(
        user_id=user_id,
        status=query.status.value if isinstance(query.status, PlanStatus) else None,
        session_id=query.session_id,
        parent_plan_id=query.parent_plan_id,
        after=request.after,
        limit=request.fetch,
    )
    items = [PlanRecord.model_validate(dict(row)) for row in rows]
    return request.page(items, key=lambda plan: (plan.created_at, plan.plan_id))
