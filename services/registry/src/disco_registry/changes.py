"""Listening for the registry's changes as a lifespan step: one ``LISTEN`` connection
feeds every answer the instance keeps (discovery answers, AsyncAPI documents).

Payloads on ``registry_discovery`` (migrations ``registry_0007``, ``registry_0008``):
a tenant, ``*`` (a public agent: every tenant), or ``schema:<tenant>`` (a schema
version added or removed: only documents name schema versions).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from disco_registry.state import RegistryState
from disco_registry.tenant_cache import CHANNEL
from disco_service import listening

__all__ = ["SCHEMA_CHANGE_PREFIX", "changes_lifespan"]

SCHEMA_CHANGE_PREFIX = "schema:"


@asynccontextmanager
async def changes_lifespan(state: RegistryState) -> AsyncIterator[None]:
    """Keep answers while ``NOTIFY registry_discovery`` is heard (see
    :mod:`disco_registry.tenant_cache`); nothing is kept by a cache that is off."""
    caches = [c for c in (state.discovery_cache, state.asyncapi_cache) if c.enabled]
    if not caches:
        yield
        return
    documents = state.asyncapi_cache

    def changed(payload: str) -> None:
        if payload.startswith(SCHEMA_CHANGE_PREFIX):
            if documents.enabled:
                documents.changed(payload[len(SCHEMA_CHANGE_PREFIX) :])
            return
        for cache in caches:
            cache.changed(payload)

    def heard() -> None:
        for cache in caches:
            cache.listening()

    def lost() -> None:
        for cache in caches:
            cache.lost()

    async with listening(
        state.require_database(), CHANNEL, changed, on_listening=heard, on_lost=lost
    ):
        yield
