"""SQL of plan records (``memory.plans``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["PlanRepository"]

_COLUMNS = (
    "plan_id, goal_event, goal_data, response_event, plan_type, status, status_reason, "
    "session_id, parent_plan_id, user_id, version, created_at, updated_at, completed_at"
)

_INSERT = text(
    "INSERT INTO memory.plans (tenant_id, plan_id, user_id, goal_event, goal_data, "  # noqa: S608
    "response_event, plan_type, status, session_id, parent_plan_id, version, completed_at) "
    "VALUES (:tenant_id, :plan_id, :user_id, :goal_event, "
    "CAST(CAST(:goal_data AS text) AS jsonb), :response_event, :plan_type, :status, "
    ":session_id, :parent_plan_id, 1, "
    "CASE WHEN CAST(:final AS boolean) THEN now() END) "
    f"ON CONFLICT DO NOTHING RETURNING {_COLUMNS}"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM memory.plans "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND plan_id = :plan_id"
)
_GET_FOR_UPDATE = text(
    f"SELECT {_COLUMNS} FROM memory.plans "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND plan_id = :plan_id FOR UPDATE"
)
_UPDATE_STATUS = text(
    "UPDATE memory.plans SET status = :status, status_reason = :reason, "  # noqa: S608
    "version = version + 1, updated_at = now(), "
    "completed_at = CASE WHEN CAST(:final AS boolean) THEN now() END "
    "WHERE tenant_id = :tenant_id AND plan_id = :plan_id "
    f"RETURNING {_COLUMNS}"
)
_LIST_ORDER = Keyset("created_at", "plan_id", descending=True)
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.plans "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND user_id = :user_id "
    "AND (CAST(:status AS text) IS NULL OR status = :status) "
    "AND (CAST(:session_id AS text) IS NULL OR session_id = :session_id) "
    "AND (CAST(:parent_plan_id AS text) IS NULL OR parent_plan_id = :parent_plan_id) "
)


class PlanRepository:
    """Reads and writes one tenant's plan records."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def insert(
        self,
        plan_id: str,
        *,
        user_id: str,
        goal_event: str,
        goal_data_json: str,
        response_event: str,
        plan_type: str | None,
        status: str,
        final: bool,
        session_id: str | None,
        parent_plan_id: str | None,
    ) -> RowMapping | None:
        """Create a plan record; None when the id is taken."""
        result = await self._session.execute(
            _INSERT,
            {
                "tenant_id": self._tenant_id,
                "plan_id": plan_id,
                "user_id": user_id,
                "goal_event": goal_event,
                "goal_data": goal_data_json,
                "response_event": response_event,
                "plan_type": plan_type,
                "status": status,
                "final": final,
                "session_id": session_id,
                "parent_plan_id": parent_plan_id,
            },
        )
        return result.mappings().first()

    async def get(self, plan_id: str, *, for_update: bool = False) -> RowMapping | None:
        """One plan record, or None (locked for the transaction with ``for_update``)."""
        statement = _GET_FOR_UPDATE if for_update else _GET
        result = await self._session.execute(
            statement, {"tenant_id": self._tenant_id, "plan_id": plan_id}
        )
        return result.mappings().first()

    async def update_status(
        self, plan_id: str, *, status: str, reason: str | None, final: bool
    ) -> RowMapping:
        """Set a (locked) plan's status."""
        result = await self._session.execute(
            _UPDATE_STATUS,
            {
                "tenant_id": self._tenant_id,
                "plan_id": plan_id,
                "status": status,
                "reason": reason,
                "final": final,
            },
        )
        return result.mappings().one()

    async def list(
        self,
        *,
        user_id: str,
        status: str | None,
        session_id: str | None,
        parent_plan_id: str | None,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[RowMapping]:
        """A user's plans, newest first, filtered, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {
                **params,
                "tenant_id": self._tenant_id,
                "user_id": user_id,
                "status": status,
                "session_id": session_id,
                "parent_plan_id": parent_plan_id,
                "limit": limit,
            },
        )
        return list(result.mappings().all())
