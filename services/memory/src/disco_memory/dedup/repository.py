"""SQL of dedup marks (``memory.dedup_marks``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["DedupRepository"]

_COLUMNS = "m.consumer_group AS group, m.event_id, m.expires_at, m.created_at"
_LIVE = "(m.expires_at IS NULL OR m.expires_at > now())"

_GET = text(
    f"SELECT {_COLUMNS} FROM memory.dedup_marks m "  # noqa: S608
    "WHERE m.tenant_id = :tenant_id AND m.consumer_group = :group AND m.event_id = :event_id "
    f"AND {_LIVE}"
)
# A mark that expired is made again (created now); a live one is kept as it is.
_PUT = text(
    f"""
    INSERT INTO memory.dedup_marks AS m
        (tenant_id, consumer_group, event_id, user_id, expires_at)
    VALUES (:tenant_id, :group, :event_id, :user_id, :expires_at)
    ON CONFLICT (tenant_id, consumer_group, event_id) DO UPDATE SET
        user_id = EXCLUDED.user_id, expires_at = EXCLUDED.expires_at, created_at = now()
    WHERE NOT {_LIVE}
    RETURNING {_COLUMNS}
    """  # noqa: S608
)
_CHECK = text(
    "SELECT m.event_id FROM memory.dedup_marks m "  # noqa: S608
    "WHERE m.tenant_id = :tenant_id AND m.consumer_group = :group "
    f"AND m.event_id = ANY(CAST(:event_ids AS text[])) AND {_LIVE}"
)
# Rows in id order, so that two batches sharing ids cannot deadlock.
_PUT_MANY = text(
    f"""
    INSERT INTO memory.dedup_marks AS m
        (tenant_id, consumer_group, event_id, user_id, expires_at)
    SELECT :tenant_id, :group, e.event_id, :user_id, :expires_at
    FROM unnest(CAST(:event_ids AS text[])) AS e(event_id)
    ORDER BY e.event_id
    ON CONFLICT (tenant_id, consumer_group, event_id) DO UPDATE SET
        user_id = EXCLUDED.user_id, expires_at = EXCLUDED.expires_at, created_at = now()
    WHERE NOT {_LIVE}
    RETURNING m.event_id
    """  # noqa: S608
)


class DedupRepository:
    """Reads and writes one tenant's dedup marks."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def get(self, group: str, event_id: str) -> RowMapping | None:
        """The live mark, or None."""
        params = {"tenant_id": self._tenant_id, "group": group, "event_id": event_id}
        return (await self._session.execute(_GET, params)).mappings().first()

    async def put(
        self, group: str, event_id: str, *, user_id: str, expires_at: datetime | None
    ) -> RowMapping | None:
        """Make the mark; None when a live one was there already (it is kept)."""
        params = {
            "tenant_id": self._tenant_id,
            "group": group,
            "event_id": event_id,
            "user_id": user_id,
            "expires_at": expires_at,
        }
        return (await self._session.execute(_PUT, params)).mappings().first()

    async def live_among(self, group: str, event_ids: list[str]) -> set[str]:
        """Those of ``event_ids`` with a live mark."""
        params = {"tenant_id": self._tenant_id, "group": group, "event_ids": event_ids}
        return set((await self._session.execute(_CHECK, params)).scalars())

    async def put_many(
        self, group: str, event_ids: list[str], *, user_id: str, expires_at: datetime | None
    ) -> int:
        """Make the marks (each id once); how many are new (live ones are kept)."""
        params = {
            "tenant_id": self._tenant_id,
            "group": group,
            "event_ids": event_ids,
            "user_id": user_id,
            "expires_at": expires_at,
        }
        return len((await self._session.execute(_PUT_MANY, params)).all())
