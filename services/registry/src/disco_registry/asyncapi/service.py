"""The document of a tenant's bus: kept until it may have changed, else built.

A build reads the registry once (:mod:`disco_registry.asyncapi.repository`),
then reads that answer, plans and writes the document in a worker thread (and
its YAML, when first asked for), so that a large one (thousands of event types)
does not hold up the requests around it.
"""

from __future__ import annotations

import asyncio
import time

from sqlalchemy.ext.asyncio import AsyncEngine

from disco_registry.asyncapi.cache import AsyncApiCache, AsyncApiKey, BuiltDocument
from disco_registry.asyncapi.document import DocumentSettings, build_document
from disco_registry.asyncapi.repository import AsyncApiRepository, parse_source

__all__ = ["bus_document"]


async def bus_document(
    engine: AsyncEngine,
    cache: AsyncApiCache,
    settings: DocumentSettings,
    *,
    user_id: str,
    agent: str | None,
    event_type: str | None,
) -> BuiltDocument:
    """The AsyncAPI document of ``settings.tenant_id``'s bus (narrowed to ``agent`` and
    ``event_type`` when given), from ``cache`` while it holds.

    Raises:
        AgentNotFound: no live agent called ``agent`` is visible to the tenant.
        EventNotFound: no live agent defines ``event_type``.
    """
    key: AsyncApiKey = (settings.tenant_id, agent, event_type)
    if cache.trusted:
        kept = cache.get(key)
        if kept is not None:
            return kept

    async def build() -> BuiltDocument:
        ticket = cache.ticket()
        asked_at = time.monotonic()
        answer, fresh_seconds = await AsyncApiRepository(engine).source_text(
            tenant_id=settings.tenant_id, user_id=user_id
        )
        built = await asyncio.to_thread(
            lambda: BuiltDocument.of(
                build_document(
                    parse_source(answer, fresh_seconds),
                    settings,
                    agent=agent,
                    event_type=event_type,
                )
            )
        )
        cache.put(key, ticket, built, fresh_seconds, asked_at=asked_at)
        return built

    return await cache.once(key, build)
