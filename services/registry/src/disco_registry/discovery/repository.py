"""The discovery query: ``registry.discover_agents`` (migration ``registry_0003``).

Discovery runs inside a ``SECURITY DEFINER`` function because row-level
security keeps the planner from using the GIN and trigram indexes for the
application role (their operators are not leakproof); the function applies the
tenancy rule itself — the caller's tenant (from the transaction setting the
kit sets from the verified token) and public agents — and answers with the JSON
text of a list of ``DiscoveredAgent`` (a test pins the shape), with how long
the answer holds unless a write changes it (``fresh_seconds``, migration
``registry_0007``).

What it computes: the matching registrations that have a live instance,
grouped by (tenant, name) — one answer per agent name, described by its most
recently updated matching registration, counting every live instance — best
text matches first (full-text rank plus trigram word similarity), else the
caller's own agents before public ones, then by name.

A discovery is one round trip: ``registry.discover_agents_as`` (migration
``registry_0005``) sets the tenant and user of its own implicit transaction
and answers the function, so no BEGIN, scope statement or COMMIT is sent. It
goes to the driver directly (:func:`disco_service.on_driver`): discovery is the
registry's hottest read, and SQLAlchemy's wrappers cost more CPU than the call.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from disco_common.registry import DiscoveryQuery
from disco_service import on_driver

__all__ = ["DISCOVER", "DiscoveryRepository", "required_capabilities"]

# In the driver's placeholders: tenant, user, capabilities, consumed event,
# produced event, text, limit.
DISCOVER = (
    "SELECT answer, fresh_seconds "
    "FROM registry.discover_agents_as($1, $2, $3::text[], $4, $5, $6, $7)"
)


class DiscoveryRepository:
    """Runs discovery queries, each in its own implicit transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def discover_json(
        self, *, tenant_id: str, user_id: str, query: DiscoveryQuery
    ) -> tuple[str, float | None]:
        """Live agents visible to ``tenant_id`` that match every criterion of ``query``,
        as the JSON text of a list of :class:`DiscoveredAgent`; and the seconds until
        the first live instance among the matches expires (None: none matched).

        ``tenant_id`` and ``user_id`` must be the caller's verified identity's:
        the statement scopes its transaction to them.
        """
        row = await on_driver(
            self._engine,
            DISCOVER,
            lambda driver: driver.fetchrow(
                DISCOVER,
                tenant_id,
                user_id,
                required_capabilities(query),
                query.consumed_event,
                query.produced_event,
                query.text,
                query.limit,
            ),
        )
        assert row is not None  # the function answers one row, always
        return str(row["answer"]), row["fresh_seconds"]


def required_capabilities(query: DiscoveryQuery) -> list[str]:
    """The capability names ``query`` requires, each once, in order."""
    return list(dict.fromkeys([*query.capabilities, *filter(None, [query.capability])]))
