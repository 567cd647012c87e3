"""SQL of sessions (``memory.sessions``), private to their user."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["SessionRepository"]

_COLUMNS = "session_id, name, metadata, user_id, plan_count, created_at, last_activity_at"

_CREATE = text(
    "INSERT INTO memory.sessions (tenant_id, user_id, session_id, name, metadata) "  # noqa: S608
    "VALUES (:tenant_id, :user_id, :session_id, :name, CAST(CAST(:metadata AS text) AS jsonb)) "
    f"ON CONFLICT DO NOTHING RETURNING {_COLUMNS}"
)
_TOUCH = text(
    "INSERT INTO memory.sessions AS s (tenant_id, user_id, session_id, plan_count) "
    "VALUES (:tenant_id, :user_id, :session_id, :plans) "
    "ON CONFLICT (tenant_id, user_id, session_id) DO UPDATE SET "
    "plan_count = s.plan_count + EXCLUDED.plan_count, last_activity_at = now()"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM memory.sessions "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND user_id = :user_id AND session_id = :session_id"
)
_LIST_ORDER = Keyset("last_activity_at", "session_id", descending=True)
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.sessions "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND user_id = :user_id "
)


class SessionRepository:
    """Reads and writes one user's sessions."""

    def __init__(self, session: AsyncSession, tenant_id: str, user_id: str) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    async def create(
        self, session_id: str, *, name: str | None, metadata_json: str
    ) -> RowMapping | None:
        """Create a session; None when the user already has one with that id."""
        result = await self._session.execute(
            _CREATE,
            {**self._scope, "session_id": session_id, "name": name, "metadata": metadata_json},
        )
        return result.mappings().first()

    async def touch(self, session_id: str, *, plans: int = 0) -> None:
        """Record activity in a session (creating it if needed), adding ``plans`` plans."""
        await self._session.execute(
            _TOUCH, {**self._scope, "session_id": session_id, "plans": plans}
        )

    async def get(self, session_id: str) -> RowMapping | None:
        """One session, or None."""
        result = await self._session.execute(_GET, {**self._scope, "session_id": session_id})
        return result.mappings().first()

    async def list(self, *, after: tuple[datetime, str] | None, limit: int) -> list[RowMapping]:
        """Sessions, most recently active first, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {**params, **self._scope, "limit": limit},
        )
        return list(result.mappings().all())
