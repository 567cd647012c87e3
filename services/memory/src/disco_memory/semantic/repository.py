"""SQL of semantic memories (``memory.semantic_memories``, pgvector + HNSW)."""

from __future__ import annotations

import json
import re
from typing import Any

from pgvector import Vector
from pgvector.asyncpg import register_vector
from sqlalchemy import RowMapping, TextClause, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["SemanticRepository", "SemanticSearch", "configure_search", "set_search_options"]

_COLUMNS = (
    "m.memory_id, m.external_id, m.content, m.content_hash, "
    "CASE WHEN m.is_public THEN 'public' ELSE 'private' END AS visibility, "
    "m.metadata, m.user_id, m.created_at, m.updated_at"
)

_FIND_BY_EXTERNAL_ID = text(
    "SELECT memory_id, content_hash FROM memory.semantic_memories "
    "WHERE tenant_id = :tenant_id AND user_id = :user_id AND external_id = :external_id"
)
_FIND_BY_HASH = text(
    "SELECT memory_id, content_hash FROM memory.semantic_memories "
    "WHERE tenant_id = :tenant_id AND user_id = :user_id AND external_id IS NULL "
    "AND content_hash = :content_hash"
)
_INSERT = text(
    "INSERT INTO memory.semantic_memories AS m (memory_id, tenant_id, user_id, external_id, "  # noqa: S608
    "content, content_hash, is_public, metadata, embedding, embedding_model) "
    "VALUES (:memory_id, :tenant_id, :user_id, :external_id, :content, :content_hash, "
    ":is_public, CAST(CAST(:metadata AS text) AS jsonb), CAST(:embedding AS vector), "
    f":model) RETURNING {_COLUMNS}"
)
_UPDATE = text(
    "UPDATE memory.semantic_memories AS m SET content = :content, content_hash = :content_hash, "  # noqa: S608
    "is_public = :is_public, metadata = CAST(CAST(:metadata AS text) AS jsonb), "
    "embedding = COALESCE(CAST(:embedding AS vector), m.embedding), "
    "embedding_model = COALESCE(:model, m.embedding_model), updated_at = now() "
    "WHERE m.tenant_id = :tenant_id AND m.user_id = :user_id AND m.memory_id = :memory_id "
    f"RETURNING {_COLUMNS}"
)
_GET = text(
    f"SELECT {_COLUMNS} FROM memory.semantic_memories m "  # noqa: S608
    "WHERE m.tenant_id = :tenant_id AND m.memory_id = :memory_id "
    "AND (m.user_id = :user_id OR m.is_public)"
)
_DELETE = text(
    "DELETE FROM memory.semantic_memories WHERE tenant_id = :tenant_id AND user_id = :user_id "
    "AND memory_id = :memory_id RETURNING memory_id"
)
_SEARCH_OPTIONS = text(
    "SELECT set_config('hnsw.ef_search', :ef_search, true), "
    "set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)
# One statement, its own transaction (migration memory_0006): the function scopes
# the transaction to the tenant and user, then walks the HNSW index (filters
# applied as it goes, iterative scan until `limit` rows pass them) and restores
# exact order, which relaxed_order may have loosened, and applies the threshold.
_QUERY = text(
    "SELECT * FROM memory.semantic_query_as(:tenant_id, :user_id, :embedding, :limit, "
    ":threshold, CAST(CAST(:filter AS text) AS jsonb), :include_public, :ef_search)"
)


def _positional(statement: TextClause) -> tuple[str, tuple[str, ...]]:
    """``statement``'s SQL with asyncpg's ``$n`` placeholders, and its parameter names
    in that order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"(?<!:):([a-z_]+)\b", number, statement.text), tuple(names)


# The hot query is sent as driver SQL (asyncpg's $n placeholders), outside any
# unit of work: asyncpg keeps it prepared per connection and SQLAlchemy's
# statement compilation is skipped; the SQL is _QUERY's own.
_QUERY_SQL, _QUERY_PARAMS = _positional(_QUERY)


async def set_search_options(session: AsyncSession, *, ef_search: int) -> None:
    """Widen the HNSW candidate list for this transaction (when a query wants more rows
    than the connection's default)."""
    await session.execute(_SEARCH_OPTIONS, {"ef_search": str(ef_search)})


_CONFIGURED = "disco.memory.hnsw"
_VECTOR_SCHEMA = (
    "SELECT n.nspname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
    "WHERE t.typname = 'vector' ORDER BY n.nspname = 'public' DESC LIMIT 1"
)


def configure_search(engine: AsyncEngine, *, ef_search: int) -> None:
    """Set up every pooled connection for vector search, once per connection.

    - pgvector's binary codec for ``vector`` (the ``pgvector`` package's
      ``register_vector``): query vectors travel as 4 bytes a dimension and
      Postgres skips parsing a 384-number text literal (measured: most of the
      gap between the API and a raw query);
    - the HNSW options: session-level settings survive the pool's reset (a
      rollback), so a query needs no extra round trip to set them.
      ``iterative_scan`` lets a filtered query (tenant, user, metadata) keep
      walking the graph until it has ``limit`` rows; the query re-sorts what
      ``relaxed_order`` returns.

    Statements are prepared once per connection (SQLAlchemy's asyncpg dialect
    keeps a cache of prepared statements per connection).
    """
    statement = f"SET hnsw.ef_search = {int(ef_search)}; SET hnsw.iterative_scan = 'relaxed_order'"

    async def setup(connection: Any) -> None:
        schema = await connection.fetchval(_VECTOR_SCHEMA)
        if schema is not None:
            await register_vector(connection, schema=schema)
        await connection.execute(statement)

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get(_CONFIGURED) == ef_search:
            return
        dbapi_connection.run_async(setup)
        record.info[_CONFIGURED] = ef_search


def _decoded(row: Any) -> dict[str, Any]:
    values = dict(row)
    metadata = values.get("metadata")
    if isinstance(metadata, str):  # jsonb without SQLAlchemy's codec
        values["metadata"] = json.loads(metadata)
    return values


class SemanticRepository:
    """Reads and writes semantic memories for one user (and the tenant's public ones)."""

    def __init__(self, session: AsyncSession, tenant_id: str, user_id: str) -> None:
        self._session = session
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    @property
    def session(self) -> AsyncSession:
        """The session it runs in (search options are set on its transaction)."""
        return self._session

    async def find_existing(
        self, *, external_id: str | None, content_hash: str
    ) -> RowMapping | None:
        """The caller's memory this upsert would update (``memory_id``, ``content_hash``)."""
        if external_id is not None:
            result = await self._session.execute(
                _FIND_BY_EXTERNAL_ID, {**self._scope, "external_id": external_id}
            )
        else:
            result = await self._session.execute(
                _FIND_BY_HASH, {**self._scope, "content_hash": content_hash}
            )
        return result.mappings().first()

    async def insert(
        self,
        memory_id: str,
        *,
        external_id: str | None,
        content: str,
        content_hash: str,
        is_public: bool,
        metadata_json: str,
        embedding: Vector,
        model: str,
    ) -> RowMapping:
        """Store a new memory."""
        result = await self._session.execute(
            _INSERT,
            {
                **self._scope,
                "memory_id": memory_id,
                "external_id": external_id,
                "content": content,
                "content_hash": content_hash,
                "is_public": is_public,
                "metadata": metadata_json,
                "embedding": embedding,
                "model": model,
            },
        )
        return result.mappings().one()

    async def update(
        self,
        memory_id: str,
        *,
        content: str,
        content_hash: str,
        is_public: bool,
        metadata_json: str,
        embedding: Vector | None,
        model: str | None,
    ) -> RowMapping:
        """Rewrite one of the caller's memories (the vector only when given)."""
        result = await self._session.execute(
            _UPDATE,
            {
                **self._scope,
                "memory_id": memory_id,
                "content": content,
                "content_hash": content_hash,
                "is_public": is_public,
                "metadata": metadata_json,
                "embedding": embedding,
                "model": model,
            },
        )
        return result.mappings().one()

    async def get(self, memory_id: str) -> RowMapping | None:
        """A memory the caller may read, or None."""
        result = await self._session.execute(_GET, {**self._scope, "memory_id": memory_id})
        return result.mappings().first()

    async def delete(self, memory_id: str) -> bool:
        """Delete one of the caller's memories; whether it was there."""
        result = await self._session.execute(_DELETE, {**self._scope, "memory_id": memory_id})
        return result.first() is not None


class SemanticSearch:
    """Similarity queries for one user (and the tenant's public memories), each one
    statement in its own implicit transaction: no BEGIN, scope statement or COMMIT."""

    def __init__(self, engine: AsyncEngine, tenant_id: str, user_id: str) -> None:
        self._engine = engine
        self._scope = {"tenant_id": tenant_id, "user_id": user_id}

    async def query(
        self,
        *,
        embedding: Vector,
        limit: int,
        threshold: float | None,
        filter_json: str,
        include_public: bool,
        ef_search: int | None,
    ) -> list[dict[str, Any]]:
        """The nearest memories to ``embedding`` (with ``distance`` and ``score``);
        ``ef_search`` widens the HNSW candidate list for this query when given."""
        values = {
            **self._scope,
            "embedding": embedding,
            "limit": limit,
            "threshold": threshold,
            "filter": filter_json,
            "include_public": include_public,
            "ef_search": ef_search,
        }
        parameters = tuple(values[name] for name in _QUERY_PARAMS)
        for attempt in (1, 2):
            try:
                async with self._engine.connect() as connection:
                    # No BEGIN/COMMIT: the one statement is its own transaction.
                    await connection.execution_options(isolation_level="AUTOCOMMIT")
                    result = await connection.exec_driver_sql(_QUERY_SQL, parameters)
                    return [_decoded(row) for row in result.mappings()]
            except DBAPIError as exc:
                # A pooled connection from before a database restart: the pool is
                # invalidated now, and the second try gets a fresh connection.
                if not exc.connection_invalidated or attempt == 2:
                    raise
        raise AssertionError("unreachable")
