"""Rate limits of the calls that put work on the bus: the A2A door, the publish bridge and
session messages (over HTTP or a session's websocket).

One tenant must not take the bus, the agents and the database from the others,
and a public agent (no token) must not be callable without bound. Each call
counts against one key:

- a call with a token, against its tenant (``DISCO_GATEWAY_RATE_LIMIT_TENANT``, or
  the tenant's own in ``DISCO_GATEWAY_RATE_LIMIT_PER_TENANT``);
- a call without one (a public agent), against the caller's address
  (``DISCO_GATEWAY_RATE_LIMIT_ANONYMOUS``). Behind a proxy, name it in
  ``DISCO_FORWARDED_ALLOW_IPS`` so the address is the caller's, not the proxy's.

Limits are the ``limits`` package's notation, several joined by ``;``:
``"50/second;1000/minute"``; empty turns them off. They are counted with a
sliding window in each instance's memory: N instances behind a balancer let
through up to N times the limit. A call over a limit gets 429 with
``Retry-After`` (seconds) and the ``rate_limited`` error code.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from prometheus_client import CollectorRegistry, Counter

from disco_gateway.errors import RateLimited
from disco_gateway.scope import CallScope

__all__ = ["CallLimits", "parse_limits"]


def parse_limits(text: str) -> list[RateLimitItem]:
    """The limits of a setting (``"50/second;1000/minute"``; empty: none).

    Raises:
        ValueError: not the ``limits`` notation.
    """
    return parse_many(text) if text.strip() else []


class CallLimits:
    """Counts each call against its tenant or, without a token, its caller's address.

    Args:
        tenant: the limits of one tenant's calls.
        anonymous: the limits of one address's calls without a token.
        registry: where ``disco_gateway_rate_limited_total`` is counted.
        per_tenant: the limits of the tenants whose calls are limited otherwise than
            ``tenant`` says (an empty list: none).
    """

    def __init__(
        self,
        *,
        tenant: list[RateLimitItem],
        anonymous: list[RateLimitItem],
        registry: CollectorRegistry,
        per_tenant: dict[str, list[RateLimitItem]] | None = None,
    ) -> None:
        self._tenant = tenant
        self._anonymous = anonymous
        self._per_tenant = dict(per_tenant or {})
        self._window = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._refused = Counter(
            "disco_gateway_rate_limited",
            "Calls refused with 429: over their tenant's limit, or an anonymous address's.",
            ["kind"],
            registry=registry,
        )

    async def count(self, scope: CallScope, address: str | None) -> None:
        """Count one call of ``scope`` (from ``address``).

        Raises:
            RateLimited: a limit of its key is spent.
        """
        if scope.anonymous:
            kind, key, whose = "anonymous", address or "?", "an address's calls without a token"
            limits = self._anonymous
        else:
            kind, key, whose = "tenant", scope.tenant_id, "your tenant's calls"
            limits = self._per_tenant.get(key, self._tenant)
        for limit in limits:
            if await self._window.hit(limit, kind, key):
                continue
            stats = await self._window.get_window_stats(limit, kind, key)
            wait = max(1, math.ceil(stats.reset_time - time.time()))
            self._refused.labels(kind).inc()
            raise RateLimited(
                f"Too many calls: the limit of {whose} is {limit}; try again in {wait} s.",
                headers={"Retry-After": str(wait)},
                details={"limit": str(limit), "retry_after_seconds": wait},
            )
