"""Listening for discovery changes as a lifespan step of the registry app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from disco_registry.discovery.cache import CHANNEL
from disco_registry.state import RegistryState
from disco_service import listening

__all__ = ["discovery_cache_lifespan"]


@asynccontextmanager
async def discovery_cache_lifespan(state: RegistryState) -> AsyncIterator[None]:
    """Keep discovery answers while ``NOTIFY registry_discovery`` is heard (see
    :mod:`disco_registry.discovery.cache`); nothing is kept when the cache is off."""
    cache = state.discovery_cache
    if not cache.enabled:
        yield
        return
    async with listening(
        state.require_database(),
        CHANNEL,
        cache.changed,
        on_listening=cache.listening,
        on_lost=cache.lost,
    ):
        yield
