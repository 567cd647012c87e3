"""``/v1/tracker/hitl``: the tenant's questions to humans and where they stand."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from disco_common.ids import Id
from disco_common.pagination import Page
from disco_common.tracker import HumanInputWaitQuery, HumanInputWaitRecord
from disco_service import NotFound, SessionDep, error_responses
from disco_tracker.hitl.repository import HitlRepository
from disco_tracker.hitl.service import get_waits, list_waits

router = APIRouter(prefix="/v1/tracker/hitl", tags=["human in the loop"])


@router.get("", response_model=Page[HumanInputWaitRecord], responses=error_responses(400))
async def list_questions(
    session: SessionDep, query: Annotated[HumanInputWaitQuery, Depends()]
) -> Page[HumanInputWaitRecord]:
    """Questions to humans of the caller's tenant, oldest first, filterable by status."""
    return await list_waits(HitlRepository(session), query)


@router.get(
    "/{correlation_id}", response_model=list[HumanInputWaitRecord], responses=error_responses(404)
)
async def get_question(session: SessionDep, correlation_id: Id) -> list[HumanInputWaitRecord]:
    """The question(s) with ``correlation_id``: waiting, answered, timed out or answered late."""
    waits = await get_waits(HitlRepository(session), correlation_id)
    if not waits:
        raise NotFound(f"no question to a human with correlation id {correlation_id!r}")
    return waits
