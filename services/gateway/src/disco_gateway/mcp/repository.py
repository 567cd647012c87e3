"""SQL of the MCP sessions (``gateway.mcp_sessions``, row-level security by tenant)."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_gateway.mcp.context import McpSession

__all__ = ["McpSessionRepository", "purge_sessions"]

_COLUMNS = (
    "tenant_id, session_id, user_id, subject, anonymous, protocol_version, client_info, "
    "capabilities"
)
_INSERT = text(
    f"INSERT INTO gateway.mcp_sessions ({_COLUMNS}) "  # noqa: S608
    "VALUES (:tenant_id, :session_id, :user_id, :subject, :anonymous, :protocol_version, "
    "CAST(:client_info AS jsonb), CAST(:capabilities AS jsonb))"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM gateway.mcp_sessions "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND session_id = :session_id"
)
_TOUCH = text(
    "UPDATE gateway.mcp_sessions SET used_at = now() "
    "WHERE tenant_id = :tenant_id AND session_id = :session_id"
)
_DELETE = text(
    "DELETE FROM gateway.mcp_sessions WHERE tenant_id = :tenant_id AND session_id = :session_id"
)
_PURGE = text("SELECT gateway.purge_mcp_sessions(:cutoff)")


def _json(value: object) -> str | None:
    return None if value is None else json.dumps(value)


def _session(row: RowMapping) -> McpSession:
    return McpSession(
        session_id=row["session_id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        subject=row["subject"],
        anonymous=bool(row["anonymous"]),
        protocol_version=row["protocol_version"],
        client_info=dict(row["client_info"]) if row["client_info"] is not None else None,
        capabilities=dict(row["capabilities"]) if row["capabilities"] is not None else None,
    )


class McpSessionRepository:
    """One tenant's MCP sessions."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def add(self, mcp_session: McpSession) -> None:
        """Store a session that was just opened."""
        await self._session.execute(
            _INSERT,
            {
                "tenant_id": self._tenant_id,
                "session_id": mcp_session.session_id,
                "user_id": mcp_session.user_id,
                "subject": mcp_session.subject,
                "anonymous": mcp_session.anonymous,
                "protocol_version": mcp_session.protocol_version,
                "client_info": _json(mcp_session.client_info),
                "capabilities": _json(mcp_session.capabilities),
            },
        )

    async def get(self, session_id: str) -> McpSession | None:
        """The session, if the tenant has it."""
        found = await self._session.execute(
            _GET, {"tenant_id": self._tenant_id, "session_id": session_id}
        )
        row = found.mappings().first()
        return _session(row) if row is not None else None

    async def touch(self, session_id: str) -> None:
        """Note that the session is in use (it is not idle)."""
        await self._session.execute(
            _TOUCH, {"tenant_id": self._tenant_id, "session_id": session_id}
        )

    async def delete(self, session_id: str) -> bool:
        """End the session; False when the tenant had no such session."""
        result = await self._session.execute(
            _DELETE, {"tenant_id": self._tenant_id, "session_id": session_id}
        )
        return bool(getattr(result, "rowcount", 0))


async def purge_sessions(session: AsyncSession, cutoff: datetime) -> int:
    """Delete every tenant's sessions unused since ``cutoff`` (a system function)."""
    return int(await session.scalar(_PURGE, {"cutoff": cutoff}) or 0)
