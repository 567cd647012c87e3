"""Retention: finished plans, their tasks and timelines, removed after a while, in batches.

The removal is a ``SECURITY DEFINER`` function (``tracker.sweep_tracker_retention``,
migration tracker_0003) because it works across tenants; each call is its own
short transaction removing at most ``retention_batch_size`` plans (and rows
of each other kind), so no lock is held long and readers are never blocked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import structlog
from sqlalchemy import text

from disco_common.ids import utcnow
from disco_service import Database
from disco_tracker.background import periodically
from disco_tracker.state import TrackerState

__all__ = ["retention_sweeper", "sweep_expired"]

log = structlog.get_logger("disco_tracker.retention")

_SWEEP = text("SELECT tracker.sweep_tracker_retention(:cutoff, :feed_cutoff, :max_rows)")
_MAX_ROUNDS = 10_000


async def sweep_expired(
    database: Database,
    *,
    retention: timedelta,
    feed_retention: timedelta,
    batch_size: int,
) -> int:
    """Remove what is older than the retention, batch after batch; how many rows went."""
    now = utcnow()
    params = {
        "cutoff": now - retention,
        "feed_cutoff": now - feed_retention,
        "max_rows": batch_size,
    }
    total = 0
    for _ in range(_MAX_ROUNDS):
        async with database.unit_of_work(None) as session:
            removed = int(await session.scalar(_SWEEP, params) or 0)
        total += removed
        if removed == 0:
            break
    if total:
        log.info("retention_swept", rows=total)
    return total


@asynccontextmanager
async def retention_sweeper(state: TrackerState) -> AsyncIterator[None]:
    """Lifespan hook: remove expired rows every ``retention_sweep_interval_seconds``."""
    settings = state.settings
    database = state.require_database()

    async def sweep() -> int:
        return await sweep_expired(
            database,
            retention=timedelta(days=settings.retention_days),
            feed_retention=timedelta(hours=settings.feed_retention_hours),
            batch_size=settings.retention_batch_size,
        )

    async with periodically(sweep, settings.retention_sweep_interval_seconds, "retention_sweep"):
        yield
