"""``/v1/memory/task-context``: Workers' saved task contexts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status

from disco_common.ids import Id
from disco_common.memory import TaskContextRecord, TaskContextStore
from disco_common.pagination import Page
from disco_memory._shared import IfMatch, expected_version, set_etag
from disco_memory.deps import EngineDep
from disco_memory.task_context import service
from disco_memory.task_context.repository import TaskContextListing, TaskContextRepository
from disco_memory.task_context.schemas import TaskContextListQuery
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/task-context", tags=["task context"], route_class=JSONRoute)


async def _repository(engine: EngineDep, identity: IdentityDep) -> TaskContextRepository:
    return TaskContextRepository(engine, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[TaskContextRepository, Depends(_repository)]


async def _listing(session: SessionDep, identity: IdentityDep) -> TaskContextListing:
    return TaskContextListing(session, identity.tenant_id)


ListingDep = Annotated[TaskContextListing, Depends(_listing)]


@router.get("", response_model=Page[TaskContextRecord], responses=error_responses(400))
async def list_task_contexts(
    listing: ListingDep, query: Annotated[TaskContextListQuery, Query()]
) -> Page[TaskContextRecord]:
    """The live task contexts of a plan, oldest first."""
    return await service.list_for_plan(listing, query)


@router.get(
    "/by-subtask/{sub_task_id}", response_model=TaskContextRecord, responses=error_responses(404)
)
async def get_task_by_sub_task(
    sub_task_id: Id, repository: RepositoryDep, response: Response
) -> TaskContextRecord:
    """The context of the task that delegated ``sub_task_id`` (or asked the question
    with that correlation id): how a result restores its parent task."""
    record = await service.find_by_sub_task(repository, sub_task_id)
    if record is None:
        raise NotFound(f"no live task context waits for sub-task {sub_task_id!r}")
    set_etag(response, record.version)
    return record


@router.put(
    "/{task_id}", response_model=TaskContextRecord, responses=error_responses(409, 413, 422)
)
async def store_task_context(
    task_id: Id,
    body: TaskContextStore,
    repository: RepositoryDep,
    response: Response,
    if_match: Annotated[str | None, IfMatch] = None,
) -> TaskContextRecord:
    """Save (create or replace) a task context.

    Each of its sub-task ids finds it as soon as this returns. With
    ``expected_version``/``If-Match`` it is a guarded update (409 when stale).
    """
    record = await service.store_context(
        repository, task_id, body, expected=expected_version(body.expected_version, if_match)
    )
    set_etag(response, record.version)
    return record


@router.get("/{task_id}", response_model=TaskContextRecord, responses=error_responses(404))
async def get_task_context(
    task_id: Id, repository: RepositoryDep, response: Response
) -> TaskContextRecord:
    """A task's context (404 when absent or expired)."""
    record = await service.get_context(repository, task_id)
    if record is None:
        raise NotFound(f"no live task context for task {task_id!r}")
    set_etag(response, record.version)
    return record


@router.delete("/{task_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404))
async def delete_task_context(task_id: Id, repository: RepositoryDep) -> None:
    """Forget a task's context (when the task completed); 404 when it was not there."""
    if not await service.delete_context(repository, task_id):
        raise NotFound(f"no live task context for task {task_id!r}")
