"""A job that runs for as long as a block does: a lifespan step's background task."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["in_background"]


@asynccontextmanager
async def in_background(job: Coroutine[Any, Any, None], name: str) -> AsyncIterator[None]:
    """Run ``job`` as a task named ``name`` until the block exits, then cancel it (and wait
    for it to finish)."""
    task = asyncio.create_task(job, name=name)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
