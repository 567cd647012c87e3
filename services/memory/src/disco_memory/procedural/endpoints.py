"""``/v1/memory/procedural``: procedures (what to do in a situation)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from disco_common.ids import Id
from disco_common.memory import (
    Procedure,
    ProcedureCreate,
    ProcedureHit,
    ProcedureListQuery,
    ProcedureSearchQuery,
    ProcedureUpdate,
)
from disco_common.pagination import Page
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.deps import RuntimeDep
from disco_memory.procedural import service
from disco_memory.procedural.repository import ProcedureRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(
    prefix="/v1/memory/procedural", tags=["procedural memory"], route_class=JSONRoute
)


async def _repository(session: SessionDep, identity: IdentityDep) -> ProcedureRepository:
    return ProcedureRepository(session, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[ProcedureRepository, Depends(_repository)]


@router.post(
    "",
    response_model=Procedure,
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(413, 422, 503),
)
async def create_procedure(
    body: ProcedureCreate, repository: RepositoryDep, runtime: RuntimeDep, response: Response
) -> Procedure:
    """Store a procedure (private to the caller, or public to the tenant)."""
    procedure = await service.create_procedure(repository, runtime, body)
    set_etag(response, procedure.version)
    return procedure


@router.get("", response_model=Page[Procedure], responses=error_responses(400))
async def list_procedures(
    repository: RepositoryDep, query: Annotated[ProcedureListQuery, Query()]
) -> Page[Procedure]:
    """The procedures the caller may read (its own and the tenant's public), newest first."""
    return await service.list_procedures(repository, query)


@router.post("/search", response_model=list[ProcedureHit], responses=error_responses(422, 503))
async def search_procedures(
    body: ProcedureSearchQuery, repository: RepositoryDep, runtime: RuntimeDep
) -> list[ProcedureHit]:
    """The procedures most relevant to a situation, best first (for ``agent_id``: its own
    and those for every agent)."""
    return await service.search_procedures(repository, runtime, body)


@router.get("/{procedure_id}", response_model=Procedure, responses=error_responses(404))
async def get_procedure(
    procedure_id: Id, repository: RepositoryDep, response: Response
) -> Procedure:
    """A procedure the caller may read."""
    procedure = await service.get_procedure(repository, procedure_id)
    if procedure is None:
        raise NotFound(f"no procedure {procedure_id!r} you can read")
    set_etag(response, procedure.version)
    return procedure


@router.patch(
    "/{procedure_id}", response_model=Procedure, responses=error_responses(404, 409, 413, 422, 503)
)
async def update_procedure(
    procedure_id: Id,
    body: ProcedureUpdate,
    repository: RepositoryDep,
    runtime: RuntimeDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> Procedure:
    """Change some fields of one of the caller's procedures."""
    procedure = await service.update_procedure(
        repository,
        runtime,
        procedure_id,
        body,
        expected=expected_version(body.expected_version, if_match),
    )
    if procedure is None:
        raise NotFound(f"you have no procedure {procedure_id!r}")
    set_etag(response, procedure.version)
    return procedure


@router.delete(
    "/{procedure_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def delete_procedure(procedure_id: Id, repository: RepositoryDep) -> None:
    """Delete one of the caller's procedures."""
    if not await service.delete_procedure(repository, procedure_id):
        raise NotFound(f"you have no procedure {procedure_id!r}")
