"""Background jobs of the service's lifetime that run every few seconds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import structlog

from disco_service import in_background

__all__ = ["periodically"]

log = structlog.get_logger("disco_tracker")


async def _repeat(job: Callable[[], Awaitable[object]], interval: float, name: str) -> None:
    while True:
        try:
            await job()
        except Exception:
            # A database hiccup must not end the job; the next round retries.
            log.exception(f"{name}_failed")
        await asyncio.sleep(interval)


@asynccontextmanager
async def periodically(
    job: Callable[[], Awaitable[object]], interval: float, name: str
) -> AsyncIterator[None]:
    """Run ``job`` now and every ``interval`` seconds until the block exits."""
    async with in_background(_repeat(job, interval, name), name):
        yield
