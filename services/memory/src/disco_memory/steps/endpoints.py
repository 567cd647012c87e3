"""``/v1/memory/steps``: each consumer group's step records, per envelope (``disco.step``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response, status

from disco_common.ids import Id
from disco_common.steps import StepJournal, StepRecord, StepRecordPut
from disco_memory.deps import EngineDep
from disco_memory.steps import service
from disco_memory.steps.repository import StepRepository
from disco_service import IdentityDep, JSONRoute, error_responses

router = APIRouter(prefix="/v1/memory/steps", tags=["step records"], route_class=JSONRoute)


async def _repository(engine: EngineDep, identity: IdentityDep) -> StepRepository:
    return StepRepository(engine, identity.tenant_id, identity.user_id)


RepositoryDep = Annotated[StepRepository, Depends(_repository)]


@router.get("/{group}/{envelope_id}", response_model=StepJournal)
async def get_journal(group: Id, envelope_id: Id, repository: RepositoryDep) -> StepJournal:
    """The live steps ``group`` recorded while handling ``envelope_id`` (none: empty)."""
    return await service.journal(repository, group, envelope_id)


@router.post(
    "/{group}/{envelope_id}",
    response_model=StepRecord,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"description": "The step was recorded already: the first record, unchanged."},
        **error_responses(413, 422),
    },
)
async def record_step(
    group: Id,
    envelope_id: Id,
    body: StepRecordPut,
    repository: RepositoryDep,
    response: Response,
) -> StepRecord:
    """Record a step's result: 201 when new; 200 with the stored record when the step was
    recorded already (the first record wins)."""
    record, created = await service.record_step(repository, group, envelope_id, body)
    if not created:
        response.status_code = status.HTTP_200_OK
    return record
