"""``/v1/discover``: who can do X (by capability, consumed or produced event, or text)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from disco_common.registry import DiscoveredAgent, DiscoveryQuery
from disco_registry.discovery import service
from disco_registry.state import RegistryState
from disco_service import Identity, IdentityDep, error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/discover", tags=["discovery"], responses=error_responses(401, 403))

# The answer is JSON the database built in DiscoveredAgent's shape, sent as it is
# (response_model still documents it in OpenAPI).
_JSON = "application/json"


async def _discover(request: Request, identity: Identity, query: DiscoveryQuery) -> Response:
    # The state is read here rather than through dependencies: discovery is the
    # registry's hottest route, and each dependency FastAPI resolves costs.
    state = RegistryState.of(request)
    answer = await service.discover_json(
        state.require_database().engine,
        state.discovery_cache,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        query=query,
    )
    return Response(content=answer, media_type=_JSON)


_DESCRIPTION = (
    "Live agents visible to the caller that match every given criterion, one entry per "
    "agent name with its instance count and the full request and response schema of each "
    "capability: enough to build a valid request from the answer alone."
)


@router.get(
    "",
    response_model=list[DiscoveredAgent],
    responses=error_responses(422),
    summary="Discover agents (query parameters)",
    description=_DESCRIPTION,
)
async def discover_get(
    query: Annotated[DiscoveryQuery, Query()], request: Request, identity: IdentityDep
) -> Response:
    return await _discover(request, identity, query)


@router.post(
    "",
    response_model=list[DiscoveredAgent],
    responses=error_responses(413, 422),
    summary="Discover agents (JSON body)",
    description=_DESCRIPTION,
)
async def discover_post(query: DiscoveryQuery, request: Request, identity: IdentityDep) -> Response:
    return await _discover(request, identity, query)
