"""SQL of task contexts (``memory.task_contexts`` and their lookup ``task_context_refs``).

The refs map every id a task waits for — its sub-task ids and the correlation
id of an outstanding question to a human — to the task. They are rewritten in
the same statement batch (one transaction) as the context, so a saved context
is findable by each of its sub-task ids as soon as the save commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["TaskContextRepository"]

_COLUMNS = (
    "t.task_id, t.plan_id, t.sub_task_ids, t.context, t.version, t.expires_at, "
    "t.created_at, t.updated_at"
)
_LIVE = "(t.expires_at IS NULL OR t.expires_at > now())"
_EXPIRED = "(t.expires_at IS NOT NULL AND t.expires_at <= now())"

_GET = text(
    f"SELECT {_COLUMNS} FROM memory.task_contexts t "  # noqa: S608
    f"WHERE t.tenant_id = :tenant_id AND t.task_id = :task_id AND {_LIVE}"
)

_BY_REF = text(
    f"SELECT {_COLUMNS} FROM memory.task_context_refs r "  # noqa: S608
    "JOIN memory.task_contexts t ON t.tenant_id = r.tenant_id AND t.task_id = r.task_id "
    f"WHERE r.tenant_id = :tenant_id AND r.ref_id = :ref_id AND {_LIVE}"
)

_UPSERT = f"""
    INSERT INTO memory.task_contexts AS t
        (tenant_id, task_id, plan_id, user_id, sub_task_ids, context, version, expires_at)
    VALUES (:tenant_id, :task_id, :plan_id, :user_id, :sub_task_ids,
            CAST(CAST(:context AS text) AS jsonb), 1, :expires_at)
    ON CONFLICT (tenant_id, task_id) DO UPDATE SET
        plan_id = EXCLUDED.plan_id,
        user_id = EXCLUDED.user_id,
        sub_task_ids = EXCLUDED.sub_task_ids,
        context = EXCLUDED.context,
        expires_at = EXCLUDED.expires_at,
        version = CASE WHEN {_EXPIRED} THEN 1 ELSE t.version + 1 END,
        created_at = CASE WHEN {_EXPIRED} THEN now() ELSE t.created_at END,
        updated_at = now()
    {{condition}}
    RETURNING {_COLUMNS}
"""  # noqa: S608
_PUT_ANY = text(_UPSERT.format(condition=""))
_PUT_IF_ABSENT = text(_UPSERT.format(condition=f"WHERE {_EXPIRED}"))
_PUT_IF_VERSION = text(
    f"""
    UPDATE memory.task_contexts t SET
        plan_id = :plan_id, user_id = :user_id, sub_task_ids = :sub_task_ids,
        context = CAST(CAST(:context AS text) AS jsonb), expires_at = :expires_at,
        version = t.version + 1, updated_at = now()
    WHERE t.tenant_id = :tenant_id AND t.task_id = :task_id AND t.version = :expected
      AND {_LIVE}
    RETURNING {_COLUMNS}
    """  # noqa: S608
)

_VERSION = text(
    "SELECT t.version FROM memory.task_contexts t "  # noqa: S608
    f"WHERE t.tenant_id = :tenant_id AND t.task_id = :task_id AND {_LIVE}"
)

_CLAIMED_ELSEWHERE = text(
    "SELECT r.ref_id, r.task_id FROM memory.task_context_refs r "  # noqa: S608
    "JOIN memory.task_contexts t ON t.tenant_id = r.tenant_id AND t.task_id = r.task_id "
    "WHERE r.tenant_id = :tenant_id AND r.ref_id = ANY(:ref_ids) AND r.task_id <> :task_id "
    f"AND {_LIVE}"
)
# Refs of expired contexts no longer count: the new owner takes them over.
_RELEASE_EXPIRED = text(
    "DELETE FROM memory.task_context_refs r USING memory.task_contexts t "  # noqa: S608
    "WHERE t.tenant_id = r.tenant_id AND t.task_id = r.task_id "
    "AND r.tenant_id = :tenant_id AND r.ref_id = ANY(:ref_ids) AND r.task_id <> :task_id "
    f"AND {_EXPIRED}"
)
_CLEAR_REFS = text(
    "DELETE FROM memory.task_context_refs WHERE tenant_id = :tenant_id AND task_id = :task_id"
)
_ADD_REFS = text(
    "INSERT INTO memory.task_context_refs (tenant_id, ref_id, task_id) "
    "SELECT :tenant_id, ref_id, :task_id FROM unnest(CAST(:ref_ids AS text[])) AS ref_id"
)

_DELETE = text(
    "DELETE FROM memory.task_contexts t "  # noqa: S608
    f"WHERE t.tenant_id = :tenant_id AND t.task_id = :task_id RETURNING {_LIVE} AS live"
)

_LIST_ORDER = Keyset("t.created_at", "t.task_id")
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.task_contexts t "  # noqa: S608
    f"WHERE t.tenant_id = :tenant_id AND t.plan_id = :plan_id AND {_LIVE} "
)


class TaskContextRepository:
    """Reads and writes one tenant's task contexts."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    async def get(self, task_id: str) -> RowMapping | None:
        """The live context of ``task_id``, or None."""
        result = await self._session.execute(
            _GET, {"tenant_id": self._tenant_id, "task_id": task_id}
        )
        return result.mappings().first()

    async def by_ref(self, ref_id: str) -> RowMapping | None:
        """The live context waiting for ``ref_id`` (a sub-task or correlation id), or None."""
        result = await self._session.execute(
            _BY_REF, {"tenant_id": self._tenant_id, "ref_id": ref_id}
        )
        return result.mappings().first()

    async def claimed_elsewhere(self, task_id: str, ref_ids: Sequence[str]) -> dict[str, str]:
        """Which of ``ref_ids`` another live task already waits for (ref -> task)."""
        if not ref_ids:
            return {}
        params = {"tenant_id": self._tenant_id, "task_id": task_id, "ref_ids": list(ref_ids)}
        await self._session.execute(_RELEASE_EXPIRED, params)
        rows = (await self._session.execute(_CLAIMED_ELSEWHERE, params)).all()
        return {row.ref_id: row.task_id for row in rows}

    async def put(
        self,
        task_id: str,
        *,
        plan_id: str | None,
        user_id: str,
        sub_task_ids: Sequence[str],
        context_json: str,
        expires_at: datetime | None,
        expected: int | None,
    ) -> RowMapping | None:
        """Write the context; None when ``expected`` did not match the stored version."""
        params: dict[str, object] = {
            "tenant_id": self._tenant_id,
            "task_id": task_id,
            "plan_id": plan_id,
            "user_id": user_id,
            "sub_task_ids": list(sub_task_ids),
            "context": context_json,
            "expires_at": expires_at,
        }
        if expected is None:
            statement = _PUT_ANY
        elif expected == 0:
            statement = _PUT_IF_ABSENT
        else:
            statement = _PUT_IF_VERSION
            params["expected"] = expected
        return (await self._session.execute(statement, params)).mappings().first()

    async def replace_refs(self, task_id: str, ref_ids: Sequence[str]) -> None:
        """Make ``ref_ids`` exactly the ids that find ``task_id``."""
        params = {"tenant_id": self._tenant_id, "task_id": task_id}
        await self._session.execute(_CLEAR_REFS, params)
        if ref_ids:
            await self._session.execute(_ADD_REFS, {**params, "ref_ids": list(ref_ids)})

    async def current_version(self, task_id: str) -> int | None:
        """The live context's version, or None."""
        result = await self._session.execute(
            _VERSION, {"tenant_id": self._tenant_id, "task_id": task_id}
        )
        return result.scalar_one_or_none()

    async def delete(self, task_id: str) -> bool:
        """Delete the context (and its refs); whether a live one was there."""
        result = await self._session.execute(
            _DELETE, {"tenant_id": self._tenant_id, "task_id": task_id}
        )
        return bool(result.scalar_one_or_none())

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
