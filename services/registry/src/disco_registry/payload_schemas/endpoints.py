"""``/v1/schemas``: publish, read and validate against payload schema versions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status

from disco_common.ids import SemVer
from disco_common.pagination import Page, PageQuery
from disco_common.registry import (
    PayloadSchema,
    PayloadSchemaCreate,
    SchemaName,
    SchemaValidationRequest,
    SchemaValidationResult,
)
from disco_registry.errors import SchemaNotFound
from disco_registry.payload_schemas import service
from disco_registry.state import RegistryState
from disco_service import IdentityDep, SessionDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/schemas", tags=["schemas"], responses=error_responses(401, 403))

NamePath = Annotated[SchemaName, Path(description="The schema's name.")]
VersionPath = Annotated[SemVer, Path(description="The exact semantic version.")]


@router.post(
    "",
    response_model=PayloadSchema,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": PayloadSchema, "description": "The same content was already stored"},
        **error_responses(409, 413),
    },
    summary="Publish a payload schema version",
)
async def create_schema(
    body: PayloadSchemaCreate, identity: IdentityDep, request: Request, response: Response
) -> PayloadSchema:
    """Store an immutable version: 201 when new, 200 when the same content was already
    stored under it, 409 when different content was."""
    # Its own unit of work (not SessionDep): the tenant's AsyncAPI documents this
    # instance keeps are dropped once it committed, before the response.
    state = RegistryState.of(request)
    async with state.require_database().unit_of_work(
        identity.tenant_id, identity.user_id
    ) as session:
        stored, created = await service.create_schema(
            session, tenant_id=identity.tenant_id, schema=body
        )
    if created:
        state.wrote_schema(identity.tenant_id)
    else:
        response.status_code = status.HTTP_200_OK
    return stored


@router.get(
    "/{name}",
    response_model=PayloadSchema,
    responses=error_responses(404),
    summary="The latest version of a schema",
)
async def get_latest(name: NamePath, session: SessionDep, identity: IdentityDep) -> PayloadSchema:
    """The version with the highest semver precedence (pre-releases rank below releases)."""
    found = await service.get_latest(session, tenant_id=identity.tenant_id, name=name)
    if found is None:
        raise SchemaNotFound(f"no payload schema named {name!r}")
    return found


@router.get(
    "/{name}/versions",
    response_model=Page[PayloadSchema],
    responses=error_responses(400),
    summary="List a schema's versions",
)
async def list_versions(
    name: NamePath,
    query: Annotated[PageQuery, Query()],
    session: SessionDep,
    identity: IdentityDep,
) -> Page[PayloadSchema]:
    """Every version of ``name``, highest precedence first (an empty page if none)."""
    return await service.list_versions(
        session, tenant_id=identity.tenant_id, name=name, query=query
    )


@router.get(
    "/{name}/versions/{version}",
    response_model=PayloadSchema,
    responses=error_responses(404),
    summary="One version of a schema",
)
async def get_version(
    name: NamePath, version: VersionPath, session: SessionDep, identity: IdentityDep
) -> PayloadSchema:
    """The stored version."""
    found = await service.get_version(
        session, tenant_id=identity.tenant_id, name=name, version=version
    )
    if found is None:
        raise SchemaNotFound(f"no payload schema {name}@{version}")
    return found


@router.post(
    "/{name}/versions/{version}/validate",
    response_model=SchemaValidationResult,
    responses=error_responses(404, 413),
    summary="Validate a payload against a schema version",
)
async def validate(
    name: NamePath,
    version: VersionPath,
    body: SchemaValidationRequest,
    session: SessionDep,
    identity: IdentityDep,
) -> SchemaValidationResult:
    """Whether ``payload`` fits the version, with every violation (a 200 either way)."""
    return await service.validate_against(
        session, tenant_id=identity.tenant_id, name=name, version=version, payload=body.payload
    )
