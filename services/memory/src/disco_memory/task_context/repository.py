"""SQL of task contexts (``memory.task_contexts`` and their lookup ``task_context_refs``).

The refs map every id a task waits for — its sub-task ids and the correlation
id of an outstanding question to a human — to the task. They are rewritten in
the same statement batch (one transaction) as the context, so a saved context
is findable by each of its sub-task ids as soon as the save commits.

Saves, reads and deletes are one statement each on the driver, in its own
implicit transaction (the ``memory.*task_context_as`` functions of migration
memory_0008 scope it to the caller's tenant and user): a Worker makes them for
every delegation and every sub-task result. Listing a plan's contexts is a
session's query.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from disco_memory._shared import Stored
from disco_service import Keyset, on_driver

__all__ = ["TaskContextListing", "TaskContextRepository"]

_COLUMNS = (
    "t.task_id, t.plan_id, t.sub_task_ids, t.context, t.version, t.expires_at, "
    "t.created_at, t.updated_at"
)
_LIVE = "(t.expires_at IS NULL OR t.expires_at > now())"
_EXPIRED = "(t.expires_at IS NOT NULL AND t.expires_at <= now())"

_GET_SQL = "SELECT memory.task_context_as($1, $2, $3, $4)"
_STORE_SQL = (
    "SELECT o_outcome, o_detail::text, o_record "
    "FROM memory.store_task_context_as($1, $2, $3, $4, $5::text[], $6::text[], $7, $8, $9)"
)
_DELETE_SQL = "SELECT memory.delete_task_context_as($1, $2, $3)"

_LIST_ORDER = Keyset("t.created_at", "t.task_id")
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.task_contexts t "  # noqa: S608
    f"WHERE t.tenant_id = :tenant_id AND t.plan_id = :plan_id AND {_LIVE} "
)


class TaskContextRepository:
    """Reads and writes the task contexts of one tenant, as one of its users.

    ``tenant_id`` and ``user_id`` must be the caller's verified identity's: each
    statement scopes its transaction to them. Records come back as the JSON
    text of :class:`~disco_common.memory.TaskContextRecord`; only live contexts count.
    """

    def __init__(self, engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
        self._engine = engine
        self._scope = (tenant_id, user_id)

    async def get(self, task_id: str) -> str | None:
        """The live context of ``task_id``, or None."""
        return await self._record(task_id, None)

    async def by_ref(self, ref_id: str) -> str | None:
        """The live context waiting for ``ref_id`` (a sub-task or correlation id), or None."""
        return await self._record(None, ref_id)

    async def _record(self, task_id: str | None, ref_id: str | None) -> str | None:
        record: str | None = await on_driver(
            self._engine,
            _GET_SQL,
            lambda driver: driver.fetchval(_GET_SQL, *self._scope, task_id, ref_id),
        )
        return record

    async def store(
        self,
        task_id: str,
        *,
        plan_id: str | None,
        sub_task_ids: Sequence[str],
        ref_ids: Sequence[str],
        context_json: str,
        expires_at: datetime | None,
        expected: int | None,
    ) -> Stored:
        """Write the context, unless another live task holds one of ``ref_ids`` or
        ``expected`` (None: any; 0: none live yet) is not the live version; the
        ``ref_ids`` then find it (and only they)."""
        row = await on_driver(
            self._engine,
            _STORE_SQL,
            lambda driver: driver.fetchrow(
                _STORE_SQL,
                *self._scope,
                task_id,
                plan_id,
                list(sub_task_ids),
                list(ref_ids),
                context_json,
                expires_at,
                expected,
            ),
        )
        assert row is not None  # the function answers one row, always
        return Stored.of(row)

    async def delete(self, task_id: str) -> bool:
        """Delete the context (and its refs); whether a live one was there."""
        deleted: bool = await on_driver(
            self._engine,
            _DELETE_SQL,
            lambda driver: driver.fetchval(_DELETE_SQL, *self._scope, task_id),
        )
        return deleted


class TaskContextListing:
    """Lists one tenant's task contexts (a session's query: keyset pages)."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def list_by_plan(
        self, plan_id: str, *, after: tuple[datetime, str] | None, limit: int
    ) -> list[RowMapping]:
        """Live contexts of ``plan_id``, oldest first, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {**params, "tenant_id": self._tenant_id, "plan_id": plan_id, "limit": limit},
        )
        return list(result.mappings().all())
