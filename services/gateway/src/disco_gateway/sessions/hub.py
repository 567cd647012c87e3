"""The instance's session fan-out: read ``notification-events`` once, keep, hand to local sockets.

Each gateway instance reads ``notification-events`` with its own group-less
reader (it takes nobody's work and sees every partition), so any number of
instances may run side by side and each serves its own sockets. For each batch
it reads, it

1. maps every envelope of a session to its UI message (:func:`to_session_event`);
2. offers each event to the subscribers of its tenant and session at once;
3. hands the batch to the instance's keeper, which stores what it was handed in
   order, in batches (``gateway.store_session_batch``: the first instance's copy
   of an event wins, the others' are no-ops), one store at a time, while the
   reader goes on.

The same reader feeds the instance's A2A fan-out (``feed``,
:class:`~disco_gateway.bus.fanout.FanoutFeed`): every batch is offered to it
first, so the instance reads ``notification-events`` once; the fan-out is
handed only what comes after the end the reader found when it started.

So a socket sees an event before it is in Postgres, and whatever looks events
up there waits for the keeper first (:meth:`SessionHub.settled`): a replay
(``after=``, the HTTP replay, a reconnecting socket) and a decision or an
answer find every event this instance handed to a socket before they asked.
The keeper stores, with each batch and in the same transaction, the reader's
position after it (per partition), and an instance starts reading at the
stored positions, not at the end: an event handed to sockets but not stored
when the instance died is read again and stored by the next start (or by any
other instance, which stores everything it reads), and :meth:`settled` waits
after a start until the reader caught up with what was published before it.
While the database is away the keeper waits for it; the reader goes on until
``_MAX_UNSTORED`` events wait for the keeper, then waits too (the broker keeps
what comes meanwhile). Any other store error is retried a few times, then the
batch is left unkept (logged) rather than blocking every session behind one bad
row.

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
from disco_common.topics import Topic, topic_name
from disco_gateway.bus.fanout import FanoutFeed
from disco_gateway.sessions.mapping import StoredEvent, to_session_event
from disco_gateway.sessions.metrics import StreamMetrics
from disco_gateway.sessions.repository import store_batch, stream_positions
from disco_service import Database, database_unavailable

__all__ = ["Gap", "SessionHub", "Subscriber"]

_log = structlog.get_logger("disco_gateway.sessions")

_STORE_ATTEMPTS = 3
_STORE_BATCH = 1000
"""The most events one store takes."""
_MAX_UNSTORED = 20_000
"""Events handed to sockets but not stored yet past which the reader waits for the keeper."""
_POSITIONS_EVERY_SECONDS = 1.0
"""How often a position alone (records of no session read since the last store) is kept."""
_SETTLE_SECONDS = 10.0
"""The longest a replay or a decision waits for the keeper (then it looks all the same)."""
_FLUSH_SECONDS = 5.0
"""The longest a stopping instance waits for the keeper to store what it was handed."""
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
    """The instance's reader, its keeper and its subscribers (idempotent ``start``/``stop``).

    Args:
        settings: how to reach the bus.
        database: where the events are kept.
        max_payload_bytes: the bound on each message's payload.
        metrics: where the sockets, events, drops and gaps are counted.
        feed: the A2A fan-out, fed with every batch read (None: nobody else reads).
    """

    def __init__(
        self,
        settings: BusSettings,
        database: Database,
        *,
        max_payload_bytes: int,
        metrics: StreamMetrics | None = None,
        feed: FanoutFeed | None = None,
    ) -> None:
        self._settings = settings
        self._feed = feed
        self._metrics = metrics
        self._database = database
        self._max_bytes = max_payload_bytes
        self._subscribers: dict[tuple[str, str], set[Subscriber]] = {}
        self._reader: TopicReader | None = None
        self._task: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)
        # What the reader handed to the keeper and the keeper has not taken yet: the
        # events in reading order, the positions after them ({(topic, partition): next}).
        self._unstored: list[StoredEvent] = []
        self._positions: dict[tuple[str, int], int] = {}
        self._handed = 0
        """Events handed to the keeper since the start."""
        self._kept = 0
        """Of those, the ones the keeper is done with (stored, or left unkept)."""
        self._caught_up_at: int | None = None
        """``_handed`` when the reader reached what was published before the start."""
        self._ends: dict[tuple[str, int], int] = {}
        self._wake = asyncio.Event()
        self._progress = asyncio.Condition()

    @property
    def sockets(self) -> int:
        return sum(len(subscribers) for subscribers in self._subscribers.values())

    async def start(self) -> None:
        """Position at the stored positions of ``notification-events`` (at its end without
        them) and start reading and keeping."""
        if self._task is not None:
            return
        topic = Topic.NOTIFICATION_EVENTS.value
        reader = TopicReader(self._settings, [topic], start_at=await self._stored_positions(topic))
        await reader.start()
        try:
            ends = await reader.end_offsets()
            positions = await reader.positions()
        except BaseException:
            await reader.stop()
            raise
        if self._feed is not None:
            self._feed.attach(reader.pacer, ends)
        self._ends = {key: end for key, end in ends.items() if positions.get(key, end) < end}
        self._handed = self._kept = 0
        self._caught_up_at = None if self._ends else 0
        self._reader = reader
        self._keeper = asyncio.create_task(self._keep(), name="disco-gateway-sessions-keeper")
        self._task = asyncio.create_task(self._read(reader), name="disco-gateway-sessions")

    async def _stored_positions(self, topic: str) -> dict[tuple[str, int], int]:
        name = topic_name(topic, self._settings.topic_prefix)
        try:
            async with self._database.unit_of_work(None) as session:
                kept = await stream_positions(session, [name])
        except Exception as exc:
            _log.warning(
                "session stream positions unavailable: reading from the end", error=repr(exc)
            )
            return {}
        return {(topic, partition): offset for (_, partition), offset in kept.items()}

    async def stop(self) -> None:
        """Stop reading, let the keeper store what it was handed (bounded), stop it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            handed = self._handed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_FLUSH_SECONDS), self._progress:
                    await self._progress.wait_for(lambda: self._kept >= handed)
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        reader, self._reader = self._reader, None
        if reader is not None:
            await reader.stop()

    async def settled(self, timeout: float = _SETTLE_SECONDS) -> bool:  # noqa: ASYNC109
        """Wait until every event handed to the sockets so far is stored and, after a start,
        the reader caught up with what was published before it (False: ``timeout`` passed
        first, e.g. the database is away; True at once when the hub is not running)."""
        if self._task is None:
            return True
        handed = self._handed

        def done() -> bool:
            caught_up = self._caught_up_at
            return caught_up is not None and self._kept >= max(handed, caught_up)

        if done():
            return True
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(done)
        except TimeoutError:
            return False
        return True

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
        prefix = self._settings.topic_prefix
        while True:
            try:
                records = await reader.read(timeout=0.5)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broker hiccup: aiokafka reconnects by itself
                _log.warning("session reader failed; reading on", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            if self._feed is not None and records:
                await self._feed.offer(records)
            events: list[StoredEvent] = []
            positions: dict[tuple[str, int], int] = {}
            for record in records:
                positions[(topic_name(record.topic, prefix), record.partition)] = record.offset + 1
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
            if positions:
                await self._hand(events, positions)
            if self._caught_up_at is None:
                await self._check_caught_up(reader)
            if not events:
                continue
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

    async def _hand(self, events: list[StoredEvent], positions: dict[tuple[str, int], int]) -> None:
        """Give the keeper a batch (waiting while too much waits for it already)."""
        if len(self._unstored) >= _MAX_UNSTORED:
            async with self._progress:
                await self._progress.wait_for(lambda: len(self._unstored) < _MAX_UNSTORED)
        self._unstored += events
        self._positions.update(positions)
        self._handed += len(events)
        self._wake.set()

    async def _check_caught_up(self, reader: TopicReader) -> None:
        try:
            positions = await reader.positions()
        except Exception as exc:
            _log.debug("session reader positions unavailable", error=repr(exc))
            return
        if all(positions.get(key, end) >= end for key, end in self._ends.items()):
            async with self._progress:
                self._caught_up_at = self._handed
                self._progress.notify_all()

    async def _keep(self) -> None:
        """Store what the reader handed over, in order, one batch at a time."""
        positions_kept = 0.0
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._unstored:
                if not self._positions:
                    continue
                # Only positions: keep them now and then, not after every read.
                wait = positions_kept + _POSITIONS_EVERY_SECONDS - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            events = self._unstored[:_STORE_BATCH]
            del self._unstored[:_STORE_BATCH]
            positions: dict[tuple[str, int], int] = {}
            if not self._unstored:
                # The positions go with the batch that holds everything read before them.
                positions, self._positions = self._positions, {}
            else:
                self._wake.set()
            await self._store(events, positions)
            positions_kept = time.monotonic()
            async with self._progress:
                self._kept += len(events)
                self._progress.notify_all()

    async def _store(
        self, events: list[StoredEvent], positions: dict[tuple[str, int], int]
    ) -> None:
        """Keep a batch and the reader's positions after it.

        While the database is away (stalled, restarting) the keeper waits here, for as
        long as it takes: the stream goes on, what waits for the keeper grows up to its
        bound, then the reader waits and the broker keeps what comes meanwhile. Any other
        error is retried a few times, then the batch is left unkept (logged) rather than
        blocking every session behind one bad row.
        """
        rows = [event.row() for event in events]
        failures = 0
        delay = _OUTAGE_BACKOFF_SECONDS
        while True:
            started = time.perf_counter()
            try:
                async with self._database.unit_of_work(None) as session:
                    await store_batch(session, rows, positions)
                if self._metrics is not None and rows:
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
