"""Discovery: answers "who can do X?", so that a planner or an LLM can build a request."""

from __future__ import annotations

from pydantic import TypeAdapter
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_common.registry import DiscoveredAgent, DiscoveryQuery
from disco_registry.discovery.repository import DiscoveryRepository

__all__ = ["discover", "discover_json"]

_ANSWER = TypeAdapter(list[DiscoveredAgent])


async def discover_json(
    engine: AsyncEngine, *, tenant_id: str, user_id: str, query: DiscoveryQuery
) -> str:
    """Live agents visible to the tenant matching every criterion of ``query``.

    Each agent name comes once (its instances together: ``instance_count``,
    ``agent_ids``), described by its most recently updated matching
    registration, with every request and response schema resolved inline.
    With ``text``, the best matches come first (``score``); otherwise the
    tenant's own agents come before public ones, then by name.

    The answer is the JSON text of a list of :class:`DiscoveredAgent`, built by
    the database: routes send it as it is (:func:`discover` gives models).
    A read only: it runs outside the request's unit of work, in one statement.
    """
    return await DiscoveryRepository(engine).discover_json(
        tenant_id=tenant_id, user_id=user_id, query=query
    )


async def discover(
    engine: AsyncEngine, *, tenant_id: str, user_id: str, query: DiscoveryQuery
) -> list[DiscoveredAgent]:
    """:func:`discover_json`, parsed into :class:`DiscoveredAgent` models."""
    return _ANSWER.validate_json(
        await discover_json(engine, tenant_id=tenant_id, user_id=user_id, query=query)
    )
