"""The gateway's A2A cards: its own, each agent's, and what a caller without a token may see.

Cards are built with the one card builder (:mod:`disco_common.a2a_cards`, through
:class:`~disco.a2a.A2AGatewayHelper`) from registrations read from the registry.
Without a token, a caller sees the agents of ``DISCO_GATEWAY_PUBLIC_TENANT`` that
are public: registered with visibility ``public``, or named in
``DISCO_GATEWAY_PUBLIC_AGENTS`` — or all of them with
``DISCO_GATEWAY_CARD_VISIBILITY=all`` (dev). A public agent's card requires no
token; every other card declares the bearer scheme.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from disco.a2a import A2AGatewayHelper
from disco_common.a2a_cards import A2AAgentCard, A2ACardSource
from disco_common.registry import Visibility
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.settings import GatewaySettings

__all__ = ["agent_card", "gateway_card", "last_change", "no_public_agents", "shown_without_token"]


def shown_without_token(source: A2ACardSource, settings: GatewaySettings) -> bool:
    """Whether a caller without a token may see ``source``'s card (see the module docs)."""
    return (
        source.visibility is Visibility.PUBLIC
        or settings.is_public_agent(source.name)
        or settings.card_visibility == "all"
    )


def last_change(sources: Sequence[A2ACardSource]) -> datetime | None:
    """When the latest of the registrations a card shows changed (its ``Last-Modified``)."""
    return max((s.updated_at for s in sources if s.updated_at is not None), default=None)


async def gateway_card(
    directory: AgentDirectory, settings: GatewaySettings
) -> tuple[A2AAgentCard, datetime | None]:
    """The gateway's card: the agents a caller without a token may see, as skills; with
    when the latest of them changed.

    With none of them public, its description says so, and how a caller reaches
    the others and how an agent is made public (rather than "Agents: none yet"
    while agents run).
    """
    sources = await directory.agents(settings.public_tenant)
    shown = [source for source in sources if shown_without_token(source, settings)]
    card = A2AGatewayHelper.gateway_card(
        shown, public_url=settings.gateway_public_url, grpc_address=settings.gateway_grpc_address
    )
    if not shown:
        description = no_public_agents(settings.gateway_public_url, settings.public_tenant)
        card = card.model_copy(update={"description": description})
    return card, last_change(shown)


def no_public_agents(public_url: str, public_tenant: str) -> str:
    """The public card's description when no agent is public."""
    base = public_url.rstrip("/")
    return (
        "disco's A2A gateway. No agent is public, so this card lists none: the agents "
        f"take a bearer token, each at {base}/a2a/<agent> with its own card, and the "
        f"extended card (GET {base}/a2a/extendedAgentCard with a token) lists the "
        "token's tenant's agents. To make an agent public (listed here and callable "
        "without a token), name it in the gateway's DISCO_GATEWAY_PUBLIC_AGENTS "
        f"(comma-separated) and run it in tenant {public_tenant!r} (DISCO_GATEWAY_PUBLIC_TENANT)."
    )


async def agent_card(
    directory: AgentDirectory,
    settings: GatewaySettings,
    name: str,
    *,
    tenant_id: str | None,
) -> tuple[A2AAgentCard, datetime | None] | None:
    """Agent ``name``'s card for a caller of ``tenant_id`` (None: without a token), with
    when its registration changed; or None."""
    source = await directory.agent(tenant_id or settings.public_tenant, name)
    if source is None or (tenant_id is None and not shown_without_token(source, settings)):
        return None
    card = A2AGatewayHelper.agent_to_card(
        source,
        public_url=settings.gateway_public_url,
        requires_token=not settings.is_public_agent(source.name),
        tenant=tenant_id,
        grpc_address=settings.gateway_grpc_address,
    )
    return card, source.updated_at
