"""SQL of plan contexts (``memory.plan_contexts`` and their lookup ``plan_context_refs``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["PlanContextRepository"]

_COLUMNS = (
    "p.plan_id, p.session_id, p.correlation_ids, p.context, p.version, p.created_at, p.updated_at"
)

_GET = text(
    f"SELECT {_COLUMNS} FROM memory.plan_contexts p "  # noqa: S608
    "WHERE p.tenant_id = :tenant_id AND p.plan_id = :plan_id"
)
_BY_CORRELATION = text(
    f"SELECT {_COLUMNS} FROM memory.plan_context_refs r "  # noqa: S608
    "JOIN memory.plan_contexts p ON p.tenant_id = r.tenant_id AND p.plan_id = r.plan_id "
    "WHERE r.tenant_id = :tenant_id AND r.correlation_id = :correlation_id"
)
_UPSERT = f"""
    INSERT INTO memory.plan_contexts AS p
        (tenant_id, plan_id, session_id, user_id, correlation_ids, context, version)
    VALUES (:tenant_id, :plan_id, :session_id, :user_id, :correlation_ids,
            CAST(CAST(:context AS text) AS jsonb), 1)
    ON CONFLICT (tenant_id, plan_id) DO UPDATE SET
        session_id = EXCLUDED.session_id,
        user_id = EXCLUDED.user_id,
        correlation_ids = EXCLUDED.correlation_ids,
        context = EXCLUDED.context,
        version = p.version + 1,
        updated_at = now()
    {{condition}}
    RETURNING {_COLUMNS}
"""  # noqa: S608
_PUT_ANY = text(_UPSERT.format(condition=""))
_PUT_IF_ABSENT = text(_UPSERT.format(condition="WHERE false"))
_PUT_IF_VERSION = text(
    f"""
    UPDATE memory.plan_contexts p SET
        session_id = :session_id, user_id = :user_id, correlation_ids = :correlation_ids,
        context = CAST(CAST(:context AS text) AS jsonb), version = p.version + 1,
        updated_at = now()
    WHERE p.tenant_id = :tenant_id AND p.plan_id = :plan_id AND p.version = :expected
    RETURNING {_COLUMNS}
    """  # noqa: S608
)
_VERSION = text(
    "SELECT version FROM memory.plan_contexts WHERE tenant_id = :tenant_id AND plan_id = :plan_id"
)
_CLAIMED_ELSEWHERE = text(
    "SELECT correlation_id, plan_id FROM memory.plan_context_refs "
    "WHERE tenant_id = :tenant_id AND correlation_id = ANY(:ids) AND plan_id <> :plan_id"
)
_CLEAR_REFS = text(
    "DELETE FROM memory.plan_context_refs WHERE tenant_id = :tenant_id AND plan_id = :plan_id"
)
_ADD_REFS = text(
    "INSERT INTO memory.plan_context_refs (tenant_id, correlation_id, plan_id) "
    "SELECT :tenant_id, correlation_id, :plan_id "
    "FROM unnest(CAST(:ids AS text[])) AS correlation_id"
)
_DELETE = text(
    "DELETE FROM memory.plan_contexts WHERE tenant_id = :tenant_id AND plan_id = :plan_id "
    "RETURNING plan_id"
)


class PlanContextRepository:
    """Reads and writes one tenant's plan contexts."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    def _plan(self, plan_id: str) -> dict[str, object]:
        return {"tenant_id": self._tenant_id, "plan_id": plan_id}

    async def get(self, plan_id: str) -> RowMapping | None:
        """The context of ``plan_id``, or None."""
        return (await self._session.execute(_GET, self._plan(plan_id))).mappings().first()

    async def by_correlation(self, correlation_id: str) -> RowMapping | None:
        """The context of the plan waiting for ``correlation_id``, or None."""
        result = await self._session.execute(
            _BY_CORRELATION, {"tenant_id": self._tenant_id, "correlation_id": correlation_id}
        )
        return result.mappings().first()

    async def claimed_elsewhere(self, plan_id: str, ids: Sequence[str]) -> dict[str, str]:
        """Which of ``ids`` another plan already waits for (correlation id -> plan)."""
        if not ids:
            return {}
        rows = await self._session.execute(
            _CLAIMED_ELSEWHERE, {**self._plan(plan_id), "ids": list(ids)}
        )
        return {row.correlation_id: row.plan_id for row in rows}

    async def put(
        self,
        plan_id: str,
        *,
        session_id: str | None,
        user_id: str,
        correlation_ids: Sequence[str],
        context_json: str,
        expected: int | None,
    ) -> RowMapping | None:
        """Write the context; None when ``expected`` did not match the stored version."""
        params: dict[str, object] = {
            **self._plan(plan_id),
            "session_id": session_id,
            "user_id": user_id,
            "correlation_ids": list(correlation_ids),
            "context": context_json,
        }
        if expected is None:
            statement = _PUT_ANY
        elif expected == 0:
            statement = _PUT_IF_ABSENT
        else:
            statement = _PUT_IF_VERSION
            params["expected"] = expected
        return (await self._session.execute(statement, params)).mappings().first()

    async def replace_refs(self, plan_id: str, ids: Sequence[str]) -> None:
        """Make ``ids`` exactly the correlation ids that find ``plan_id``."""
        await self._session.execute(_CLEAR_REFS, self._plan(plan_id))
        if ids:
            await self._session.execute(_ADD_REFS, {**self._plan(plan_id), "ids": list(ids)})

    async def current_version(self, plan_id: str) -> int | None:
        """The stored version, or None."""
        return (await self._session.execute(_VERSION, self._plan(plan_id))).scalar_one_or_none()

    async def delete(self, plan_id: str) -> bool:
        """Delete the context (and its refs); whether it was there."""
        result = await self._session.execute(_DELETE, self._plan(plan_id))
        return result.first() is not None
