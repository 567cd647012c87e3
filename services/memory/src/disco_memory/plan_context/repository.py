"""SQL of plan contexts (``memory.plan_contexts`` and their lookup ``plan_context_refs``).

Each call is one statement on the driver, in its own implicit transaction: a
function of migration memory_0007 scopes it to the caller's tenant and user
and does the call's statements (a save was seven round trips: BEGIN, the scope,
the claim check, the write, the refs twice, COMMIT; a Planner makes one per step).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from disco_memory._shared import Stored
from disco_service import on_driver

__all__ = ["PlanContextRepository"]

_GET_SQL = "SELECT memory.plan_context_as($1, $2, $3, $4)"
_STORE_SQL = (
    "SELECT o_outcome, o_detail::text, o_record "
    "FROM memory.store_plan_context_as($1, $2, $3, $4, $5::text[], $6, $7)"
)
_DELETE_SQL = "SELECT memory.delete_plan_context_as($1, $2, $3)"


class PlanContextRepository:
    """Reads and writes the plan contexts of one tenant, as one of its users.

    ``tenant_id`` and ``user_id`` must be the caller's verified identity's: each
    statement scopes its transaction to them. Records come back as the JSON
    text of :class:`~disco_common.memory.PlanContextRecord`.
    """

    def __init__(self, engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
        self._engine = engine
        self._scope = (tenant_id, user_id)

    async def get(self, plan_id: str) -> str | None:
        """The context of ``plan_id``, or None."""
        return await self._record(plan_id, None)

    async def by_correlation(self, correlation_id: str) -> str | None:
        """The context of the plan waiting for ``correlation_id``, or None."""
        return await self._record(None, correlation_id)

    async def _record(self, plan_id: str | None, correlation_id: str | None) -> str | None:
        record: str | None = await on_driver(
            self._engine,
            _GET_SQL,
            lambda driver: driver.fetchval(_GET_SQL, *self._scope, plan_id, correlation_id),
        )
        return record

    async def store(
        self,
        plan_id: str,
        *,
        session_id: str | None,
        correlation_ids: Sequence[str],
        context_json: str,
        expected: int | None,
    ) -> Stored:
        """Write the context, unless another plan holds one of ``correlation_ids`` or
        ``expected`` (None: any; 0: none yet) is not the stored version; the
        correlation ids then find it (and only they)."""
        row = await on_driver(
            self._engine,
            _STORE_SQL,
            lambda driver: driver.fetchrow(
                _STORE_SQL,
                *self._scope,
                plan_id,
                session_id,
                list(correlation_ids),
                context_json,
                expected,
            ),
        )
        assert row is not None  # the function answers one row, always
        return Stored.of(row)

    async def delete(self, plan_id: str) -> bool:
        """Delete the context (and its refs); whether it was there."""
        deleted: bool = await on_driver(
            self._engine,
            _DELETE_SQL,
            lambda driver: driver.fetchval(_DELETE_SQL, *self._scope, plan_id),
        )
        return deleted
