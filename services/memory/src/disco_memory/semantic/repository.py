"""SQL of semantic memories (``memory.semantic_memories``, pgvector + HNSW)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg
import pydantic_core
from opentelemetry.trace import SpanKind, Tracer
from pgvector import Vector
from pgvector.asyncpg import register_vector
from sqlalchemy import RowMapping, event, make_url, text
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from disco_memory.settings import MemorySettings
from disco_service import driver_sql

__all__ = [
    "SearchPool",
    "SemanticRepository",
    "SemanticSearch",
    "configure_search",
    "set_search_options",
]

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


# The hot query is sent by asyncpg itself (see SearchPool): driver SQL with $n
# placeholders, prepared once per connection by asyncpg's statement cache; the
# SQL is _QUERY's own.
_QUERY_SQL, _QUERY_PARAMS = driver_sql(_QUERY)


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
    keeps a cache of prepared statements per connection). The similarity query
    itself runs on :class:`SearchPool`'s connections, set up the same way.
    """

    async def setup(connection: asyncpg.Connection) -> None:
        await _prepare_for_search(connection, ef_search=ef_search)

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get(_CONFIGURED) == ef_search:
            return
        dbapi_connection.run_async(setup)
        record.info[_CONFIGURED] = ef_search


async def _prepare_for_search(connection: asyncpg.Connection, *, ef_search: int) -> None:
    """pgvector's binary codec and the HNSW options, on one new asyncpg connection."""
    schema = await connection.fetchval(_VECTOR_SCHEMA)
    if schema is not None:
        await register_vector(connection, schema=schema)
    await connection.execute(
        f"SET hnsw.ef_search = {int(ef_search)}; SET hnsw.iterative_scan = 'relaxed_order'"
    )


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


# A pooled connection that died (a restarted database, a dropped socket): the pool
# replaces it, and the query is tried once more on a fresh one.
# A server that ended the connection (an administrator, a restart) may also leave
# asyncpg's protocol in a state that refuses the next statement (InternalClientError).
_CONNECTION_LOST = (
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    ConnectionError,
)


def _database_error(exc: Exception) -> Exception:
    """``exc`` as the error the kit's handlers answer like the engine's (503 when the
    database is away, 422 for a NUL, else 500): SQLAlchemy's wrapping of it."""
    if isinstance(exc, asyncpg.PostgresError):
        return DBAPIError(_QUERY_SQL, None, exc)
    if isinstance(exc, (asyncpg.InterfaceError, asyncpg.InternalClientError)):
        return InterfaceError(_QUERY_SQL, None, exc, connection_invalidated=True)
    return exc  # ConnectionError, TimeoutError: the kit answers them as they are


def _json_text(value: object) -> str:
    return pydantic_core.to_json(value).decode()


class SearchPool:
    """asyncpg connections of the similarity query alone (the service's hottest statement).

    The query goes to asyncpg directly rather than through the engine: SQLAlchemy's
    pool checkout and return, result wrapping and statement events cost the service
    more CPU than the rest of the request (measured with bench/table.py). It stays
    the statement of :data:`_QUERY`, prepared once per connection (asyncpg's
    statement cache), with pgvector's binary codec and the HNSW options set once per
    connection (:func:`configure_search` does the same on the engine). The function
    scopes its own transaction to the tenant and user and the statement is its own
    transaction, so nothing stays on a connection: it goes back to the pool without
    asyncpg's reset round trip.

    Connections open as queries need them (at most ``search_pool_size``) and close
    after five idle minutes. With ``tracer`` each query is a client span (the
    engine's statements are spans of the SQLAlchemy instrumentation).
    """

    def __init__(
        self, pool: asyncpg.Pool, *, acquire_timeout: float, tracer: Tracer | None = None
    ) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        self._tracer = tracer
        self._span_attributes: dict[str, str | int] = {"db.system": "postgresql"}

    @classmethod
    async def open(cls, settings: MemorySettings, *, tracer: Tracer | None = None) -> SearchPool:
        """A pool on ``settings``' database (no connection opened yet)."""
        url = make_url(settings.database_url)
        ef_search = settings.hnsw_ef_search

        async def init(connection: asyncpg.Connection) -> None:
            await _prepare_for_search(connection, ef_search=ef_search)
            # jsonb (the metadata) arrives as Python values, parsed by pydantic-core.
            await connection.set_type_codec(
                "jsonb",
                schema="pg_catalog",
                encoder=_json_text,
                decoder=pydantic_core.from_json,
                format="text",
            )

        async def keep(connection: asyncpg.Connection) -> None:
            """No reset on release: nothing session-level changed (see the class)."""

        pool = await asyncpg.create_pool(
            url.set(drivername="postgresql").render_as_string(hide_password=False),
            min_size=0,
            max_size=settings.search_pool_size or settings.database_pool_size,
            init=init,
            reset=keep,
            timeout=settings.database_connect_timeout_seconds,
            # As the engine's connections (disco_service.Database): the client's
            # bound a second after the server's statement_timeout.
            command_timeout=settings.database_statement_timeout_ms / 1000 + 1.0,
            server_settings={
                "application_name": f"disco-{settings.service_name}-search",
                "statement_timeout": str(settings.database_statement_timeout_ms),
            },
        )
        search = cls(pool, acquire_timeout=settings.database_pool_timeout_seconds, tracer=tracer)
        search._span_attributes.update(
            {
                "db.name": url.database or "",
                "db.statement": _QUERY_SQL,
                "net.peer.name": url.host or "",
                "net.peer.port": url.port or 5432,
            }
        )
        return search

    async def close(self, timeout: float) -> None:  # noqa: ASYNC109 - a shutdown's budget
        """Close every connection (dropped when they do not close within ``timeout``)."""
        try:
            await asyncio.wait_for(self._pool.close(), timeout)
        except TimeoutError:
            self._pool.terminate()

    def acquire(self) -> AbstractAsyncContextManager[asyncpg.Connection]:
        """One of the pool's connections, for as long as the block runs."""
        return self._pool.acquire(timeout=self._acquire_timeout)  # type: ignore[return-value]

    async def fetch(self, parameters: Sequence[object]) -> list[asyncpg.Record]:
        """The rows of the similarity query for ``parameters`` (in :data:`_QUERY_PARAMS`
        order).

        Raises:
            sqlalchemy.exc.DBAPIError: the database refused or is away (see
                :func:`_database_error`); TimeoutError: no connection free in time,
                or no answer within the statement bound.
        """
        if self._tracer is None:
            return await self._fetch(parameters)
        with self._tracer.start_as_current_span(
            "SELECT", kind=SpanKind.CLIENT, attributes=self._span_attributes
        ):
            return await self._fetch(parameters)

    async def _fetch(self, parameters: Sequence[object]) -> list[asyncpg.Record]:
        for attempt in (1, 2):
            try:
                async with self.acquire() as connection:
                    try:
                        return await connection.fetch(_QUERY_SQL, *parameters)
                    except (TimeoutError, *_CONNECTION_LOST):
                        # No answer within the bound, or a connection the server
                        # ended: drop it (the pool opens another) rather than wait on
                        # a cancellation or hand it to the next query.
                        connection.terminate()
                        raise
            except _CONNECTION_LOST as exc:
                if attempt == 2:
                    error = _database_error(exc)
                    if error is exc:
                        raise
                    raise error from exc
            except asyncpg.PostgresError as exc:
                raise _database_error(exc) from exc
        raise AssertionError("unreachable")


class SemanticSearch:
    """Similarity queries for one user (and the tenant's public memories), each one
    statement in its own implicit transaction: no BEGIN, scope statement or COMMIT."""

    def __init__(self, pool: SearchPool, tenant_id: str, user_id: str) -> None:
        self._pool = pool
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
        rows = await self._pool.fetch(tuple(values[name] for name in _QUERY_PARAMS))
        return [dict(row) for row in rows]
