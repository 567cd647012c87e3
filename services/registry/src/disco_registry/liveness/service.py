"""The TTL sweeper: expires agents whose instances all passed their TTL.

Each round is one transaction that acts for no tenant: the ``SECURITY
DEFINER`` function removes dead instances and marks the agents left without
one as expired (``FOR UPDATE SKIP LOCKED``, so several registry instances
sweep side by side without expiring an agent twice), and an ``agent.expired``
envelope per agent goes into the outbox in that same transaction — published
once it commits, never if it rolls back.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from disco_registry.agents.events import announce_expired
from disco_registry.liveness.repository import LivenessRepository
from disco_service import Database

__all__ = ["Sweeper", "sweep_once"]

log = structlog.get_logger("disco_registry.sweeper")

# Purging long-expired agents is housekeeping: once a minute is plenty.
_PURGE_EVERY_SECONDS = 60.0


async def sweep_once(database: Database, *, batch_size: int) -> int:
    """Expire what is due now, in batches; how many agents were expired."""
    total = 0
    while True:
        async with database.unit_of_work(None) as session:
            expired = await LivenessRepository(session).expire(max_rows=batch_size)
            for agent in expired:
                await announce_expired(
                    session,
                    tenant_id=agent.tenant_id,
                    agent_id=agent.agent_id,
                    name=agent.name,
                    instance_id=agent.instance_id,
                    last_heartbeat_at=agent.last_heartbeat_at,
                    expired_at=agent.expired_at,
                )
        total += len(expired)
        # A full batch of agents may mean more instances are due (the function counts
        # instances, which is at least as many): go again until a short batch.
        if len(expired) < batch_size:
            return total


async def purge_once(database: Database, *, retention_seconds: int, batch_size: int) -> int:
    """Delete agents (and their events) expired for longer than ``retention_seconds``."""
    total = 0
    while True:
        async with database.unit_of_work(None) as session:
            purged = await LivenessRepository(session).purge(
                retention_seconds=retention_seconds, max_rows=batch_size
            )
        total += purged
        if purged < batch_size:
            return total


class Sweeper:
    """Runs :func:`sweep_once` every ``interval_seconds`` until stopped.

    A failing round (database down) is logged and retried at the next tick;
    it never ends the loop.
    """

    def __init__(
        self,
        database: Database,
        *,
        interval_seconds: float,
        batch_size: int,
        retention_seconds: int,
    ) -> None:
        self._database = database
        self._interval = interval_seconds
        self._batch_size = batch_size
        self._retention = retention_seconds
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        """Start the loop (idempotent)."""
        if self._task is None:
            self._stop.clear()
            self._task = asyncio.create_task(self._run(), name="registry-ttl-sweeper")

    async def stop(self) -> None:
        """Stop the loop and wait for the round in progress (idempotent)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(task, timeout=max(5.0, self._interval * 2))
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        next_purge = time.monotonic() + _PURGE_EVERY_SECONDS
        while not self._stop.is_set():
            try:
                expired = await sweep_once(self._database, batch_size=self._batch_size)
                if expired:
                    log.info("agents_expired", count=expired)
                if time.monotonic() >= next_purge:
                    next_purge = time.monotonic() + _PURGE_EVERY_SECONDS
                    purged = await purge_once(
                        self._database,
                        retention_seconds=self._retention,
                        batch_size=self._batch_size,
                    )
                    if purged:
                        log.info("expired_agents_purged", count=purged)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("sweep_failed", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self._interval)
