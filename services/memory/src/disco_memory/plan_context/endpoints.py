"""``/v1/memory/plan-context``: Planners' saved plan contexts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response, status

from disco_common.ids import Id
from disco_common.memory import PlanContextRecord, PlanContextStore
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.deps import EngineDep
from disco_memory.plan_context import service
from disco_memory.plan_context.repository import PlanContextRepository
from disco_service import IdentityDep, JSONRoute, NotFound, error_responses

router = APIRouter(prefix="/v1/memory/plan-context", tags=["plan context"], route_class=JSONRoute)


async def _repository(engine: EngineDep, identity: IdentityDep) -> PlanContextRepository:
    return PlanContextRepository(engine, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[PlanContextRepository, Depends(_repository)]


@router.get(
    "/by-correlation/{correlation_id}",
    response_model=PlanContextRecord,
    responses=error_responses(404),
)
async def get_plan_by_correlation(
    correlation_id: Id, repository: RepositoryDep, response: Response
) -> PlanContextRecord:
    """The context of the plan waiting for an answer with ``correlation_id``."""
    record = await service.find_by_correlation(repository, correlation_id)
    if record is None:
        raise NotFound(f"no plan context waits for correlation id {correlation_id!r}")
    set_etag(response, record.version)
    return record


@router.put(
    "/{plan_id}", response_model=PlanContextRecord, responses=error_responses(409, 413, 422)
)
async def store_plan_context(
    plan_id: Id,
    body: PlanContextStore,
    repository: RepositoryDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> PlanContextRecord:
    """Save (create or replace) a plan context; guarded by ``expected_version``/``If-Match``."""
    record = await service.store_context(
        repository, plan_id, body, expected=expected_version(body.expected_version, if_match)
    )
    set_etag(response, record.version)
    return record


@router.get("/{plan_id}", response_model=PlanContextRecord, responses=error_responses(404))
async def get_plan_context(
    plan_id: Id, repository: RepositoryDep, response: Response
) -> PlanContextRecord:
    """A plan's context."""
    record = await service.get_context(repository, plan_id)
    if record is None:
        raise NotFound(f"no plan context for plan {plan_id!r}")
    set_etag(response, record.version)
    return record


@router.delete("/{plan_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
async def delete_plan_context(plan_id: Id, repository: RepositoryDep) -> None:
    """Forget a plan's context; 404 when it was not there."""
    if not await service.delete_context(repository, plan_id):
        raise NotFound(f"no plan context for plan {plan_id!r}")
