"""``/v1/tracker/plan-types``: register and read plan types (state machines, per version)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from disco_common.ids import EventType, SemVer
from disco_common.pagination import Page, PageQuery
from disco_common.plans import PlanRegistrationRequest
from disco_common.tracker import PlanTypeRecord
from disco_service import IdentityDep, SessionDep, error_responses
from disco_tracker.errors import PlanTypeNotFound
from disco_tracker.plan_types import service
from disco_tracker.plan_types.repository import PlanTypeRepository

__all__ = ["router"]

router = APIRouter(
    prefix="/v1/tracker/plan-types", tags=["plan types"], responses=error_responses(401, 403)
)

PlanTypePath = Annotated[EventType, Path(description="The plan type, e.g. `trip`.")]


@router.post(
    "",
    response_model=PlanTypeRecord,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": PlanTypeRecord, "description": "The same definition was already stored"},
        **error_responses(409, 413),
    },
    summary="Register a version of a plan type",
)
async def register_plan_type(
    body: PlanRegistrationRequest, session: SessionDep, identity: IdentityDep, response: Response
) -> PlanTypeRecord:
    """Store a plan type's state machine under a version: 201 when new, 200 when the same
    definition was already stored under it, 409 ``plan_type_version_conflict`` when another
    was. Planners register theirs when they start."""
    record, created = await service.register_plan_type(
        PlanTypeRepository(session, identity.tenant_id), body
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return record


@router.get(
    "",
    response_model=Page[PlanTypeRecord],
    responses=error_responses(400),
    summary="List plan types",
)
async def list_plan_types(
    query: Annotated[PageQuery, Query()], session: SessionDep, identity: IdentityDep
) -> Page[PlanTypeRecord]:
    """The latest version of each of the tenant's plan types, by name."""
    return await service.list_plan_types(PlanTypeRepository(session, identity.tenant_id), query)


@router.get(
    "/{plan_type}",
    response_model=PlanTypeRecord,
    responses=error_responses(404),
    summary="Get a plan type",
)
async def get_plan_type(
    plan_type: PlanTypePath,
    session: SessionDep,
    identity: IdentityDep,
    version: Annotated[
        SemVer | None, Query(description="A registered version (default: the latest).")
    ] = None,
) -> PlanTypeRecord:
    """A plan type's state machine: the latest version by semver precedence, or ``version``."""
    found = await service.get_plan_type(
        PlanTypeRepository(session, identity.tenant_id), plan_type, version
    )
    if found is None:
        which = f"version {version} of " if version else ""
        raise PlanTypeNotFound(f"no {which}plan type {plan_type!r} is registered")
    return found
