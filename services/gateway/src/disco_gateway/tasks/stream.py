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
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.version import TaskVersion
from a2a.types.a2a_pb2 import StreamResponse
from google.protobuf.json_format import ParseDict

from disco_gateway.scope import current_scope
from disco_gateway.tasks.repository import TASK_EVENTS_CHANNEL, TaskRepository
from disco_service import Database, listening

__all__ = ["PostgresTaskEventStream", "TaskEventListener"]


_POLL_FALLBACK_SECONDS = 2.0


class TaskEventListener:
    """Wakes the subscribers of a task when its log grows: ``NOTIFY`` heard by the
    instance's one ``LISTEN`` (:meth:`listening`, the kit's
    :func:`~disco_service.listening`, which makes it again when it is lost)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, str], set[asyncio.Event]] = {}

    def listening(self, database: Database) -> AbstractAsyncContextManager[None]:
        """Listen while the block runs. Every subscriber is woken when listening
        starts or ends: a notification may have gone by unheard (they read again)."""
        return listening(
            database,
            TASK_EVENTS_CHANNEL,
            self._notified,
            on_listening=self._wake_all,
            on_lost=self._wake_all,
        )

    def _notified(self, payload: str) -> None:
        tenant_id, _, task_id = payload.partition(" ")
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

    def watch(self, tenant_id: str, task_id: str) -> AbstractContextManager[asyncio.Event]:
        """An :class:`asyncio.Event` set whenever the task's log grows (and when listening
        starts again after a lost connection)."""
        watching: AbstractContextManager[asyncio.Event] = self._listener.watch(tenant_id, task_id)
        return watching

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
