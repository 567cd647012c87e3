"""The discovery query: ``registry.discover_agents`` (migration ``registry_0003``).

Discovery runs inside a ``SECURITY DEFINER`` function because row-level
security keeps the planner from using the GIN and trigram indexes for the
application role (their operators are not leakproof); the function applies the
tenancy rule itself — the caller's tenant (from the transaction setting the
kit sets from the verified token) and public agents — and answers with the JSON
text of a list of ``DiscoveredAgent`` (a test pins the shape).

What it computes: the matching registrations that have a live instance,
grouped by (tenant, name) — one answer per agent name, described by its most
recently updated matching registration, counting every live instance — best
text matches first (full-text rank plus trigram word similarity), else the
caller's own agents before public ones, then by name.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_common.registry import DiscoveryQuery

__all__ = ["DiscoveryRepository"]

_DISCOVER = text(
    "SELECT registry.discover_agents("
    "CAST(:capabilities AS text[]), :consumed, :produced, :query, :limit)"
)


class DiscoveryRepository:
    """Runs discovery queries for the session's tenant."""

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def discover_json(self, *, tenant_id: str, query: DiscoveryQuery) -> str:
        """Live agents visible to the session's tenant that match every criterion of
        ``query``, as the JSON text of a list of :class:`DiscoveredAgent`.

        ``tenant_id`` must be the session's tenant: the function reads the tenant
        from the transaction, never from its arguments.
        """
        required = list(dict.fromkeys([*query.capabilities, *filter(None, [query.capability])]))
        answer = await self._session.execute(
            _DISCOVER,
            {
                "capabilities": required,
                "consumed": query.consumed_event,
                "produced": query.produced_event,
                "query": query.text,
                "limit": query.limit,
            },
        )
        return str(answer.scalar_one())
