"""Discovery: answers "who can do X?" so that a planner or an LLM can build a request."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.registry import DiscoveredAgent, DiscoveryQuery
from disco_registry.discovery.repository import DiscoveryRepository

__all__ = ["discover"]


async def discover(
    session: AsyncSession, *, tenant_id: str, query: DiscoveryQuery
) -> list[DiscoveredAgent]:
    """Live agents visible to the tenant matching every criterion of ``query``.

    Each agent name comes once (its instances together: ``instance_count``,
    ``agent_ids``), described by its most recently updated matching
    registration, with every request and response schema resolved inline.
    With ``text``, the best matches come first (``score``); otherwise the
    tenant's own agents come before public ones, then by name.
    """
    return await DiscoveryRepository(session).discover(tenant_id=tenant_id, query=query)
