"""SQL of dedup marks (``memory.dedup_marks``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from disco_service import on_driver

__all__ = ["DedupBatches", "DedupRepository"]

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
# One statement each, its own transaction (migration memory_0007): the functions
# scope it to the tenant and user given, who must be the caller's verified identity.
_CHECK_SQL = "SELECT o_event_id, o_kind FROM memory.dedup_check_as($1, $2, $3, $4::text[])"
_MARK_SQL = "SELECT o_event_id FROM memory.dedup_mark_as($1, $2, $3, $4::text[], $5)"


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


class DedupBatches:
    """Asks about and makes one tenant's marks a batch at a time: each call one
    statement on the driver, in its own implicit transaction (no BEGIN, scope or
    COMMIT: the durable dedup of every consumer asks once per fetched batch)."""

    def __init__(self, engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
        self._engine = engine
        self._scope = (tenant_id, user_id)

    async def live_among(self, group: str, event_ids: list[str]) -> tuple[set[str], set[str]]:
        """Those of ``event_ids`` with a live mark, and those with live step records."""
        rows = await on_driver(
            self._engine,
            _CHECK_SQL,
            lambda driver: driver.fetch(_CHECK_SQL, *self._scope, group, event_ids),
        )
        handled = {row[0] for row in rows if row[1] == "handled"}
        return handled, {row[0] for row in rows if row[1] == "stepped"}

    async def put_many(
        self, group: str, event_ids: list[str], *, expires_at: datetime | None
    ) -> int:
        """Make the marks (each id once) as the caller's user; how many are new (live
        ones are kept)."""
        rows = await on_driver(
            self._engine,
            _MARK_SQL,
            lambda driver: driver.fetch(_MARK_SQL, *self._scope, group, event_ids, expires_at),
        )
        return len(rows)
