"""The A2A side of a running gateway instance: what its routes, cards and publish bridge use
(made in :func:`disco_gateway.a2a.service.a2a_lifespan`)."""

from __future__ import annotations

from dataclasses import dataclass

from disco_gateway.a2a.handler import GatewayRequestHandler
from disco_gateway.a2a.runtime import A2ARuntime
from disco_gateway.agents.service import AgentDirectory
from disco_gateway.cards.signing import CardSigner
from disco_gateway.publish.service import Publisher

__all__ = ["A2AService"]


@dataclass
class A2AService:
    """What the A2A routes, the cards and the publish bridge use while the instance runs."""

    runtime: A2ARuntime
    handler: GatewayRequestHandler
    publisher: Publisher

    @property
    def directory(self) -> AgentDirectory:
        return self.runtime.directory

    @property
    def card_signer(self) -> CardSigner:
        return self.runtime.card_signer
