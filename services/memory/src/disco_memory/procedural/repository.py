"""SQL of procedures (``memory.procedures``), private or public to the tenant."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pgvector import Vector
from sqlalchemy import RowMapping, text
from sqlalchemy.ext.asyncio import AsyncSession

from disco_service import Keyset

__all__ = ["ProcedureRepository"]

_COLUMNS = (
    "p.procedure_id, p.name, p.trigger, p.steps, p.instructions, p.agent_id, "
    "CASE WHEN p.is_public THEN 'public' ELSE 'private' END AS visibility, "
    "p.metadata, p.user_id, p.version, p.created_at, p.updated_at"
)
_READABLE = "p.tenant_id = :tenant_id AND (p.user_id = :user_id OR p.is_public)"

_INSERT = text(
    "INSERT INTO memory.procedures AS p (procedure_id, tenant_id, user_id, name, trigger, steps, "  # noqa: S608
    "instructions, agent_id, is_public, metadata, embedding, embedding_model, version) "
    "VALUES (:procedure_id, :tenant_id, :user_id, :name, :trigger, "
    "CAST(CAST(:steps AS text) AS jsonb), :instructions, :agent_id, :is_public, "
    "CAST(CAST(:metadata AS text) AS jsonb), CAST(:embedding AS vector), :model, 1) "
    f"RETURNING {_COLUMNS}"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM memory.procedures p "  # noqa: S608
    f"WHERE {_READABLE} AND p.procedure_id = :procedure_id"
)
_GET_OWN_FOR_UPDATE = text(
    f"SELECT {_COLUMNS}, p.embedding_model FROM memory.procedures p "  # noqa: S608
    "WHERE p.tenant_id = :tenant_id AND p.user_id = :user_id "
    "AND p.procedure_id = :procedure_id FOR UPDATE"
)
_UPDATE = text(
    "UPDATE memory.procedures AS p SET name = :name, trigger = :trigger, "  # noqa: S608
    "steps = CAST(CAST(:steps AS text) AS jsonb), instructions = :instructions, "
    "agent_id = :agent_id, is_public = :is_public, "
    "metadata = CAST(CAST(:metadata AS text) AS jsonb), "
    "embedding = COALESCE(CAST(:embedding AS vector), p.embedding), "
    "embedding_model = COALESCE(:model, p.embedding_model), "
    "version = p.version + 1, updated_at = now() "
    "WHERE p.tenant_id = :tenant_id AND p.user_id = :user_id AND p.procedure_id = :procedure_id "
    f"RETURNING {_COLUMNS}"
)
_DELETE = text(
    "DELETE FROM memory.procedures WHERE tenant_id = :tenant_id AND user_id = :user_id "
    "AND procedure_id = :procedure_id RETURNING procedure_id"
)
_LIST_ORDER = Keyset("p.created_at", "p.procedure_id", descending=True)
_LIST = (
    f"SELECT {_COLUMNS} FROM memory.procedures p WHERE {_READABLE} "  # noqa: S608
    "AND (CAST(:agent_id AS text) IS NULL OR p.agent_id = :agent_id) "
)
_SEARCH = text(
    f"""
    WITH hits AS MATERIALIZED (
        SELECT {_COLUMNS}, p.embedding <=> CAST(:embedding AS vector) AS distance
        FROM memory.procedures p
        WHERE {_READABLE}
          AND (CAST(:agent_id AS text) IS NULL OR p.agent_id IS NULL OR p.agent_id = :agent_id)
        ORDER BY distance LIMIT :limit
    )
    SELECT *, 1 - distance AS score FROM hits
    WHERE CAST(:threshold AS double precision) IS NULL
       OR 1 - distance >= CAST(:threshold AS double precision)
    ORDER BY distance
    """  # noqa: S608
)


class ProcedureRepository:
    """Reads and writes procedures for one user (and the tenant's public ones)."""

    def __init__(self, session: AsyncSession, tenant_id: str, user_id: str) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    @property
    def session(self) -> AsyncSession:
        """The session it runs in."""
        return self._session

    async def insert(self, procedure_id: str, **values: Any) -> RowMapping:
        """Store a procedure (columns as keyword arguments)."""
        result = await self._session.execute(
            _INSERT, {**self._scope, "procedure_id": procedure_id, **values}
        )
        return result.mappings().one()

    async def get(self, procedure_id: str) -> RowMapping | None:
        """A procedure the caller may read, or None."""
        result = await self._session.execute(_GET, {**self._scope, "procedure_id": procedure_id})
        return result.mappings().first()

    async def get_own_for_update(self, procedure_id: str) -> RowMapping | None:
        """One of the caller's procedures, locked for the transaction, or None."""
        result = await self._session.execute(
            _GET_OWN_FOR_UPDATE, {**self._scope, "procedure_id": procedure_id}
        )
        return result.mappings().first()

    async def update(self, procedure_id: str, **values: Any) -> RowMapping:
        """Rewrite one of the caller's procedures (the vector only when given)."""
        result = await self._session.execute(
            _UPDATE, {**self._scope, "procedure_id": procedure_id, **values}
        )
        return result.mappings().one()

    async def delete(self, procedure_id: str) -> bool:
        """Delete one of the caller's procedures; whether it was there."""
        result = await self._session.execute(_DELETE, {**self._scope, "procedure_id": procedure_id})
        return result.first() is not None

    async def list_readable(
        self, *, agent_id: str | None, after: tuple[datetime, str] | None, limit: int
    ) -> list[RowMapping]:
        """Readable procedures, newest first, after ``after``."""
        seek, params = _LIST_ORDER.after(after)
        result = await self._session.execute(
            text(f"{_LIST} AND {seek} {_LIST_ORDER.order_by} LIMIT :limit"),
            {**params, **self._scope, "agent_id": agent_id, "limit": limit},
        )
        return list(result.mappings().all())

    async def search(
        self, *, embedding: Vector, agent_id: str | None, limit: int, threshold: float | None
    ) -> list[RowMapping]:
        """The readable procedures nearest to ``embedding`` (with ``score``)."""
        result = await self._session.execute(
            _SEARCH,
            {
                **self._scope,
                "embedding": embedding,
                "agent_id": agent_id,
                "limit": limit,
                "threshold": threshold,
            },
        )
        return list(result.mappings().all())
