"""``/v1/memory/dedup``: the envelopes each consumer group handled (durable dedup)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response, status

from disco_common.dedup import (
    DedupCheck,
    DedupChecked,
    DedupMark,
    DedupMarkPut,
    DedupMarksMade,
    DedupMarksPut,
)
from disco_common.ids import Id
from disco_memory.dedup import service
from disco_memory.dedup.repository import DedupBatches, DedupRepository
from disco_memory.deps import EngineDep
from disco_service import IdentityDep, JSONRoute, NotFound, SessionDep, error_responses

router = APIRouter(prefix="/v1/memory/dedup", tags=["dedup"], route_class=JSONRoute)


async def _repository(session: SessionDep, identity: IdentityDep) -> DedupRepository:
    return DedupRepository(session, identity.tenant_id)


RepositoryDep = Annotated[DedupRepository, Depends(_repository)]


async def _batches(engine: EngineDep, identity: IdentityDep) -> DedupBatches:
    return DedupBatches(engine, identity.tenant_id, identity.user_id)


BatchesDep = Annotated[DedupBatches, Depends(_batches)]


@router.post("/{group}/check", response_model=DedupChecked, responses=error_responses(422))
async def check_marks(group: Id, body: DedupCheck, batches: BatchesDep) -> DedupChecked:
    """Which of these envelopes ``group`` handled: one question for a fetched batch."""
    return await service.check_marks(batches, group, body)


@router.post("/{group}/marks", response_model=DedupMarksMade, responses=error_responses(422))
async def put_marks(group: Id, body: DedupMarksPut, batches: BatchesDep) -> DedupMarksMade:
    """Remember that ``group`` handled these envelopes (live marks are kept as they are)."""
    return await service.put_marks(batches, group, body)


@router.get("/{group}/{event_id}", response_model=DedupMark, responses=error_responses(404))
async def get_mark(group: Id, event_id: Id, repository: RepositoryDep) -> DedupMark:
    """Whether ``group`` handled ``event_id``: the mark, or 404 (never, or it expired)."""
    mark = await service.get_mark(repository, group, event_id)
    if mark is None:
        raise NotFound(f"group {group!r} has no live mark for envelope {event_id!r}")
    return mark


@router.put(
    "/{group}/{event_id}",
    response_model=DedupMark,
    status_code=status.HTTP_201_CREATED,
    responses={200: {"description": "The mark was there already (kept unchanged)."}},
)
async def put_mark(
    group: Id,
    event_id: Id,
    body: DedupMarkPut,
    repository: RepositoryDep,
    identity: IdentityDep,
    response: Response,
) -> DedupMark:
    """Remember that ``group`` handled ``event_id``: 201 when new, 200 when it was there."""
    mark, created = await service.put_mark(
        repository, group, event_id, body, user_id=identity.user_id
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return mark
