"""SQL of working memory (``memory.working_memory``).

An expired key is absent for every read and write, before the sweeper has
deleted it: reads filter on ``expires_at``, and a write over an expired row
starts it afresh at version 1.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["WorkingMemoryRepository"]

_COLUMNS = "plan_id, key, value, version, expires_at, created_at, updated_at"
_LIVE = "(expires_at IS NULL OR expires_at > now())"
_EXPIRED = "(w.expires_at IS NOT NULL AND w.expires_at <= now())"

_GET = text(
    f"SELECT {_COLUMNS} FROM memory.working_memory "  # noqa: S608
    f"WHERE tenant_id = :tenant_id AND plan_id = :plan_id AND key = :key AND {_LIVE}"
)

_UPSERT = f"""
    INSERT INTO memory.working_memory AS w
        (tenant_id, plan_id, key, user_id, value, version, expires_at)
    VALUES (:tenant_id, :plan_id, :key, :user_id, CAST(CAST(:value AS text) AS jsonb), 1,
            :expires_at)
    ON CONFLICT (tenant_id, plan_id, key) DO UPDATE SET
        value = EXCLUDED.value,
        user_id = EXCLUDED.user_id,
        expires_at = EXCLUDED.expires_at,
        version = CASE WHEN {_EXPIRED} THEN 1 ELSE w.version + 1 END,
        created_at = CASE WHEN {_EXPIRED} THEN now() ELSE w.created_at END,
        updated_at = now()
    {{condition}}
    RETURNING {_COLUMNS}
"""  # noqa: S608
_PUT_ANY = text(_UPSERT.format(condition=""))
# expected_version 0: write only over nothing (or over an expired key).
_PUT_IF_ABSENT = text(_UPSERT.format(condition=f"WHERE {_EXPIRED}"))

_PUT_IF_VERSION = text(
    f"""
    UPDATE memory.working_memory SET
        value = CAST(CAST(:value AS text) AS jsonb), user_id = :user_id,
        expires_at = :expires_at, version = version + 1, updated_at = now()
    WHERE tenant_id = :tenant_id AND plan_id = :plan_id AND key = :key
      AND version = :expected AND {_LIVE}
    RETURNING {_COLUMNS}
    """  # noqa: S608
)

_VERSION = text(
    "SELECT version FROM memory.working_memory "  # noqa: S608
    f"WHERE tenant_id = :tenant_id AND plan_id = :plan_id AND key = :key AND {_LIVE}"
)

_DELETE = text(
    "DELETE FROM memory.working_memory "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND plan_id = :plan_id AND key = :key "
    f"RETURNING {_LIVE} AS live"
)

_CLEAR = text(
    "WITH gone AS (DELETE FROM memory.working_memory "  # noqa: S608
    "WHERE tenant_id = :tenant_id AND plan_id = :plan_id "
    f"RETURNING {_LIVE} AS live) SELECT count(*) FILTER (WHERE live) FROM gone"
)

_LIST_ORDER = Keyset("key")
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.working_memory "  # noqa: S608
    f"WHERE tenant_id = :tenant_id AND plan_id = :plan_id AND {_LIVE} "
)


class WorkingMemoryRepository:
    """Reads and writes one tenant's working memory."""

    def __init__(self, session: AsyncSession, tenant_id: str) -> None:
        self._session = session
        self._tenant_id = tenant_id

    def _key(self, plan_id: str, key: str) -> dict[str, object]:
        return {"tenant_id": self._tenant_id, "plan_id": plan_id, "key": key}

    async def get(self, plan_id: str, key: str) -> RowMapping | None:
        """The live entry, or None."""
        result = await self._session.execute(_GET, self._key(plan_id, key))
        return result.mappings().first()

    async def put(
        self,
        plan_id: str,
        key: str,
        *,
        user_id: str,
        value_json: str,
        expires_at: datetime | None,
        expected: int | None,
    ) -> RowMapping | None:
        """Write the entry; None when ``expected`` did not match the stored version."""
        params = {
            **self._key(plan_id, key),
            "user_id": user_id,
            "value": value_json,
            "expires_at": expires_at,
        }
        if expected is None:
            statement = _PUT_ANY
        elif expected == 0:
            statement = _PUT_IF_ABSENT
        else:
            statement = _PUT_IF_VERSION
            params["expected"] = expected
        result = await self._session.execute(statement, params)
        return result.mappings().first()

    async def current_version(self, plan_id: str, key: str) -> int | None:
        """The live entry's version, or None when there is none."""
        result = await self._session.execute(_VERSION, self._key(plan_id, key))
        return result.scalar_one_or_none()

    async def delete(self, plan_id: str, key: str) -> bool:
        """Delete the entry; whether a live one was there."""
        result = await self._session.execute(_DELETE, self._key(plan_id, key))
        return bool(result.scalar_one_or_none())

    async def clear(self, plan_id: str) -> int:
        """Delete every entry of the plan; how many live ones there were."""
        result = await self._session.execute(
            _CLEAR, {"tenant_id": self._tenant_id, "plan_id": plan_id}
        )
        return int(result.scalar_one())

    async def list(
        self, plan_id: str, *, after: tuple[str, ...] | None, limit: int
    ) -> list[RowMapping]:
        """Live entries of the plan by key, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {**params, "tenant_id": self._tenant_id, "plan_id": plan_id, "limit": limit},
        )
        return list(result.mappings().all())
