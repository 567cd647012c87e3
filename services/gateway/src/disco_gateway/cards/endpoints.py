"""The cards: ``/.well-known/agent-card.json`` and ``/a2a/{agent}/.well-known/agent-card.json``,
signed when a signing key is set, and the key set that verifies them (``/.well-known/jwks.json``).

Served without a token (what a caller without one may see, see
:mod:`disco_gateway.cards.service`); with one, an agent's card is the agent as
the caller's tenant sees it. The extended card is the A2A method
``GetExtendedAgentCard`` (token required).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request

from disco_common.a2a import A2AAgentCard
from disco_common.ids import AgentName
from disco_gateway.a2a.door import authenticate
from disco_gateway.cards import service
from disco_gateway.cards.schemas import CardKeys
from disco_gateway.cards.signing import JWKS_PATH
from disco_gateway.errors import AgentNotFound, no_agent_message
from disco_gateway.state import GatewayState
from disco_service import error_responses

__all__ = ["router"]

router = APIRouter(tags=["A2A: agent cards"])


@router.get(
    "/.well-known/agent-card.json",
    summary="The gateway's A2A agent card",
    response_model=A2AAgentCard,
    response_model_by_alias=True,
    response_model_exclude_none=True,
)
async def get_gateway_card(request: Request) -> A2AAgentCard:
    """The gateway's card (A2A v1.0): the agents outside callers may see, as skills
    ``<agent>/<skill>``; each agent's own card is at ``/a2a/{agent}/.well-known/...``."""
    state = GatewayState.of(request)
    a2a = state.require_a2a()
    return a2a.card_signer.sign(await service.gateway_card(a2a.directory, state.settings))


@router.get(
    "/a2a/{agent}/.well-known/agent-card.json",
    summary="An agent's A2A agent card",
    responses=error_responses(401, 404),
    response_model=A2AAgentCard,
    response_model_by_alias=True,
    response_model_exclude_none=True,
)
async def get_agent_card(
    request: Request, agent: Annotated[AgentName, Path(description="The agent's name.")]
) -> A2AAgentCard:
    """The agent's card (A2A v1.0): its skills with their input and output JSON Schemas (in
    the ``urn:disco:a2a:extension:event-contracts:v1`` extension), both bindings at the
    gateway's public URL, and the bearer scheme (not required for a public agent)."""
    state = GatewayState.of(request)
    tenant_id = None
    if request.headers.get("authorization"):
        tenant_id = (await authenticate(state, agent, request.headers)).tenant_id
    a2a = state.require_a2a()
    card = await service.agent_card(a2a.directory, state.settings, agent, tenant_id=tenant_id)
    if card is None:
        raise AgentNotFound(no_agent_message(agent, tenant_id))
    return a2a.card_signer.sign(card)


@router.get(
    JWKS_PATH,
    summary="The public keys that verify the agent cards' signatures",
    response_model=CardKeys,
)
async def get_card_keys(request: Request) -> CardKeys:
    """A JSON Web Key Set (RFC 7517) of the key that signs the cards, named in each
    signature's protected header (``kid``, ``jku``); no keys when cards are not signed
    (``DISCO_GATEWAY_CARD_SIGNING_KEY`` unset)."""
    return CardKeys.model_validate(GatewayState.of(request).require_a2a().card_signer.jwks())
