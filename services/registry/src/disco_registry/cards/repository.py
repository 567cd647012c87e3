"""What a card is built from: one visible agent with its resolved capabilities."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.registry import DiscoveredCapability

__all__ = ["CardRepository", "CardSource"]

_SOURCE = text(
    "SELECT a.tenant_id, a.agent_id, a.name, a.version, a.description, a.tags, "
    "a.visibility, a.discovery, a.updated_at FROM registry.agents a "
    "WHERE a.agent_id = :agent AND (a.tenant_id = :tenant OR a.visibility = 'public') "
    "ORDER BY (a.tenant_id = :tenant) DESC, a.tenant_id LIMIT 1"
)


class CardSource:
    """An agent as a card needs it."""

    def __init__(self, row: Any) -> None:
        self.tenant_id: str = row.tenant_id
        self.agent_id: str = row.agent_id
        self.name: str = row.name
        self.version: str = row.version
        self.description: str = row.description
        self.tags: list[str] = list(row.tags)
        self.visibility: str = row.visibility
        self.updated_at: datetime = row.updated_at
        self.capabilities = [DiscoveredCapability.model_validate(cap) for cap in row.discovery]


class CardRepository:
    """Reads card sources for the session's tenant."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def source(self, *, tenant_id: str, agent_id: str) -> CardSource | None:
        """The agent ``agent_id`` (own tenant first, else public), or None."""
        row = (
            await self._session.execute(_SOURCE, {"tenant": tenant_id, "agent": agent_id})
        ).first()
        return CardSource(row) if row is not None else None
