"""``GET /v1/agents/{agent_id}/card``: an A2A v1.0 AgentCard for a registered agent.

Served with ``ETag``, ``Cache-Control`` (private: it is the caller's tenant's view) and
``Last-Modified``; ``304`` to an ``If-None-Match`` naming the current ``ETag``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from disco_common.a2a_cards import A2AAgentCard
from disco_registry.cards import service
from disco_registry.deps import AgentIdPath, SettingsDep
from disco_registry.errors import AgentNotFound
from disco_service import (
    NOT_MODIFIED_RESPONSE,
    IdentityDep,
    SessionDep,
    cacheable_json,
    error_responses,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/agents", tags=["cards"], responses=error_responses(401, 403))


@router.get(
    "/{agent_id}/card",
    response_model=A2AAgentCard,
    response_model_by_alias=True,
    response_model_exclude_none=True,
    responses={**error_responses(404), **NOT_MODIFIED_RESPONSE},
    summary="The agent's A2A AgentCard",
)
async def get_card(
    request: Request,
    agent_id: AgentIdPath,
    session: SessionDep,
    identity: IdentityDep,
    settings: SettingsDep,
) -> Response:
    """A2A v1.0 card: skills from capabilities, the gateway as its interfaces, and each
    skill's event contracts (full JSON Schemas) in the
    ``urn:disco:a2a:extension:event-contracts:v1`` extension's params."""
    found = await service.card_for(
        session, tenant_id=identity.tenant_id, agent_id=agent_id, settings=settings
    )
    if found is None:
        raise AgentNotFound(f"no agent {agent_id!r} is visible to you")
    card, updated_at = found
    return cacheable_json(
        request,
        card,
        max_age_seconds=settings.card_max_age_seconds,
        private=True,
        last_modified=updated_at,
        vary="Authorization",
    )
