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

A discovery is one round trip: ``registry.discover_agents_as`` (migration
``registry_0005``) sets the tenant and user of its own implicit transaction
and answers the function, so no BEGIN, scope statement or COMMIT is sent.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_common.registry import DiscoveryQuery
from disco_service import statement_alone

__all__ = ["DiscoveryRepository"]

_DISCOVER = text(
    "SELECT registry.discover_agents_as(:tenant, :user, "
    "CAST(:capabilities AS text[]), :consumed, :produced, :query, :limit)"
)


class DiscoveryRepository:
    """Runs discovery queries, each in its own implicit transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def discover_json(self, *, tenant_id: str, user_id: str, query: DiscoveryQuery) -> str:
        """Live agents visible to ``tenant_id`` that match every criterion of ``query``,
        as the JSON text of a list of :class:`DiscoveredAgent`.

        ``tenant_id`` and ``user_id`` must be the caller's verified identity's:
        the statement scopes its transaction to them.
        """
        required = list(dict.fromkeys([*query.capabilities, *filter(None, [query.capability])]))
        values = {
            "tenant": tenant_id,
            "user": user_id,
            "capabilities": required,
            "consumed": query.consumed_event,
            "produced": query.produced_event,
            "query": query.text,
            "limit": query.limit,
        }
        result = await statement_alone(
            self._engine, lambda connection: connection.execute(_DISCOVER, values)
        )
        return str(result.scalar_one())
