"""The cards: ``/.well-known/agent-card.json`` and ``/a2a/{agent}/.well-known/agent-card.json``,
signed when a signing key is set, and the key set that verifies them (``/.well-known/jwks.json``).

Served without a token (what a caller without one may see, see
:mod:`disco_gateway.cards.service`); with one, an agent's card is the agent as
the caller's tenant sees it. The extended card is the A2A method
``GetExtendedAgentCard`` (token required).

Clients keep a card and revalidate it, as the A2A specification recommends:
each card comes with an ``ETag`` (of the bytes served: a card's signature is
deterministic, so the same card has the same tag on every instance),
``Cache-Control`` (``public`` without a token, ``private`` with one: it is then
the caller's tenant's view; ``max-age`` is ``DISCO_GATEWAY_CARD_MAX_AGE_SECONDS``)
and ``Last-Modified`` (the latest change of the registrations it shows); an
``If-None-Match`` naming the current ``ETag`` gets ``304``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from disco_common.a2a_cards import A2AAgentCard
from disco_common.ids import AgentName
from disco_gateway.a2a.door import authenticate
from disco_gateway.cards import service
from disco_gateway.cards.schemas import CardKeys
from disco_gateway.cards.signing import JWKS_PATH
from disco_gateway.errors import AgentNotFound, no_agent_message
from disco_gateway.state import GatewayState
from disco_service import NOT_MODIFIED_RESPONSE, cacheable_json, error_responses

__all__ = ["router"]

router = APIRouter(tags=["A2A: agent cards"])


def _served(
    request: Request,
    state: GatewayState,
    card: A2AAgentCard,
    last_modified: datetime | None,
    *,
    private: bool,
    vary: str | None = None,
) -> Response:
    """``card`` signed, with the headers that let a client keep it and revalidate it."""
    signed = state.require_a2a().card_signer.sign(card)
    return cacheable_json(
        request,
        signed,
        max_age_seconds=state.settings.card_max_age_seconds,
        private=private,
        last_modified=last_modified,
        vary=vary,
    )


@router.get(
    "/.well-known/agent-card.json",
    summary="The gateway's A2A agent card",
    response_model=A2AAgentCard,
    response_model_by_alias=True,
    response_model_exclude_none=True,
    responses=NOT_MODIFIED_RESPONSE,
)
async def get_gateway_card(request: Request) -> Response:
    """The gateway's card (A2A v1.0): the agents outside callers may see, as skills
    ``<agent>/<skill>``; each agent's own card is at ``/a2a/{agent}/.well-known/...``."""
    state = GatewayState.of(request)
    card, last_modified = await service.gateway_card(state.require_a2a().directory, state.settings)
    return _served(request, state, card, last_modified, private=False)


@router.get(
    "/a2a/{agent}/.well-known/agent-card.json",
    summary="An agent's A2A agent card",
    responses={**error_responses(401, 404), **NOT_MODIFIED_RESPONSE},
    response_model=A2AAgentCard,
    response_model_by_alias=True,
    response_model_exclude_none=True,
)
async def get_agent_card(
    request: Request, agent: Annotated[AgentName, Path(description="The agent's name.")]
) -> Response:
    """The agent's card (A2A v1.0): its skills with their input and output JSON Schemas (in
    the ``urn:disco:a2a:extension:event-contracts:v1`` extension), both bindings at the
    gateway's public URL, and the bearer scheme (not required for a public agent)."""
    state = GatewayState.of(request)
    tenant_id = None
    if request.headers.get("authorization"):
        tenant_id = (await authenticate(state, agent, request.headers)).tenant_id
    found = await service.agent_card(
        state.require_a2a().directory, state.settings, agent, tenant_id=tenant_id
    )
    if found is None:
        raise AgentNotFound(no_agent_message(agent, tenant_id))
    card, last_modified = found
    return _served(
        request, state, card, last_modified, private=tenant_id is not None, vary="Authorization"
    )


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
