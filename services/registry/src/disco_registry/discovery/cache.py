"""Discovery answers kept by the service until a write or an expiry changes them.

A discovery at 10,000 agents costs PostgreSQL about a millisecond and a half
(the matches, their grouping and their schemas as JSON), on every call, while
the answer to "who consumes X?" changes only when agents register, leave,
revive or expire. So each instance keeps answers (the JSON text the database
built) in a :class:`~disco_registry.tenant_cache.TenantCache`, whose module
says when they are dropped. Triggers (migration ``registry_0007``) notify the
tenant, or ``*`` when a public agent is involved.
"""

from __future__ import annotations

from disco_registry.tenant_cache import ALL_TENANTS, CHANNEL, TenantCache

__all__ = ["ALL_TENANTS", "CHANNEL", "DiscoveryCache", "DiscoveryKey"]

DiscoveryKey = tuple[
    str, tuple[str, ...], str | None, str | None, str | None, int
]  # tenant, capabilities, consumed event, produced event, text, limit


class DiscoveryCache(TenantCache[DiscoveryKey, str]):
    """Discovery answers per tenant: JSON text, sized in characters (a byte each in ASCII)."""

    def __init__(self, *, max_bytes: int, max_age_seconds: float) -> None:
        super().__init__(max_bytes=max_bytes, max_age_seconds=max_age_seconds, size_of=len)
