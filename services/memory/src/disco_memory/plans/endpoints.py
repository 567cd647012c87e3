"""``/v1/memory/plans``: plan records."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from disco_common.ids import Id
from disco_common.memory import PlanCreate, PlanListQuery, PlanRecord, PlanStatusUpdate
from disco_common.pagination import Page
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.plans import service
from disco_memory.plans.repository import PlanRepository
from disco_memory.sessions.repository import SessionRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/plans", tags=["plans"], route_class=JSONRoute)


async def _repository(session: SessionDep, identity: IdentityDep) -> PlanRepository:
    return PlanRepository(session, identity.tenant_id)


RepositoryDep = Annotated[PlanRepository, Depends(_repository)]


@router.post(
    "",
    response_model=PlanRecord,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(409, 413, 422),
)
async def create_plan(
    body: PlanCreate,
    repository: RepositoryDep,
    session: SessionDep,
    identity: IdentityDep,
    response: Response,
) -> PlanRecord:
    """Create a plan record; its session (created if new) counts it."""
    sessions = SessionRepository(session, identity.tenant_id, identity.user_id)
    record = await service.create_plan(repository, sessions, body, user_id=identity.user_id)
    set_etag(response, record.version)
    return record


@router.get("", response_model=Page[PlanRecord], responses=error_responses(400))
async def list_plans(
    repository: RepositoryDep,
    identity: IdentityDep,
    query: Annotated[PlanListQuery, Query()],
) -> Page[PlanRecord]:
    """The caller's plans, newest first; filter by status, session and parent plan."""
    return await service.list_plans(repository, query, user_id=identity.user_id)


@router.get("/{plan_id}", response_model=PlanRecord, responses=error_responses(404))
async def get_plan(plan_id: Id, repository: RepositoryDep, response: Response) -> PlanRecord:
    """A plan record."""
    record = await service.get_plan(repository, plan_id)
    if record is None:
        raise NotFound(f"no plan {plan_id!r}")
    set_etag(response, record.version)
    return record


@router.patch("/{plan_id}", response_model=PlanRecord, responses=error_responses(404, 409, 422))
async def update_plan_status(
    plan_id: Id,
    body: PlanStatusUpdate,
    repository: RepositoryDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> PlanRecord:
    """Move a plan to another status (pause with a reason, resume, complete, fail).

    A completed or failed plan does not move again (409).
    """
    record = await service.update_status(
        repository, plan_id, body, expected=expected_version(body.expected_version, if_match)
    )
    if record is None:
        raise NotFound(f"no plan {plan_id!r}")
    set_etag(response, record.version)
    return record
