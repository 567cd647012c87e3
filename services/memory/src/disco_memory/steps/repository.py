"""SQL of step records (``memory.step_records``): one statement per call, on the driver."""

from __future__ import annotations

from datetime import datetime

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from disco_service import on_driver

__all__ = ["StepRepository"]

# One statement each, its own transaction (migration memory_0009): the functions
# scope it to the tenant and user given, who must be the caller's verified identity.
_RECORD_SQL = (
    "SELECT o_created, o_result, o_expires_at, o_created_at "
    "FROM memory.step_record_as($1, $2, $3, $4, $5, $6, $7)"
)
_JOURNAL_SQL = (
    "SELECT o_name, o_result, o_expires_at, o_created_at "
    "FROM memory.step_journal_as($1, $2, $3, $4)"
)


class StepRepository:
    """Records and reads one tenant's step records."""

    def __init__(self, engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
        self._engine = engine
        self._scope = (tenant_id, user_id)

    async def record(
        self,
        group: str,
        envelope_id: str,
        name: str,
        result: str,
        *,
        expires_at: datetime | None,
    ) -> asyncpg.Record:
        """Record the step (``result`` is JSON text) unless a live record is there:
        ``(created, result, expires_at, created_at)`` of the stored one."""
        rows = await on_driver(
            self._engine,
            _RECORD_SQL,
            lambda driver: driver.fetch(
                _RECORD_SQL, *self._scope, group, envelope_id, name, result, expires_at
            ),
        )
        return rows[0]

    async def journal(self, group: str, envelope_id: str) -> list[asyncpg.Record]:
        """The live steps of the envelope: ``(name, result, expires_at, created_at)``."""
        return await on_driver(
            self._engine,
            _JOURNAL_SQL,
            lambda driver: driver.fetch(_JOURNAL_SQL, *self._scope, group, envelope_id),
        )
