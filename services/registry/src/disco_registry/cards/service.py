"""A2A v1.0 agent cards from registrations, with the one card builder (disco_common.a2a_cards).

The gateway builds the same cards from the same registrations: interfaces at
``DISCO_GATEWAY_PUBLIC_URL``, a skill per capability with its schemas in the
``urn:disco:a2a:extension:event-contracts:v1`` extension, the bearer scheme
(required unless the agent is one of ``DISCO_GATEWAY_PUBLIC_AGENTS``). The
card's interfaces name the caller's tenant (the ``/{tenant}/…`` binding): the
gateway runs a call in the caller's tenant, whoever registered the agent.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.a2a_cards import A2AAgentCard, A2ACardSource, build_agent_card
from disco_common.registry import Visibility
from disco_registry.cards.repository import CardRepository
from disco_registry.settings import RegistrySettings

__all__ = ["card_for"]


async def card_for(
    session: AsyncSession, *, tenant_id: str, agent_id: str, settings: RegistrySettings
) -> tuple[A2AAgentCard, datetime] | None:
    """The card of the visible agent ``agent_id`` as ``tenant_id`` calls it, with when its
    registration last changed; or None."""
    source = await CardRepository(session).source(tenant_id=tenant_id, agent_id=agent_id)
    if source is None:
        return None
    card = build_agent_card(
        A2ACardSource(
            name=source.name,
            description=source.description,
            version=source.version,
            tags=source.tags,
            visibility=Visibility(source.visibility),
            tenant_id=source.tenant_id,
            capabilities=source.capabilities,
        ),
        public_url=settings.gateway_public_url,
        requires_token=not settings.is_public_agent(source.name),
        tenant=tenant_id,
        grpc_address=settings.gateway_grpc_address,
    )
    return card, source.updated_at
