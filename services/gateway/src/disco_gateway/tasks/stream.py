"""Task events across gateway instances: the a2a-sdk's ``TaskEventStream`` over Postgres.

Every write of a task logs the event it applied (``gateway.a2a_task_events``,
numbered by the version it produced) and sends ``NOTIFY`` on commit; all but
the insert of a task already over, which nobody can follow
(:meth:`~disco_gateway.tasks.store.PostgresTaskStore.insert`). A
subscriber on any instance reads the log after the version it has seen and
waits for a notification before reading again; one ``LISTEN`` connection per
instance wakes all of them (:class:`TaskEventListener`). A periodic read
covers a notification lost with a dropped connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import asyncpg
import structlog
from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.types.a2a_pb2 import StreamResponse
from google.protobuf.json_format import ParseDict

from disco_gateway.scope import current_scope
from disco_gateway.tasks.repository import TASK_EVENTS_CHANNEL, TaskRepository
from disco_service import Database

__all__ = ["PostgresTaskEventStream", "TaskEventListener"]

_log = structlog.get_logger("disco_gateway.tasks")

_POLL_FALLBACK_SECONDS = 2.0


def _plain_dsn(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url


class TaskEventListener:
    """One ``LISTEN`` connection per instance; wakes the subscribers of a task.

    Args:
        database_url: the application role's URL (asyncpg is used as is).
    """

    def __init__(self, database_url: str) -> None:
        self._dsn = _plain_dsn(database_url)
        self._connection: asyncpg.Connection | None = None
        self._waiters: dict[tuple[str, str], set[asyncio.Event]] = {}
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and listen (idempotent)."""
        if self._keeper is None:
            await self._connect()
            self._keeper = asyncio.create_task(self._keep(), name="disco-gateway-listen")

    async def _connect(self) -> None:
        connection = await asyncpg.connect(self._dsn, timeout=10)
        await connection.add_listener(TASK_EVENTS_CHANNEL, self._notified)
        self._connection = connection

    async def _keep(self) -> None:
        # Reconnect when the connection drops; subscribers poll meanwhile.
        while True:
            await asyncio.sleep(_POLL_FALLBACK_SECONDS)
            connection = self._connection
            if connection is not None and not connection.is_closed():
                continue
            try:
                await self._connect()
                self._wake_all()
            except (OSError, asyncpg.PostgresError) as exc:
                _log.warning("listen connection lost; retrying", error=repr(exc))

    async def stop(self) -> None:
        """Stop listening (idempotent)."""
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close(timeout=5)
        self._wake_all()

    def _notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        tenant_id, _, task_id = str(payload).partition(" ")
        for event in self._waiters.get((tenant_id, task_id), ()):
            event.set()

    def _wake_all(self) -> None:
        for events in self._waiters.values():
            for event in events:
                event.set()

    @contextlib.contextmanager
    def watch(self, tenant_id: str, task_id: str) -> Any:
        """An :class:`asyncio.Event` set whenever the task's log grows."""
        event = asyncio.Event()
        key = (tenant_id, task_id)
        self._waiters.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]


class PostgresTaskEventStream(TaskEventStream):
    """The a2a-sdk's cross-instance event stream over the task store's event log."""

    def __init__(self, database: Database, listener: TaskEventListener) -> None:
        self._database = database
        self._listener = listener

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing to do: the store logged the event in the write's own transaction."""
        del task_id, event

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """The task's logged events newer than ``after``, then each new one as it is logged.

        The tenant is the running call's (:func:`~disco_gateway.scope.current_scope`):
        the a2a-sdk checked the caller may see the task before subscribing.
        """
        scope = current_scope()
        cursor = after._value if isinstance(after._value, int) else 0
        with self._listener.watch(scope.tenant_id, task_id) as grown:
            while True:
                grown.clear()
                async with self._database.unit_of_work(scope.tenant_id, scope.user_id) as session:
                    rows = await TaskRepository(session, scope.tenant_id).events_after(
                        task_id, after=cursor
                    )
                for version, document in rows:
                    cursor = version
                    response = ParseDict(document, StreamResponse(), ignore_unknown_fields=True)
                    yield VersionedEvent(event=_event_of(response), version=TaskVersion(version))
                if rows:
                    continue
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_POLL_FALLBACK_SECONDS):
                        await grown.wait()

    async def destroy(self, task_id: str) -> None:
        """Nothing to release: the log is kept (the retention job purges it)."""
        del task_id


def _event_of(response: StreamResponse) -> Any:
    which = response.WhichOneof("payload")
    if which is None:
        raise ValueError("a logged task event carries no payload")
    return getattr(response, which)
