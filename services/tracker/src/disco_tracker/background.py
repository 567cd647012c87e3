"""Background jobs of the service's lifetime: long-running ones, and ones every few seconds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import structlog

__all__ = ["in_background", "periodically"]

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
async def in_background(job: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """Run ``job`` as a task until the block exits, then cancel it."""
    task = asyncio.create_task(job, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@asynccontextmanager
async def periodically(
    job: Callable[[], Awaitable[object]], interval: float, name: str
) -> AsyncIterator[None]:
    """Run ``job`` now and every ``interval`` seconds until the block exits."""
    async with in_background(_repeat(job, interval, name), name):
        yield
