"""``/v1/memory/working``: a plan's key/value working memory."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from disco_common.ids import Id
from disco_common.memory import DeleteResult, MemoryKey, WorkingMemoryEntry, WorkingMemoryPut
from disco_common.pagination import Page, PageQuery
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.working import service
from disco_memory.working.repository import WorkingMemoryRepository
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/working", tags=["working memory"], route_class=JSONRoute)


async def _repository(session: SessionDep, identity: IdentityDep) -> WorkingMemoryRepository:
    return WorkingMemoryRepository(session, identity.tenant_id)


RepositoryDep = Annotated[WorkingMemoryRepository, Depends(_repository)]


@router.put(
    "/{plan_id}/{key}",
    response_model=WorkingMemoryEntry,
    responses=error_responses(409, 413),
)
async def put_key(
    plan_id: Id,
    key: MemoryKey,
    body: WorkingMemoryPut,
    repository: RepositoryDep,
    identity: IdentityDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> WorkingMemoryEntry:
    """Write one key of the plan's working memory.

    With ``expected_version`` (or ``If-Match``) the write succeeds only if the
    key is still at that version (``0``: only if absent); otherwise 409 and
    nothing changes. The answer's ``ETag`` is the new version.
    """
    entry = await service.put_entry(
        repository,
        plan_id,
        key,
        body,
        user_id=identity.user_id,
        expected=expected_version(body.expected_version, if_match),
    )
    set_etag(response, entry.version)
    return entry


@router.get("/{plan_id}/{key}", response_model=WorkingMemoryEntry, responses=error_responses(404))
async def get_key(
    plan_id: Id, key: MemoryKey, repository: RepositoryDep, response: Response
) -> WorkingMemoryEntry:
    """Read one key (404 when absent or expired); the ``ETag`` is its version."""
    entry = await service.get_entry(repository, plan_id, key)
    if entry is None:
        raise NotFound(f"plan {plan_id!r} has no working-memory key {key!r}")
    set_etag(response, entry.version)
    return entry


@router.get("/{plan_id}", response_model=Page[WorkingMemoryEntry], responses=error_responses(400))
async def list_keys(
    plan_id: Id, repository: RepositoryDep, query: Annotated[PageQuery, Query()]
) -> Page[WorkingMemoryEntry]:
    """The plan's live keys, in key order."""
    return await service.list_entries(repository, plan_id, query)


@router.delete(
    "/{plan_id}/{key}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def delete_key(plan_id: Id, key: MemoryKey, repository: RepositoryDep) -> None:
    """Forget one key (404 when it was not there)."""
    if not await service.delete_entry(repository, plan_id, key):
        raise NotFound(f"plan {plan_id!r} has no working-memory key {key!r}")


@router.delete("/{plan_id}", response_model=DeleteResult)
async def clear_plan(plan_id: Id, repository: RepositoryDep) -> DeleteResult:
    """Forget every key of the plan; says how many there were."""
    return DeleteResult(deleted=await service.clear_plan(repository, plan_id))
