"""Sharing an instance's rate-limit counts with the others, while it runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import structlog

from disco_gateway.ratelimits.repository import share_counts
from disco_gateway.ratelimits.service import CallLimits
from disco_gateway.state import GatewayState
from disco_service import Database

__all__ = ["rate_limit_lifespan", "share_once"]

_log = structlog.get_logger("disco_gateway.ratelimits")


async def share_once(limits: CallLimits, database: Database) -> None:
    """Write this instance's changed counts and learn the others' (one round trip)."""
    changed = limits.windows.changed()
    try:
        async with database.unit_of_work(None) as session:
            others = await share_counts(session, limits.instance, changed)
    except BaseException:
        limits.windows.unshared(changed)
        raise
    limits.windows.learn(others)


@contextlib.asynccontextmanager
async def rate_limit_lifespan(state: GatewayState) -> AsyncIterator[None]:
    """Share the counts every ``DISCO_GATEWAY_RATE_LIMIT_SHARE_SECONDS`` (not at all when
    it is 0 or no call is limited), and once more on the way out."""
    interval = state.settings.rate_limit_share_seconds
    limits = state.call_limits
    if not interval or not limits.any:
        yield
        return
    database = state.require_database()

    async def share() -> None:
        try:
            await share_once(limits, database)
        except Exception as exc:
            limits.shares.labels("failed").inc()
            _log.warning("rate limit counts not shared", error=repr(exc))
        else:
            limits.shares.labels("ok").inc()

    async def keep_sharing() -> None:
        while True:
            await share()
            await asyncio.sleep(interval)

    sharing = asyncio.create_task(keep_sharing(), name="disco-gateway-rate-limits")
    try:
        yield
    finally:
        sharing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sharing
        await share()  # what this instance let through stays counted after it is gone
