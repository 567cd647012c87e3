"""The TTL sweeper: deletes expired working memory and task contexts, for every tenant.

Reads already treat an expired row as absent; the sweeper only reclaims the
space. It calls ``memory.purge_expired``, a ``SECURITY DEFINER`` function (the
application role has no BYPASSRLS), in batches until nothing is left.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog
from sqlalchemy import text

from disco_memory.settings import MemorySettings
from disco_service import Database, in_background

__all__ = ["purge_expired", "ttl_sweeper"]

log = structlog.get_logger("disco_memory.expiry")

_PURGE = text("SELECT memory.purge_expired(:batch_size)")


async def purge_expired(database: Database, *, batch_size: int = 1000) -> int:
    """Delete every expired row now; how many were deleted."""
    total = 0
    while True:
        async with database.unit_of_work(None) as session:
            removed = int((await session.execute(_PURGE, {"batch_size": batch_size})).scalar_one())
        total += removed
        if removed < batch_size:
            return total


async def _sweep_forever(database: Database, settings: MemorySettings) -> None:
    while True:
        await asyncio.sleep(settings.ttl_sweep_interval_seconds)
        try:
            removed = await purge_expired(database, batch_size=settings.ttl_sweep_batch_size)
        except Exception:
            # A database hiccup must not end the sweeper; the next round retries.
            log.exception("ttl_sweep_failed")
            continue
        if removed:
            log.info("ttl_swept", removed=removed)


@contextlib.asynccontextmanager
async def ttl_sweeper(database: Database, settings: MemorySettings) -> AsyncIterator[None]:
    """Run the sweeper in the background while the context is open."""
    async with in_background(_sweep_forever(database, settings), "disco-memory-ttl"):
        yield
