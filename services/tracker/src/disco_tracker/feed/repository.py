"""SQL reading the feed (``tracker.feed``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["FeedRepository"]

_COLUMNS = "id, kind, plan_id, task_id, status, current_state, event_type, agent_name, cause, at"
_HEAD = text("SELECT COALESCE(max(id), 0) FROM tracker.feed WHERE tenant_id = :tenant")
_AFTER = text(
    f"SELECT {_COLUMNS} FROM tracker.feed "  # noqa: S608 - fixed fragments
    "WHERE tenant_id = :tenant AND id > :after ORDER BY id LIMIT :limit"
)
_PLAN_AFTER = text(
    f"SELECT {_COLUMNS} FROM tracker.feed "  # noqa: S608 - fixed fragments
    "WHERE tenant_id = :tenant AND id > :after AND plan_id = :plan_id ORDER BY id LIMIT :limit"
)


class FeedRepository:
    """Reads one tenant's feed."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self.session = session
        self.tenant_id = tenant_id

    async def head(self) -> int:
        """The id of the tenant's latest change (0 if none)."""
        value = await self.session.scalar(_HEAD, {"tenant": self.tenant_id})
        return int(value or 0)

    async def after(self, after: int, *, plan_id: str | None, limit: int) -> Sequence[RowMapping]:
        """Changes after ``after``, oldest first (only one plan's with ``plan_id``)."""
        params: dict[str, object] = {"tenant": self.tenant_id, "after": after, "limit": limit}
        if plan_id is None:
            result = await self.session.execute(_AFTER, params)
        else:
            result = await self.session.execute(_PLAN_AFTER, {**params, "plan_id": plan_id})
        return result.mappings().all()
