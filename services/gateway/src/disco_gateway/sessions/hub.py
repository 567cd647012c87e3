"""The instance's session fan-out: read ``notification-events`` once, keep, hand to local sockets.

Each gateway instance reads ``notification-events`` with its own group-less
reader (it takes nobody's work and sees every partition), so any number of
instances may run side by side and each serves its own sockets. For each batch
it reads, it

1. maps every envelope of a session to its UI message (:func:`to_session_event`);
2. stores the batch (``gateway.store_session_events``: the first instance's copy
   wins, the others' are no-ops) — so an event is in Postgres before any socket
   sees it, which is what makes a reconnect with ``after=`` lose nothing;
3. offers each event to the subscribers of its tenant and session.

A subscriber has a bounded queue (``DISCO_GATEWAY_STREAM_QUEUE_SIZE``). One
that falls behind (its socket reads slower than events come, so the socket's
sends wait on the transport's flow control) stops receiving when the queue is
full and, once it drained what it had, gets one ``STREAM_GAP`` telling it to
reconcile through the replay endpoint; then it receives live events again.
Offering never waits, so nobody else is slowed. A socket that stopped
answering pings is closed by the server's heartbeat
(``DISCO_GATEWAY_STREAM_HEARTBEAT_SECONDS``), which ends its subscription.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import structlog

from disco.bus import TopicReader, tenant_guard
from disco.settings import BusSettings
from disco_common.auth import UNAUTHENTICATED_TENANT
from disco_common.topics import Topic
from disco_gateway.sessions.mapping import StoredEvent, to_session_event
from disco_gateway.sessions.metrics import StreamMetrics
from disco_gateway.sessions.repository import store_batch
from disco_service import Database, database_unavailable

__all__ = ["Gap", "SessionHub", "Subscriber"]

_log = structlog.get_logger("disco_gateway.sessions")

_STORE_ATTEMPTS = 3
_OUTAGE_BACKOFF_SECONDS = 0.2
_OUTAGE_BACKOFF_MAX_SECONDS = 5.0


@dataclass(frozen=True)
class Gap:
    """Events were dropped for a subscriber that fell behind."""

    dropped: int


@dataclass(eq=False)
class Subscriber:
    """One socket's view of a session: who it is, what it wants, what waits for it."""

    tenant_id: str
    session_id: str
    user_id: str
    all_users: bool
    agents: frozenset[str]
    queue_size: int
    metrics: StreamMetrics | None = None
    queue: asyncio.Queue[StoredEvent] = field(init=False)
    overflowed: bool = field(default=False, init=False)
    dropped: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(self.queue_size)

    def wants(self, event: StoredEvent) -> bool:
        """Whether the socket may and wants to see ``event``."""
        if event.user_id is not None and not self.all_users and event.user_id != self.user_id:
            return False
        if not self.agents:
            return True
        agent_id, agent_name = event.event.agent_id, event.event.agent_name
        if agent_id is None and agent_name is None:
            return True
        return agent_id in self.agents or agent_name in self.agents

    def offer(self, event: StoredEvent) -> None:
        """Queue ``event`` (never waits; past the bound it is dropped, see the module docs)."""
        if not self.wants(event):
            return
        if not self.overflowed:
            try:
                self.queue.put_nowait(event)
            except asyncio.QueueFull:
                self.overflowed = True
            else:
                if self.metrics is not None:
                    self.metrics.events.inc()
                return
        self.dropped += 1
        if self.metrics is not None:
            self.metrics.dropped.inc()

    async def next(self) -> StoredEvent | Gap:
        """The next event, or the gap once what was queued before the overflow is out."""
        if self.overflowed and self.queue.empty():
            gap = Gap(self.dropped)
            self.overflowed, self.dropped = False, 0
            if self.metrics is not None:
                self.metrics.gaps.inc()
            return gap
        return await self.queue.get()


class SessionHub:
    """The instance's reader and its subscribers (idempotent ``start``/``stop``).

    Args:
        settings: how to reach the bus.
        database: where the events are kept.
        max_payload_bytes: the bound on each message's payload.
        metrics: where the sockets, events, drops and gaps are counted.
    """

    def __init__(
        self,
        settings: BusSettings,
        database: Database,
        *,
        max_payload_bytes: int,
        metrics: StreamMetrics | None = None,
    ) -> None:
        self._settings = settings
        self._metrics = metrics
        self._database = database
        self._max_bytes = max_payload_bytes
        self._subscribers: dict[tuple[str, str], set[Subscriber]] = {}
        self._reader: TopicReader | None = None
        self._task: asyncio.Task[None] | None = None
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)

    @property
    def sockets(self) -> int:
        return sum(len(subscribers) for subscribers in self._subscribers.values())

    async def start(self) -> None:
        """Position at the end of ``notification-events`` and start reading."""
        if self._task is not None:
            return
        reader = TopicReader(self._settings, [Topic.NOTIFICATION_EVENTS.value])
        await reader.start()
        self._reader = reader
        self._task = asyncio.create_task(self._read(reader), name="disco-gateway-sessions")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    @contextlib.asynccontextmanager
    async def subscribe(
        self,
        tenant_id: str,
        session_id: str,
        *,
        user_id: str,
        all_users: bool,
        agents: Sequence[str] = (),
        queue_size: int,
    ) -> AsyncIterator[Subscriber]:
        """A subscriber of the session's events, until the block exits."""
        subscriber = Subscriber(
            tenant_id, session_id, user_id, all_users, frozenset(agents), queue_size, self._metrics
        )
        key = (tenant_id, session_id)
        self._subscribers.setdefault(key, set()).add(subscriber)
        if self._metrics is not None:
            self._metrics.sockets.inc()
        try:
            yield subscriber
        finally:
            if self._metrics is not None:
                self._metrics.sockets.dec()
            subscribers = self._subscribers.get(key)
            if subscribers is not None:
                subscribers.discard(subscriber)
                if not subscribers:
                    del self._subscribers[key]

    async def _read(self, reader: TopicReader) -> None:
        while True:
            try:
                records = await reader.read(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker hiccup: aiokafka reconnects by itself
                _log.warning("session reader failed; reading on", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            events: list[StoredEvent] = []
            for record in records:
                envelope = record.envelope_or_none()
                if envelope is None:
                    continue  # malformed: the consumer groups send it to the DLQ
                if self._guard is not None and (
                    refused := await self._guard.refusal(envelope.tenant_id, record.headers)
                ):
                    # Nothing of it is stored or streamed; the groups dead-letter it.
                    _log.warning(UNAUTHENTICATED_TENANT, reason=refused)
                    continue
                event = to_session_event(envelope, max_bytes=self._max_bytes)
                if event is not None:
                    events.append(event)
            if not events:
                continue
            await self._store(events)
            if self._metrics is not None:
                now = time.time()
                for event in events:
                    self._metrics.lag_seconds.observe(
                        max(0.0, now - event.event.timestamp.timestamp())
                    )
            for event in events:
                for subscriber in self._subscribers.get((event.tenant_id, event.session_id), ()):
                    subscriber.offer(event)
                # Let the sockets take it before the next: a batch larger than a queue
                # overflows only the sockets that really fall behind.
                await asyncio.sleep(0)

    async def _store(self, events: list[StoredEvent]) -> None:
        """Keep the batch before anyone sees it.

        While the database is away (stalled, restarting) the reader waits here, for as
        long as it takes, and the broker keeps what comes meanwhile: the stream is late
        but a reconnect with ``after=`` still loses nothing. Any other error is retried
        a few times, then the batch is delivered unkept (logged) rather than blocking
        every session behind one bad row.
        """
        rows = [event.row() for event in events]
        failures = 0
        delay = _OUTAGE_BACKOFF_SECONDS
        while True:
            started = time.perf_counter()
            try:
                async with self._database.unit_of_work(None) as session:
                    await store_batch(session, rows)
                if self._metrics is not None:
                    self._metrics.store_seconds.observe(time.perf_counter() - started)
                return
            except Exception as exc:
                if database_unavailable(exc):
                    _log.warning(
                        "session events wait for the database",
                        count=len(rows),
                        retry_in_seconds=delay,
                        error=repr(exc),
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _OUTAGE_BACKOFF_MAX_SECONDS)
                    continue
                failures += 1
                _log.warning(
                    "session events not stored", attempt=failures, count=len(rows), error=repr(exc)
                )
                if failures >= _STORE_ATTEMPTS:
                    return
                await asyncio.sleep(0.2 * failures)
