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
``"50/second;1000/minute"``; empty turns them off. A call over a limit gets 429
with ``Retry-After`` (seconds) and the ``rate_limited`` error code.

They are counted with a sliding window in each instance's memory, which also
holds what the other instances counted (:class:`SharedWindows`): every
``DISCO_GATEWAY_RATE_LIMIT_SHARE_SECONDS`` an instance writes its counts to
Postgres and reads the others' (:mod:`disco_gateway.ratelimits.lifespan`), so a
limit holds for the cluster, not per instance. Between two shares an instance
sees only its own new calls: the cluster can let through at most what the other
instances took in that time beyond a limit, so sharing matters for limits per
minute and longer. A call never waits on the database; when it cannot be
reached, each instance goes on with what it last learned (and its own calls).
"""

from __future__ import annotations

import math
import time
import uuid

from limits import RateLimitItem, parse_many
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from prometheus_client import CollectorRegistry, Counter

from disco_gateway.errors import RateLimited
from disco_gateway.ratelimits.repository import WindowCount
from disco_gateway.scope import CallScope

__all__ = ["CallLimits", "SharedWindows", "parse_limits"]


def parse_limits(text: str) -> list[RateLimitItem]:
    """The limits of a setting (``"50/second;1000/minute"``; empty: none).

    Raises:
        ValueError: not the ``limits`` notation.
    """
    return parse_many(text) if text.strip() else []


class SharedWindows(MemoryStorage):
    """The ``limits`` in-memory storage, whose counters also hold the other instances'
    hits (as last learned): a sliding window then weighs every instance's calls.

    Only the sliding-window counter strategy is meant to use it: its counters are
    the windows' (``<limit key>/<window number>``), which name the same window on
    every instance.
    """

    def __init__(self) -> None:
        super().__init__()
        self._others: dict[str, int] = {}
        self._changed: set[str] = set()

    async def get(self, key: str) -> int:
        return await super().get(key) + self._others.get(key, 0)

    async def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        mine = await super().incr(key, expiry, amount)
        self._changed.add(key)
        return mine + self._others.get(key, 0)

    async def decr(self, key: str, amount: int = 1) -> int:
        mine = await super().decr(key, amount)
        self._changed.add(key)
        return mine + self._others.get(key, 0)

    def changed(self) -> list[WindowCount]:
        """This instance's counts of the windows it counted in since the last call (call
        :meth:`unshared` with them when they could not be shared)."""
        now = time.time()
        changed, self._changed = self._changed, set()
        counts = []
        for key in changed:
            expires_at = self.expirations.get(key, 0.0)
            if expires_at > now:
                counts.append(WindowCount(key, self.storage.get(key, 0), expires_at))
        return counts

    def unshared(self, counts: list[WindowCount]) -> None:
        """Counts :meth:`changed` gave that did not reach the others: share them next time."""
        self._changed.update(count.window_key for count in counts)

    def learn(self, others: dict[str, int]) -> None:
        """The other instances' hits by window, as they stand now (replacing the last)."""
        self._others = others


class CallLimits:
    """Counts each call against its tenant or, without a token, its caller's address.

    Args:
        tenant: the limits of one tenant's calls.
        anonymous: the limits of one address's calls without a token.
        registry: where ``disco_gateway_rate_limited_total`` is counted.
        per_tenant: the limits of the tenants whose calls are limited otherwise than
            ``tenant`` says (an empty list: none).

    Attributes:
        windows: the counters, the other instances' hits included.
        instance: this instance's name in the shared counts.
        shares: ``disco_gateway_rate_limit_shares_total{outcome}``, each exchange of
            counts with the other instances.
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
        self.windows = SharedWindows()
        self.instance = f"gateway-{uuid.uuid4()}"
        self._window = SlidingWindowCounterRateLimiter(self.windows)
        self._refused = Counter(
            "disco_gateway_rate_limited",
            "Calls refused with 429: over their tenant's limit, or an anonymous address's.",
            ["kind"],
            registry=registry,
        )
        self.shares = Counter(
            "disco_gateway_rate_limit_shares",
            "Exchanges of rate-limit counts with the other instances, by outcome "
            "(ok; failed: the instance goes on with what it last learned).",
            ["outcome"],
            registry=registry,
        )

    @property
    def any(self) -> bool:
        """Whether any call is limited at all."""
        return bool(self._tenant or self._anonymous or any(self._per_tenant.values()))

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
