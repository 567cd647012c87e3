"""The rate-limit counts every instance shares, through one system function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, DOUBLE_PRECISION, INTEGER, TEXT
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["WindowCount", "share_counts"]

_SHARE = text(
    "SELECT window_key, hits "
    "FROM gateway.share_rate_limit_counts(:me, :keys, :tenants, :hits, :expires)"
).bindparams(
    bindparam("keys", type_=ARRAY(TEXT)),
    bindparam("tenants", type_=ARRAY(TEXT)),
    bindparam("hits", type_=ARRAY(INTEGER)),
    bindparam("expires", type_=ARRAY(DOUBLE_PRECISION)),
)


@dataclass(frozen=True, slots=True)
class WindowCount:
    """One instance's hits in one window of one limit's key."""

    window_key: str
    hits: int
    expires_at: float
    """When the window's count is of no more use (seconds since the epoch)."""

    @property
    def tenant_id(self) -> str | None:
        """The tenant whose calls the window counts (None: an address's, without a token).

        The ``limits`` key of a window is ``LIMITER/<kind>/<tenant or address>/...``
        (:class:`~disco_gateway.ratelimits.CallLimits` names the kind ``tenant`` or
        ``anonymous``); a tenant id has no ``/``. Stored beside the key, so that erasing
        a tenant reaches its counts (migration gateway_0013).
        """
        parts = self.window_key.split("/", 3)
        return parts[2] if len(parts) > 3 and parts[1] == "tenant" else None


async def share_counts(
    session: AsyncSession, instance: str, mine: Sequence[WindowCount]
) -> dict[str, int]:
    """Store ``instance``'s counts (``mine``: the windows it counted in since it last
    shared), forget every instance's expired ones, and return the other instances' hits
    by window (a system function: the counts of every tenant and address)."""
    rows = await session.execute(
        _SHARE,
        {
            "me": instance,
            "keys": [count.window_key for count in mine],
            "tenants": [count.tenant_id for count in mine],
            "hits": [count.hits for count in mine],
            "expires": [count.expires_at for count in mine],
        },
    )
    return {row.window_key: int(row.hits) for row in rows.all()}
