"""Calls of the registry's ``SECURITY DEFINER`` system functions (cross-tenant jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["ExpiredAgent", "LivenessRepository"]

_EXPIRE = text(
    "SELECT tenant_id, agent_id, name, instance_id, last_heartbeat_at, expired_at "
    "FROM registry.expire_agents(:max_rows)"
)
_PURGE = text("SELECT registry.purge_expired_agents(:retention, :max_rows)")


@dataclass(frozen=True)
class ExpiredAgent:
    """An agent whose last live instance just passed its TTL."""

    tenant_id: str
    agent_id: str
    name: str
    instance_id: str | None
    last_heartbeat_at: datetime
    expired_at: datetime


class LivenessRepository:
    """Runs the sweeper's functions in a session that acts for no tenant.

    The application role has no BYPASSRLS: these functions are the only way it
    reaches every tenant's rows, and they do exactly one job each.
    """

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def expire(self, *, max_rows: int) -> list[ExpiredAgent]:
        """Remove up to ``max_rows`` instances past their TTL (rows other sweepers hold
        are skipped); the agents left with no live instance, now marked expired."""
        rows = (await self._session.execute(_EXPIRE, {"max_rows": max_rows})).all()
        return [
            ExpiredAgent(
                tenant_id=row.tenant_id,
                agent_id=row.agent_id,
                name=row.name,
                instance_id=row.instance_id,
                last_heartbeat_at=row.last_heartbeat_at,
                expired_at=row.expired_at,
            )
            for row in rows
        ]

    async def purge(self, *, retention_seconds: int, max_rows: int) -> int:
        """Delete up to ``max_rows`` agents expired longer than the retention; how many."""
        result = await self._session.execute(
            _PURGE, {"retention": retention_seconds, "max_rows": max_rows}
        )
        return int(result.scalar_one())
