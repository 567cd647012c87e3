"""SQL of agent-state snapshots (``memory.agent_snapshots``), private to their user."""

from __future__ import annotations

from typing import Any

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["SnapshotRepository"]

_SUMMARY = (
    "s.session_id, s.agent_id, s.execution_id, s.status, s.format_version, "
    "s.slim_state AS slim, s.full_bytes, s.slim_bytes, s.version, s.created_at, s.updated_at"
)
_KEY = (
    "s.tenant_id = :tenant_id AND s.user_id = :user_id AND s.session_id = :session_id "
    "AND s.agent_id = :agent_id"
)
_VALUES = (
    ":execution_id, :status, :format_version, CAST(CAST(:full AS text) AS jsonb), "
    "CAST(CAST(:slim AS text) AS jsonb), :full_bytes, :slim_bytes"
)
_UPSERT = f"""
    INSERT INTO memory.agent_snapshots AS s (tenant_id, user_id, session_id, agent_id,
        execution_id, status, format_version, full_state, slim_state, full_bytes, slim_bytes,
        version)
    VALUES (:tenant_id, :user_id, :session_id, :agent_id, {_VALUES}, 1)
    ON CONFLICT (tenant_id, user_id, session_id, agent_id) DO UPDATE SET
        execution_id = EXCLUDED.execution_id, status = EXCLUDED.status,
        format_version = EXCLUDED.format_version, full_state = EXCLUDED.full_state,
        slim_state = EXCLUDED.slim_state, full_bytes = EXCLUDED.full_bytes,
        slim_bytes = EXCLUDED.slim_bytes, version = s.version + 1, updated_at = now()
    {{condition}}
    RETURNING {_SUMMARY}
"""  # noqa: S608
_PUT_ANY = text(_UPSERT.format(condition=""))
_PUT_IF_ABSENT = text(_UPSERT.format(condition="WHERE false"))
_PUT_IF_VERSION = text(
    f"""
    UPDATE memory.agent_snapshots AS s SET
        execution_id = :execution_id, status = :status, format_version = :format_version,
        full_state = CAST(CAST(:full AS text) AS jsonb),
        slim_state = CAST(CAST(:slim AS text) AS jsonb),
        full_bytes = :full_bytes, slim_bytes = :slim_bytes,
        version = s.version + 1, updated_at = now()
    WHERE {_KEY} AND s.version = :expected
    RETURNING {_SUMMARY}
    """  # noqa: S608
)
_VERSION = text(f"SELECT s.version FROM memory.agent_snapshots s WHERE {_KEY}")  # noqa: S608
_GET = text(
    f"SELECT {_SUMMARY}, s.full_state AS full FROM memory.agent_snapshots s WHERE {_KEY}"  # noqa: S608
)
_LIST = text(
    f"SELECT {_SUMMARY} FROM memory.agent_snapshots s "  # noqa: S608
    "WHERE s.tenant_id = :tenant_id AND s.user_id = :user_id AND s.session_id = :session_id "
    "ORDER BY s.updated_at DESC, s.agent_id"
)
_DELETE = text(
    f"DELETE FROM memory.agent_snapshots s WHERE {_KEY} RETURNING s.agent_id"  # noqa: S608
)


class SnapshotRepository:
    """Reads and writes one user's agent-state snapshots."""

    def __init__(self, session: AsyncSession, tenant_id: str, user_id: str) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    def _key(self, session_id: str, agent_id: str) -> dict[str, Any]:
        return {**self._scope, "session_id": session_id, "agent_id": agent_id}

    async def put(
        self, session_id: str, agent_id: str, *, expected: int | None, **values: Any
    ) -> RowMapping | None:
        """Replace the snapshot; None when ``expected`` did not match the stored version."""
        params = {**self._key(session_id, agent_id), **values}
        if expected is None:
            statement = _PUT_ANY
        elif expected == 0:
            statement = _PUT_IF_ABSENT
        else:
            statement = _PUT_IF_VERSION
            params["expected"] = expected
        return (await self._session.execute(statement, params)).mappings().first()

    async def current_version(self, session_id: str, agent_id: str) -> int | None:
        """The stored version, or None."""
        result = await self._session.execute(_VERSION, self._key(session_id, agent_id))
        return result.scalar_one_or_none()

    async def get(self, session_id: str, agent_id: str) -> RowMapping | None:
        """The snapshot with its full state, or None."""
        result = await self._session.execute(_GET, self._key(session_id, agent_id))
        return result.mappings().first()

    async def list(self, session_id: str) -> list[RowMapping]:
        """Every agent's snapshot in a session (without full state), latest first."""
        result = await self._session.execute(_LIST, {**self._scope, "session_id": session_id})
        return list(result.mappings().all())

    async def delete(self, session_id: str, agent_id: str) -> bool:
        """Delete the snapshot; whether it was there."""
        result = await self._session.execute(_DELETE, self._key(session_id, agent_id))
        return result.first() is not None
