"""Discovery: answers "who can do X?", so that a planner or an LLM can build a request."""

from __future__ import annotations

import time

from sqlalchemy.ext.asyncio import AsyncEngine

from disco_common.registry import DiscoveryQuery
from disco_registry.discovery.cache import DiscoveryCache, DiscoveryKey
from disco_registry.discovery.repository import DiscoveryRepository, required_capabilities

__all__ = ["discover_json"]


async def discover_json(
    engine: AsyncEngine,
    cache: DiscoveryCache,
    *,
    tenant_id: str,
    user_id: str,
    query: DiscoveryQuery,
) -> str:
    """Live agents visible to the tenant matching every criterion of ``query``.

    Each agent name comes once (its instances together: ``instance_count``,
    ``agent_ids``), described by its most recently updated matching
    registration, with every request and response schema resolved inline.
    With ``text``, the best matches come first (``score``); otherwise the
    tenant's own agents come before public ones, then by name.

    The answer is the JSON text of a list of :class:`DiscoveredAgent`, built by
    the database: routes send it as it is.
    A read only: it runs outside the request's unit of work, in one statement,
    unless ``cache`` still holds the answer (see
    :mod:`disco_registry.discovery.cache`).
    """
    key: DiscoveryKey = (
        tenant_id,
        tuple(required_capabilities(query)),
        query.consumed_event,
        query.produced_event,
        query.text,
        query.limit,
    )
    if cache.trusted:
        kept = cache.get(key)
        if kept is not None:
            return kept
    ticket = cache.ticket()
    asked_at = time.monotonic()
    answer, fresh_seconds = await DiscoveryRepository(engine).discover_json(
        tenant_id=tenant_id, user_id=user_id, query=query
    )
    cache.put(key, ticket, answer, fresh_seconds, asked_at=asked_at)
    return answer
