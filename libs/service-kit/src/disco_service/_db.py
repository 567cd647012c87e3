"""Async SQLAlchemy engine and tenant-scoped units of work.

Row-level security (see :mod:`disco_service.migration_helpers`) reads the
tenant and user from two transaction-local settings, ``disco.tenant_id`` and
``disco.user_id``. Every transaction a session opens sets them first (an
``after_begin`` hook), so a session can never run a query as "no tenant"
by accident — and a session without a tenant sees no tenant-scoped row at all.

A unit of work is one transaction: it commits once at its end, or rolls back
if anything raised. Services may ``flush()``, never ``commit()`` (STYLE 7).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import asyncpg
from sqlalchemy import event, text
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.orm import Session, SessionTransaction
from sqlalchemy.pool import NullPool, QueuePool
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.util import greenlet_spawn

from disco_service._faults import database_unavailable
from disco_service._settings import ServiceSettings

__all__ = ["Database", "driver_sql", "on_driver", "statement_alone"]

TENANT_SETTING = "disco.tenant_id"
USER_SETTING = "disco.user_id"
# Keys in Session.info.
_TENANT_KEY = "disco.tenant_id"
_USER_KEY = "disco.user_id"
_SCHEMA_KEY = "disco.schema"
OUTBOX_PENDING_KEY = "disco.outbox_pending"

_SET_SCOPE = text(
    f"SELECT set_config('{TENANT_SETTING}', :tenant, true), "
    f"set_config('{USER_SETTING}', :user, true)"
)
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _apply_scope(session: Session, transaction: SessionTransaction, connection: Connection) -> None:
    # Only the outermost transaction: savepoints live inside it and share its settings.
    if transaction.nested or transaction.parent is not None:
        return
    tenant = session.info.get(_TENANT_KEY)
    user = session.info.get(_USER_KEY)
    if tenant is None and user is None:
        return
    connection.execute(_SET_SCOPE, {"tenant": tenant or "", "user": user or ""})


class _ScopedSession(Session):
    """The sync session behind every kit session; it carries the scoping hook."""


event.listen(_ScopedSession, "after_begin", _apply_scope)


def _drop_timed_out(context: ExceptionContext) -> None:
    """Abort the connection of a statement the client-side bound timed out.

    That bound only fires when the server did not answer (its own
    ``statement_timeout`` comes a second earlier), so the connection is of no
    further use. Aborting it now spares the caller SQLAlchemy's graceful close
    of it (a 2 s wait on a server that does not answer) on top of the bound.
    """
    if not isinstance(context.original_exception, TimeoutError):
        return
    connection = context.connection
    if connection is None or connection.closed or connection.invalidated:
        return
    driver = connection.connection.driver_connection
    if driver is not None and hasattr(driver, "terminate"):
        driver.terminate()


class Database:
    """One service's connection pool and its units of work.

    Create it in the lifespan (never at import) and :meth:`dispose` it on the
    way out. ``schema`` is the Postgres schema the service owns (its outbox
    lives there).
    """

    def __init__(self, settings: ServiceSettings, *, schema: str) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            # It is spliced into SQL (the outbox's table name): keep it an identifier.
            raise ValueError(f"schema {schema!r} must be a lower-case SQL identifier")
        self.schema = schema
        self._connect_timeout = settings.database_connect_timeout_seconds
        self._url = settings.database_url
        self._connect_args = connect_args = {
            "timeout": settings.database_connect_timeout_seconds,
            # The client's bound on every statement (asyncpg's command_timeout):
            # a stalled server cancels nothing, so the server's own
            # statement_timeout alone would leave the caller waiting. A
            # second more, so that a live server's cleaner error comes first.
            "command_timeout": settings.database_statement_timeout_ms / 1000 + 1.0,
            "server_settings": {
                "application_name": f"disco-{schema}",
                "statement_timeout": str(settings.database_statement_timeout_ms),
            },
        }
        self.engine: AsyncEngine = create_async_engine(
            settings.database_url,
            pool_size=settings.database_pool_size,
            max_overflow=settings.database_max_overflow,
            pool_timeout=settings.database_pool_timeout_seconds,
            # No pre-ping: it costs round trips on every checkout. A connection
            # that died with a restarted database is caught where a unit of
            # work starts (see _begin) and replaced there, once.
            pool_pre_ping=False,
            connect_args=connect_args,
        )
        self._unpooled: AsyncEngine | None = None
        event.listen(self.engine.sync_engine, "handle_error", _drop_timed_out)
        self.sessionmaker = async_sessionmaker(
            self.engine, expire_on_commit=False, sync_session_class=_ScopedSession
        )
        self._after_outbox_commit: list[Callable[[], None]] = []

    def on_outbox_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after each commit that added rows to the outbox."""
        self._after_outbox_commit.append(callback)

    def notify_outbox_commit(self) -> None:
        """Tell the outbox relay that a commit just added rows to the outbox.

        Units of work do it themselves; call it after a statement that wrote
        outbox rows outside one (an implicit transaction) committed.
        """
        for callback in self._after_outbox_commit:
            callback()

    def session(self, *, tenant_id: str | None = None, user_id: str | None = None) -> AsyncSession:
        """A new session whose transactions are scoped to ``tenant_id``/``user_id``.

        Prefer :meth:`unit_of_work`, which also commits and rolls back for you.
        """
        return self.sessionmaker(
            info={_TENANT_KEY: tenant_id, _USER_KEY: user_id, _SCHEMA_KEY: self.schema}
        )

    @asynccontextmanager
    async def unit_of_work(
        self, tenant_id: str | None, user_id: str | None = None
    ) -> AsyncIterator[AsyncSession]:
        """One transaction for ``tenant_id``: committed at the end, rolled back on error.

        For background jobs acting for one tenant (outside a request). With
        ``tenant_id=None`` the transaction sees no tenant-scoped row: that is
        how system jobs touch only what is theirs (the outbox, or the
        ``SECURITY DEFINER`` functions described in ``migrations/README.md``).
        """
        async with self.session(tenant_id=tenant_id, user_id=user_id) as session:
            await _begin(session)
            try:
                yield session
                await session.commit()
            except BaseException as exc:
                await _abandon(session, exc)
                raise
            if session.info.pop(OUTBOX_PENDING_KEY, False):
                self.notify_outbox_commit()

    async def ping(self, timeout: float) -> None:  # noqa: ASYNC109 - a probe's budget
        """Raise unless ``SELECT 1`` succeeds within ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            await statement_alone(self.engine, lambda connection: connection.execute(_PING))

    @property
    def unpooled(self) -> AsyncEngine:
        """An engine without a pool, for connections held as long as a service runs
        (a ``LISTEN``): they never take a request's place in the pool. Made at first use."""
        if self._unpooled is None:
            self._unpooled = create_async_engine(
                self._url, poolclass=NullPool, connect_args=self._connect_args
            )
        return self._unpooled

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
        if self._unpooled is not None:
            await self._unpooled.dispose()


_PING = text("SELECT 1")
_T = TypeVar("_T")


async def statement_alone(
    engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[_T]]
) -> _T:
    """``work`` on a pooled connection in autocommit: each statement is its own
    implicit transaction (no BEGIN, scope statement or COMMIT; one round trip).

    A pooled connection from before a database restart fails once and
    invalidates the pool; ``work`` is then tried again on a fresh connection, so
    it must be safe to repeat (a read, an upsert, or a write whose side effects
    are deduplicated downstream).
    """
    for attempt in (1, 2):
        try:
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                return await work(connection)
        except DBAPIError as exc:
            if not exc.connection_invalidated or attempt == 2:
                raise
    raise AssertionError("unreachable")


# What says the connection, not the statement, failed: replace it and try once more.
# InternalClientError: asyncpg's protocol state when the server ended the session
# (pg_terminate_backend, a restart) before the client read the news; raised before
# the statement is sent ("cannot switch to state ...; another operation is in progress").
_CONNECTION_LOST = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    ConnectionError,
)


_NAMED_PARAMETER = re.compile(r"(?<!:):([a-z_]+)\b")


def driver_sql(statement: TextClause | str) -> tuple[str, tuple[str, ...]]:
    """``statement``'s SQL with the driver's ``$n`` placeholders for its ``:name``
    parameters (``::`` casts left alone), and the parameter names in ``$n`` order: the
    same statement, for :func:`on_driver`."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    sql = statement.text if isinstance(statement, TextClause) else statement
    return _NAMED_PARAMETER.sub(number, sql), tuple(names)


async def on_driver(
    engine: AsyncEngine, statement: str, work: Callable[[asyncpg.Connection], Awaitable[_T]]
) -> _T:
    """``work`` (one statement, ``statement``, in the driver's ``$n`` placeholders) on
    the asyncpg connection of a pooled connection, in its own implicit transaction.

    For the statements a caller waits on, on every request: SQLAlchemy's connection,
    cursor and result wrappers (and their SQL span) cost more CPU than a short
    statement itself. Errors are SQLAlchemy's all the same (``DBAPIError`` with the
    driver's error as ``orig``), so a service's database-fault handling reads them as
    it reads any other. A connection that died with a restarted database is replaced
    and ``work`` tried once more, as :func:`statement_alone` does, so it must be safe
    to repeat; one whose statement timed out on the client's bound is dropped.
    """
    for attempt in (1, 2):
        pooled = await engine.raw_connection()
        driver: asyncpg.Connection = pooled.driver_connection  # type: ignore[assignment]
        failed: BaseException | None = None
        try:
            return await work(driver)
        except TimeoutError as exc:
            failed = exc
            driver.terminate()  # no answer: the connection is of no further use
            raise
        except _CONNECTION_LOST as exc:
            failed = exc
            if attempt == 2:
                raise OperationalError(statement, None, exc, connection_invalidated=True) from exc
        except asyncpg.PostgresError as exc:
            raise DBAPIError(statement, None, exc) from exc
        finally:
            if failed is not None:
                await greenlet_spawn(pooled.invalidate, failed)
            elif _pool_is_full(engine):
                # An overflow connection: the pool closes it, which is I/O (outside a
                # greenlet it fails, is logged and leaves the connection open).
                await greenlet_spawn(pooled.close)
            else:
                pooled.close()  # back to the pool: no transaction to reset, no I/O
    raise AssertionError("unreachable")  # pragma: no cover


def _pool_is_full(engine: AsyncEngine) -> bool:
    """Whether a connection handed back now would not fit in the pool (it is closed)."""
    pool = engine.sync_engine.pool
    return isinstance(pool, QueuePool) and pool.checkedin() >= pool.size()


async def _begin(session: AsyncSession) -> None:
    """Start the session's transaction now: a connection, BEGIN and the tenant scope.

    Starting here rather than at the first query lets a connection that died
    with a restarted database be replaced before any work was done: the
    failure invalidates the pool and the second try gets a fresh connection.
    """
    for attempt in (1, 2):
        try:
            await session.connection()
            return
        except DBAPIError as exc:
            await _abandon(session, exc)
            if not exc.connection_invalidated or attempt == 2:
                raise
        except BaseException as exc:
            await _abandon(session, exc)
            raise


async def _abandon(session: AsyncSession, exc: BaseException) -> None:
    """End ``session``'s transaction after ``exc``, without waiting on a database that is away.

    A rollback is a round trip: on a stalled server it would wait out the
    statement bound a second time. When the database is unavailable (or the
    task was cancelled mid-statement) the connection is dropped instead of
    rolled back: the server rolls the transaction back when it sees the
    connection gone, and the pool opens a fresh one for the next unit of work.
    """
    if database_unavailable(exc) or isinstance(exc, asyncio.CancelledError):
        await session.invalidate()
    else:
        await session.rollback()
