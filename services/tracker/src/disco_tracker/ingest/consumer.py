"""The ingest: reads what runs off the bus and applies it to the read model in batches.

It is a batch handler of a :class:`disco.bus.BusConsumer` on :data:`INGEST_TOPICS`
in its own consumer group (``ingest_consumer_group``). The bus hands over each
partition's envelopes as they are fetched (up to ``ingest_batch_size`` at once);
dead-letters, with the reason, a value that is not an envelope or whose tenant
nothing vouches for; retries a failing batch and splits one that keeps failing
down to the envelope at fault, which it dead-letters; and commits a partition's
offsets once its batch was applied. A crash in between re-delivers envelopes
that the timeline then recognises as duplicates (``ON CONFLICT DO NOTHING`` on
the envelope id: the ingest's dedup, in the same transaction as what the
envelope changes).

The batches of every partition are applied together (:class:`BatchApplier`, a
group commit that lingers ``ingest_linger_ms`` for them): one transaction per
tenant for all of them, one writer per instance, up to ``ingest_batch_size``
envelopes per transaction. A database outage pauses the ingest and
dead-letters nothing (:func:`~disco_service.retry_while_unavailable`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from disco.bus import Batch, BusConsumer
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic
from disco_service import Database, database_unavailable, retry_while_unavailable
from disco_tracker.ingest.metrics import IngestMetrics
from disco_tracker.ingest.service import Applied, Consumed, apply_batch
from disco_tracker.state import TrackerState

__all__ = ["INGEST_TOPICS", "BatchApplier", "ingest"]

log = structlog.get_logger("disco_tracker.ingest")

INGEST_TOPICS = (Topic.SYSTEM_EVENTS, Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS)
"""What the read model is built from (questions to humans are the HITL watch's)."""

_NOT_TRACKED = frozenset(
    {SystemEventType.ERASURE_REQUESTED.value, SystemEventType.ERASURE_COMPLETED.value}
)
"""Never kept in a timeline: an erasure's own events would outlive what they erased."""


@dataclass(slots=True)
class _Call:
    items: list[Consumed]
    done: asyncio.Future[None]
    arrived: float


class BatchApplier:
    """Applies what several partitions hand over in one go: a group commit.

    :meth:`apply` returns once its envelopes are applied (committed) or raises why
    they were not. The first call that finds the applier idle waits up to
    ``linger_seconds`` for others (or until ``max_envelopes`` wait), and the calls
    that arrive meanwhile, or while a group is being applied, are applied
    together, one transaction per tenant for all of them, up to ``max_envelopes``
    (a call's envelopes are never parted). As when one fetch of every partition
    was one batch: a transaction per ``linger_seconds`` or per ``max_envelopes``,
    whichever comes first, and no envelope waits longer than ``linger_seconds``
    for its group. When a group fails, each call's envelopes are applied alone, so
    that only the call at fault fails (the bus then retries it and splits it to
    find the envelope); when the database is unavailable every call of the group
    fails at once.
    """

    def __init__(
        self,
        database: Database,
        *,
        max_envelopes: int,
        linger_seconds: float,
        data_max_bytes: int,
        metrics: IngestMetrics,
    ) -> None:
        self._database = database
        self._max_envelopes = max_envelopes
        self._linger = linger_seconds
        self._data_max_bytes = data_max_bytes
        self.metrics = metrics
        self._waiting: list[_Call] = []
        self._arrived = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def apply(self, items: list[Consumed]) -> None:
        """Apply ``items`` (with whatever else is waiting); return once committed.

        Raises:
            Exception: the database error that rolled them back.
        """
        loop = asyncio.get_running_loop()
        call = _Call(items, loop.create_future(), loop.time())
        self._waiting.append(call)
        self._arrived.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="tracker-ingest-apply")
        await call.done

    async def close(self) -> None:
        """Stop applying; calls still waiting fail (their offsets stay uncommitted)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        waiting, self._waiting = self._waiting, []
        for call in waiting:
            call.done.cancel()

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            deadline = self._waiting[0].arrived + self._linger
            while sum(len(c.items) for c in self._waiting) < self._max_envelopes:
                left = deadline - loop.time()
                if left <= 0:
                    break
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._arrived.wait()
            waiting = self._waiting
            taken = count = 0
            for call in waiting:
                if taken and count + len(call.items) > self._max_envelopes:
                    break
                taken += 1
                count += len(call.items)
            group, self._waiting = waiting[:taken], waiting[taken:]
            await self._apply_group(group)

    async def _apply_group(self, group: list[_Call]) -> None:
        try:
            await self._apply([item for call in group for item in call.items])
        except Exception as exc:
            if len(group) == 1 or database_unavailable(exc):
                for call in group:
                    _settle(call.done, exc)
                return
            for call in group:
                try:
                    await self._apply(call.items)
                except Exception as alone:
                    _settle(call.done, alone)
                else:
                    _settle(call.done, None)
        else:
            for call in group:
                _settle(call.done, None)

    async def _apply(self, items: list[Consumed]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            outcome = await apply_batch(self._database, items, data_max_bytes=self._data_max_bytes)
        except Exception as exc:
            self.metrics.batch_failures.inc()
            log.warning(
                "ingest_batch_failed",
                envelopes=len(items),
                transient=database_unavailable(exc),
                error=repr(exc),
            )
            raise
        self.metrics.batch_seconds.observe(loop.time() - started)
        self._count(outcome, items)

    def _count(self, outcome: Applied, items: list[Consumed]) -> None:
        metrics = self.metrics
        metrics.applied.inc(outcome.applied)
        metrics.duplicates.inc(outcome.duplicates)
        for reading in outcome.problems:
            assert reading.problem is not None
            metrics.rejected.labels(topic=reading.topic, reason=reading.problem.value).inc()
            log.warning(
                "ingest_payload_unread",
                problem=reading.problem.value,
                topic=reading.topic,
                event_id=reading.row.event_id,
                event_type=reading.row.event_type,
                reason=reading.reason,
            )
        newest = max(item.envelope.time for item in items)
        metrics.last_event_time.set(newest.timestamp())


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled (stopping): nobody waits
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)


@asynccontextmanager
async def ingest(state: TrackerState) -> AsyncIterator[None]:
    """Lifespan hook: run the ingest consumer for the service's lifetime."""
    settings = state.settings
    # The batches of every partition are gathered where they are applied (each
    # partition hands over what it has at once, the applier lingers for the others).
    applier = BatchApplier(
        state.require_database(),
        max_envelopes=settings.ingest_batch_size,
        linger_seconds=settings.ingest_linger_ms / 1000,
        data_max_bytes=settings.timeline_data_max_bytes,
        metrics=state.ingest_metrics,
    )
    # Its fetches wait no less than a group lingers: a group waits that long for more
    # anyway, and on the embedded broker 1 ms fetches of every partition of three busy
    # topics would each cost it (and this process) a round trip, hundreds a second.
    consumer = BusConsumer(
        state.require_bus(),
        settings.ingest_consumer_group,
        fetch_wait_floor_ms=settings.ingest_linger_ms or None,
    )

    @retry_while_unavailable  # a database outage pauses the ingest; it dead-letters nothing
    async def apply(batch: Batch) -> None:
        items = [
            Consumed(batch.topic, item.envelope, item.size)
            for item in batch
            if item.envelope.type not in _NOT_TRACKED
        ]
        if items:
            await applier.apply(items)

    for topic in INGEST_TOPICS:
        consumer.add_batch_handler(topic, apply, max_records=settings.ingest_batch_size)
    state.ingest = consumer
    state.start_alongside(consumer.start(), name=consumer.group)
    try:
        yield
    finally:
        await consumer.stop(grace=settings.shutdown_grace_seconds)
        await applier.close()
        state.ingest = None
