"""The sweeper as a lifespan step of the registry app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from disco_registry.liveness.service import Sweeper
from disco_registry.state import RegistryState

__all__ = ["sweeper_lifespan"]


@asynccontextmanager
async def sweeper_lifespan(state: RegistryState) -> AsyncIterator[None]:
    """Run the TTL sweeper while the app runs (after the database and the outbox relay
    started, stopped before them)."""
    settings = state.settings
    sweeper = Sweeper(
        state.require_database(),
        interval_seconds=settings.sweep_interval_seconds,
        batch_size=settings.sweep_batch_size,
        retention_seconds=settings.expired_retention_seconds,
    )
    await sweeper.start()
    try:
        yield
    finally:
        await sweeper.stop()
