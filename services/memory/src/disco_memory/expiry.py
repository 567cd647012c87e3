"""The TTL sweeper: deletes expired rows for every tenant.

Expired working memory, task contexts, dedup marks and step records. Reads
already treat an expired row as absent; the sweeper only reclaims the space
(dedup marks and step records grow with every envelope a Worker or Planner
handles). It calls ``memory.sweep_expired``, a ``SECURITY DEFINER`` function
(the application role has no BYPASSRLS), which deletes at most a batch of each
table per transaction; a round goes on batch after batch until nothing is
left, or until ``DISCO_MEMORY_TTL_SWEEP_MAX_BATCHES`` batches (the rest waits
for the next round, so one sweep never holds the database for long).
``disco_memory_swept_rows_total{table}`` counts what it deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import text

from disco_memory.settings import MemorySettings
from disco_service import Database, in_background

__all__ = ["SweepMetrics", "purge_expired", "ttl_sweeper"]

log = structlog.get_logger("disco_memory.expiry")

_SWEEP = text("SELECT table_name, deleted FROM memory.sweep_expired(:batch_size)")


class SweepMetrics:
    """What the TTL sweeper deleted (on the service's ``/metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.swept = Counter(
            "disco_memory_swept_rows",
            "Expired rows the TTL sweeper deleted, by table (working_memory, task_contexts, "
            "dedup_marks, step_records).",
            ["table"],
            registry=registry,
        )


async def purge_expired(
    database: Database,
    *,
    batch_size: int = 1000,
    max_batches: int | None = None,
    metrics: SweepMetrics | None = None,
) -> dict[str, int]:
    """Delete expired rows now, a batch of each table per transaction, until none is left
    (or ``max_batches`` batches); how many rows of each table were deleted."""
    totals: dict[str, int] = {}
    batches = 0
    while max_batches is None or batches < max_batches:
        async with database.unit_of_work(None) as session:
            rows = (await session.execute(_SWEEP, {"batch_size": batch_size})).all()
        batches += 1
        full = False
        for table, deleted in rows:
            totals[table] = totals.get(table, 0) + int(deleted)
            if metrics is not None and deleted:
                metrics.swept.labels(table).inc(int(deleted))
            full = full or deleted >= batch_size
        if not full:
            break
    return totals


async def _sweep_forever(
    database: Database, settings: MemorySettings, metrics: SweepMetrics | None
) -> None:
    while True:
        await asyncio.sleep(settings.ttl_sweep_interval_seconds)
        try:
            removed = await purge_expired(
                database,
                batch_size=settings.ttl_sweep_batch_size,
                max_batches=settings.ttl_sweep_max_batches,
                metrics=metrics,
            )
        except Exception:
            # A database hiccup must not end the sweeper; the next round retries.
            log.exception("ttl_sweep_failed")
            continue
        if any(removed.values()):
            log.info("ttl_swept", **{table: n for table, n in removed.items() if n})


@contextlib.asynccontextmanager
async def ttl_sweeper(
    database: Database, settings: MemorySettings, metrics: SweepMetrics | None = None
) -> AsyncIterator[None]:
    """Run the sweeper in the background while the context is open."""
    async with in_background(_sweep_forever(database, settings, metrics), "disco-memory-ttl"):
        yield
