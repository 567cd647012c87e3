"""SQL of push notification configurations (``gateway.a2a_push_configs``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["PushConfigRepository"]

_UPSERT = text(
    "INSERT INTO gateway.a2a_push_configs (tenant_id, task_id, config_id, user_id, config) "
    "VALUES (:tenant_id, :task_id, :config_id, :user_id, CAST(:config AS jsonb)) "
    "ON CONFLICT (tenant_id, task_id, config_id) DO UPDATE SET config = excluded.config, "
    "user_id = excluded.user_id"
)
_LIST = text(
    "SELECT config FROM gateway.a2a_push_configs WHERE tenant_id = :tenant_id "
    "AND task_id = :task_id AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id) "
    "ORDER BY created_at, config_id"
)
_DELETE = text(
    "DELETE FROM gateway.a2a_push_configs WHERE tenant_id = :tenant_id AND task_id = :task_id "
    "AND (CAST(:config_id AS text) IS NULL OR config_id = :config_id) "
    "AND (CAST(:user_id AS text) IS NULL OR user_id = :user_id)"
)


class PushConfigRepository:
    """Reads and writes one tenant's push notification configurations."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def put(
        self, task_id: str, config_id: str, *, user_id: str, config: dict[str, Any]
    ) -> None:
        """Create or replace configuration ``config_id`` of the task."""
        await self._session.execute(
            _UPSERT,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "config_id": config_id,
                "user_id": user_id,
                "config": json.dumps(config),
            },
        )

    async def list(self, task_id: str, *, user_id: str | None) -> list[dict[str, Any]]:
        """The task's configurations (of ``user_id``; every user's with None)."""
        rows = await self._session.execute(
            _LIST, {"tenant_id": self._tenant_id, "task_id": task_id, "user_id": user_id}
        )
        return [dict(config) for (config,) in rows.all()]

    async def delete(self, task_id: str, config_id: str | None, *, user_id: str | None) -> None:
        """Remove configuration ``config_id`` of the task (all of them with None)."""
        await self._session.execute(
            _DELETE,
            {
                "tenant_id": self._tenant_id,
                "task_id": task_id,
                "config_id": config_id,
                "user_id": user_id,
            },
        )
