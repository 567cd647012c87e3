"""A2A v1.0 agent cards from registrations, with the official ``a2a-sdk`` types.

Mapping (disco → A2A):

- agent ``name``/``description``/``version`` → the card's;
- the gateway (``DISCO_GATEWAY_URL``) → ``supportedInterfaces``: JSON-RPC and
  HTTP+JSON at ``{gateway}/a2a/{name}``, protocol version 1.0, ``tenant`` set
  to the agent's tenant;
- each capability → a skill (``id`` and ``name`` = task name, its description,
  the agent's tags plus the request event type, JSON in and out);
- the event contracts — request and response event types, topics and full
  JSON Schemas per skill — do not fit A2A's skill fields (no schema slot in
  v1.0), so they travel as an A2A extension declared in
  ``capabilities.extensions`` (:data:`EVENT_CONTRACTS_EXTENSION`), whose
  ``params.skills.<skill id>`` holds them. Clients that do not know the
  extension ignore it (``required`` is false).
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from pydantic import JsonValue
from sqlalchemy.ext.asyncio import AsyncSession

from disco_registry.cards.repository import CardRepository, CardSource
from disco_registry.cards.schemas import A2AAgentCard

__all__ = ["EVENT_CONTRACTS_EXTENSION", "build_card", "card_for"]

EVENT_CONTRACTS_EXTENSION = "urn:disco:a2a:extension:event-contracts:v1"
"""The A2A extension URI under which a card carries each skill's event contracts."""

JSON_MEDIA_TYPE = "application/json"


def _contracts(source: CardSource) -> dict[str, JsonValue]:
    skills: dict[str, JsonValue] = {}
    for capability in source.capabilities:
        skills[capability.task_name] = {
            "request": capability.consumed_event.model_dump(mode="json", exclude_none=True),
            "responses": [
                event.model_dump(mode="json", exclude_none=True)
                for event in capability.produced_events
            ],
        }
    return {"agent_id": source.agent_id, "skills": skills}


def build_card(source: CardSource, *, gateway_url: str) -> dict[str, Any]:
    """The card of ``source`` as A2A JSON (camelCase)."""
    base = gateway_url.rstrip("/")
    url = f"{base}/a2a/{source.name}"
    interfaces = [
        AgentInterface(
            url=url,
            protocol_binding=binding.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
            tenant=source.tenant_id,
        )
        for binding in (TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON)
    ]
    skills = [
        AgentSkill(
            id=capability.task_name,
            name=capability.task_name,
            description=capability.description or f"{source.name}: {capability.task_name}",
            tags=[*source.tags, capability.consumed_event.event_type],
            input_modes=[JSON_MEDIA_TYPE],
            output_modes=[JSON_MEDIA_TYPE],
        )
        for capability in source.capabilities
    ]
    contracts = _contracts(source)
    card = AgentCard(
        name=source.name,
        description=source.description or f"disco agent {source.name}",
        version=source.version,
        supported_interfaces=interfaces,
        provider=AgentProvider(organization=source.tenant_id, url=base),
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=[
                AgentExtension(
                    uri=EVENT_CONTRACTS_EXTENSION,
                    description=(
                        "disco event contracts: for each skill, the request event (type, "
                        "topic, JSON Schema) and the response events it answers with"
                    ),
                    required=False,
                )
            ],
        ),
        default_input_modes=[JSON_MEDIA_TYPE],
        default_output_modes=[JSON_MEDIA_TYPE],
        skills=skills,
    )
    document: dict[str, Any] = MessageToDict(card)
    # Protobuf's Struct would turn every JSON number into a double (maxLength: 10.0):
    # the contracts go into the JSON as they are instead.
    document["capabilities"]["extensions"][0]["params"] = contracts
    return document


async def card_for(
    session: AsyncSession, *, tenant_id: str, agent_id: str, gateway_url: str
) -> A2AAgentCard | None:
    """The card of the visible agent ``agent_id``, or None."""
    source = await CardRepository(session).source(tenant_id=tenant_id, agent_id=agent_id)
    if source is None:
        return None
    return A2AAgentCard.model_validate(build_card(source, gateway_url=gateway_url))
