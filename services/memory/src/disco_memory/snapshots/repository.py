"""SQL of agent-state snapshots (``memory.agent_snapshots``): one per session and agent of a
tenant, owned by the user the session is for."""

from __future__ import annotations

from typing import Any

from sqlalchemy import RowMapping, TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["SnapshotRepository"]

_SUMMARY = (
    "s.session_id, s.agent_id, s.execution_id, s.status, s.format_version, "
    "s.slim_state AS slim, s.full_bytes, s.slim_bytes, s.version, s.created_at, s.updated_at"
)
_KEY = "s.tenant_id = :tenant_id AND s.session_id = :session_id AND s.agent_id = :agent_id"
_OWNED = " AND s.user_id = :user_id"
_VALUES = (
    ":execution_id, :status, :format_version, CAST(CAST(:full AS text) AS jsonb), "
    "CAST(CAST(:slim AS text) AS jsonb), :full_bytes, :slim_bytes"
)
# The owner (user_id) is whoever saved the first snapshot; later saves keep it.
_UPSERT = f"""
    INSERT INTO memory.agent_snapshots AS s (tenant_id, user_id, session_id, agent_id,
        execution_id, status, format_version, full_state, slim_state, full_bytes, slim_bytes,
        version)
    VALUES (:tenant_id, :user_id, :session_id, :agent_id, {_VALUES}, 1)
    ON CONFLICT (tenant_id, session_id, agent_id) DO UPDATE SET
        execution_id = EXCLUDED.execution_id, status = EXCLUDED.status,
        format_version = EXCLUDED.format_version, full_state = EXCLUDED.full_state,
        slim_state = EXCLUDED.slim_state, full_bytes = EXCLUDED.full_bytes,
        slim_bytes = EXCLUDED.slim_bytes, version = s.version + 1, updated_at = now()
    {{condition}}
    RETURNING {_SUMMARY}
"""  # noqa: S608
_UPDATE_IF_VERSION = f"""
    UPDATE memory.agent_snapshots AS s SET
        execution_id = :execution_id, status = :status, format_version = :format_version,
        full_state = CAST(CAST(:full AS text) AS jsonb),
        slim_state = CAST(CAST(:slim AS text) AS jsonb),
        full_bytes = :full_bytes, slim_bytes = :slim_bytes,
        version = s.version + 1, updated_at = now()
    WHERE {_KEY} AND s.version = :expected{{owned}}
    RETURNING {_SUMMARY}
"""  # noqa: S608


def _statements(owned: str) -> dict[str, TextClause]:
    return {
        "put_any": text(
            _UPSERT.format(condition="WHERE s.user_id = EXCLUDED.user_id" if owned else "")
        ),
        "put_if_absent": text(_UPSERT.format(condition="WHERE false")),
        "put_if_version": text(_UPDATE_IF_VERSION.format(owned=owned)),
        "owner": text(f"SELECT s.user_id, s.version FROM memory.agent_snapshots s WHERE {_KEY}"),  # noqa: S608
        "get": text(
            f"SELECT {_SUMMARY}, s.full_state AS full FROM memory.agent_snapshots s "  # noqa: S608
            f"WHERE {_KEY}{owned}"
        ),
        "list": text(
            f"SELECT {_SUMMARY} FROM memory.agent_snapshots s "  # noqa: S608
            f"WHERE s.tenant_id = :tenant_id AND s.session_id = :session_id{owned} "
            "ORDER BY s.updated_at DESC, s.agent_id"
        ),
        "delete": text(
            f"DELETE FROM memory.agent_snapshots s WHERE {_KEY}{owned} "  # noqa: S608
            "RETURNING s.agent_id"
        ),
    }


_OWN_ROWS = _statements(_OWNED)
_ANY_ROWS = _statements("")


class SnapshotRepository:
    """Reads and writes a tenant's agent-state snapshots, as one user or for all.

    ``any_user``: the caller reaches every snapshot of the tenant (an agent resuming a
    session whoever decided, an operator); otherwise only those it owns. A new snapshot
    is owned by ``user_id``.
    """

    def __init__(
        self, session: AsyncSession, tenant_id: str, user_id: str, *, any_user: bool = False
    ) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}
        self._any_user = any_user
        self._sql = _ANY_ROWS if any_user else _OWN_ROWS

    def reaches(self, owner: str) -> bool:
        """Whether the caller may read and write a snapshot ``owner`` owns."""
        return self._any_user or owner == self._scope["user_id"]

    def _key(self, session_id: str, agent_id: str) -> dict[str, Any]:
        return {**self._scope, "session_id": session_id, "agent_id": agent_id}

    async def put(
        self, session_id: str, agent_id: str, *, expected: int | None, **values: Any
    ) -> RowMapping | None:
        """Replace the snapshot; None when ``expected`` did not match the stored version or
        the snapshot is another user's (see :meth:`owner`)."""
        params = {**self._key(session_id, agent_id), **values}
        if expected is None:
            statement = self._sql["put_any"]
        elif expected == 0:
            statement = self._sql["put_if_absent"]
        else:
            statement = self._sql["put_if_version"]
            params["expected"] = expected
        return (await self._session.execute(statement, params)).mappings().first()

    async def owner(self, session_id: str, agent_id: str) -> tuple[str, int] | None:
        """Whose the snapshot is and its version, whoever asks (None: there is none)."""
        result = await self._session.execute(self._sql["owner"], self._key(session_id, agent_id))
        row = result.first()
        return (str(row[0]), int(row[1])) if row is not None else None

    async def get(self, session_id: str, agent_id: str) -> RowMapping | None:
        """The snapshot with its full state, or None."""
        result = await self._session.execute(self._sql["get"], self._key(session_id, agent_id))
        return result.mappings().first()

    async def list(self, session_id: str) -> list[RowMapping]:
        """Every agent's snapshot in a session (without full state), latest first."""
        result = await self._session.execute(
            self._sql["list"], {**self._scope, "session_id": session_id}
        )
        return list(result.mappings().all())

    async def delete(self, session_id: str, agent_id: str) -> bool:
        """Delete the snapshot; whether it was there."""
        result = await self._session.execute(self._sql["delete"], self._key(session_id, agent_id))
        return result.first() is not None
