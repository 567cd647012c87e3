"""The ingest consumer: reads what runs off the bus and applies it in batches.

Why not :class:`disco.bus.BusConsumer`: it calls a handler per envelope, one
transaction each, which caps the tracker at a few hundred envelopes a second.
Here one ``getmany`` batch (up to ``ingest_batch_size`` envelopes of every
partition) is one transaction per tenant, and the offsets are committed once
those committed: a crash in between re-delivers envelopes that the timeline
then recognises as duplicates. The guarantees are the bus's otherwise — its
own consumer group (the topic prefix applied by ``BusClient.group_name``),
``earliest`` for a new group, a value that is not an envelope dead-lettered
with the reason (``BusClient.dead_letter``), nothing a single envelope does
able to stop the consumer.

A failing batch is retried with backoff while the database is unreachable;
a batch that keeps failing otherwise is applied envelope by envelope, and the
envelope that fails alone is dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord

from disco.bus import (
    BusClient,
    BusError,
    FetchPacer,
    commit_offsets,
    pacer_for,
    tenant_guard,
)
from disco_common.auth import UNAUTHENTICATED_TENANT
from disco_common.envelope import EnvelopeError, envelope_class_for
from disco_common.system_events import SystemEventType
from disco_common.topics import Topic, strip_prefix
from disco_service import database_unavailable
from disco_tracker.ingest.metrics import IngestMetrics
from disco_tracker.ingest.service import Applied, Consumed, apply_batch
from disco_tracker.state import TrackerState

__all__ = ["INGEST_TOPICS", "IngestConsumer", "ingest"]

log = structlog.get_logger("disco_tracker.ingest")

INGEST_TOPICS = (Topic.SYSTEM_EVENTS, Topic.ACTION_REQUESTS, Topic.ACTION_RESULTS)
"""What the read model is built from (questions to humans are the HITL watch's)."""

_NOT_TRACKED = frozenset(
    {SystemEventType.ERASURE_REQUESTED.value, SystemEventType.ERASURE_COMPLETED.value}
)
"""Never kept in a timeline: an erasure's own events would outlive what they erased."""

_BATCH_ATTEMPTS = 3
"""Attempts at a whole batch before it is applied envelope by envelope."""
_BACKOFF_MAX_SECONDS = 5.0


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: IngestConsumer) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        # The batch in flight finishes (and commits) before the partitions go.
        async with self._owner._batch_lock:
            pass

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            self._owner._assigned.set()


class IngestConsumer:
    """Consumes :data:`INGEST_TOPICS` as the tracker's ingest group, batch by batch."""

    def __init__(self, state: TrackerState) -> None:
        self._state = state
        self._settings = state.settings
        self.metrics: IngestMetrics = state.ingest_metrics
        self._consumer: AIOKafkaConsumer | None = None
        self._pacer: FetchPacer | None = None
        self._task: asyncio.Task[None] | None = None
        self._batch_lock = asyncio.Lock()
        self._assigned = asyncio.Event()
        self._stopping = False
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(self._settings)

    @property
    def group(self) -> str:
        """The consumer group, as the broker names it."""
        return self._state.require_bus().group_name(self._settings.ingest_consumer_group)

    @property
    def fetch_wait_ms(self) -> int | None:
        """How long the broker may hold the next fetch; None before :meth:`start`."""
        return self._pacer.current_wait_ms if self._pacer is not None else None

    async def start(self) -> None:
        """Provision the topics, join the group and start applying (idempotent)."""
        if self._consumer is not None:
            return
        bus = self._state.require_bus()
        settings = self._settings
        await bus.ensure_topics(INGEST_TOPICS)
        options = settings.kafka_connection_options()
        options["request_timeout_ms"] = max(
            settings.kafka_request_timeout_ms, settings.kafka_session_timeout_ms + 5000
        )
        # The fetch wait follows the traffic as the SDK's consumers do (short while
        # envelopes flow, longer when idle), with the waits chosen for this broker,
        # but no shorter than the linger: a batch waits that long for more anyway, and
        # on the embedded broker 1 ms fetches of every partition of five topics would
        # each cost it (and this process) a round trip, hundreds a second.
        pacer = await pacer_for(settings, floor_ms=settings.ingest_linger_ms or None)
        consumer = AIOKafkaConsumer(
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=pacer.max_wait_ms,
            session_timeout_ms=settings.kafka_session_timeout_ms,
            heartbeat_interval_ms=settings.kafka_heartbeat_interval_ms,
            max_poll_records=settings.ingest_batch_size,
            **options,
        )
        consumer.subscribe([bus.topic_name(t) for t in INGEST_TOPICS], listener=_Rebalance(self))
        try:
            await consumer.start()
        except BaseException:
            await consumer.stop()  # cancelled or refused mid-join: nothing left running
            raise
        pacer.attach(consumer)
        self._pacer = pacer
        self._consumer = consumer
        self._stopping = False
        self._task = asyncio.create_task(self._run(consumer, pacer), name="tracker-ingest")

    async def wait_assigned(self, timeout: float) -> None:  # noqa: ASYNC109 - for tests
        """Wait until the group gave this instance partitions."""
        async with asyncio.timeout(timeout):
            await self._assigned.wait()

    async def stop(self, grace: float = 10.0) -> None:
        """Finish the batch in flight (up to ``grace`` seconds), commit, leave the group."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=grace)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await consumer.stop()

    async def _run(self, consumer: AIOKafkaConsumer, pacer: FetchPacer) -> None:
        settings = self._settings
        while not self._stopping:
            try:
                block_ms = min(settings.ingest_poll_ms, int(pacer.apply() * 1000))
                batches = await consumer.getmany(
                    timeout_ms=block_ms, max_records=settings.ingest_batch_size
                )
            except KafkaError as exc:
                log.warning("ingest_fetch_failed", error=repr(exc))
                await asyncio.sleep(0.5)
                continue
            if not batches:
                continue
            pacer.saw_records()
            batches = await self._linger(consumer, batches)
            async with self._batch_lock:
                try:
                    done = await self._handle(batches)
                except Exception:
                    # A bug must not end the ingest: the batch is fetched again.
                    log.exception("ingest_batch_crashed")
                    await self._rewind(consumer, batches)
                    await asyncio.sleep(1.0)
                    continue
                if done:
                    await self._commit(consumer, batches)

    async def _linger(
        self,
        consumer: AIOKafkaConsumer,
        batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    ) -> dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]:
        """Top ``batches`` up with what arrives within ``ingest_linger_ms`` (up to a batch)."""
        settings = self._settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.ingest_linger_ms / 1000
        count = sum(len(records) for records in batches.values())
        while count < settings.ingest_batch_size and not self._stopping:
            left = deadline - loop.time()
            if left <= 0:
                break
            try:
                more = await consumer.getmany(
                    timeout_ms=max(1, int(left * 1000)),
                    max_records=settings.ingest_batch_size - count,
                )
            except KafkaError:
                break  # apply what is here; the loop's next fetch reports it
            for tp, records in more.items():
                batches.setdefault(tp, []).extend(records)
                count += len(records)
        return batches

    async def _handle(
        self, batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]
    ) -> bool:
        """Apply a fetched batch; whether it is done (False: stopping before it was)."""
        bus = self._state.require_bus()
        prefix = self._settings.topic_prefix
        items: list[Consumed] = []
        records: list[ConsumerRecord[bytes, bytes]] = []
        for tp_records in batches.values():
            for record in tp_records:
                topic = strip_prefix(record.topic, prefix)
                try:
                    envelope = envelope_class_for(topic).from_kafka_record(
                        record.value, record.headers
                    )
                except EnvelopeError as exc:
                    if not await self._dead_letter(bus, record, "EnvelopeError", exc.reason):
                        return False
                    self.metrics.rejected.labels(topic=topic, reason="envelope").inc()
                    continue
                if self._guard is not None and (
                    refused := await self._guard.refusal(envelope.tenant_id, record.headers)
                ):
                    if not await self._dead_letter(bus, record, UNAUTHENTICATED_TENANT, refused):
                        return False
                    self.metrics.rejected.labels(topic=topic, reason=UNAUTHENTICATED_TENANT).inc()
                    continue
                if envelope.type in _NOT_TRACKED:
                    continue
                items.append(Consumed(topic, envelope, len(record.value or b"")))
                records.append(record)
        if not items:
            return True
        started = asyncio.get_running_loop().time()
        outcome = await self._apply(bus, items, records)
        if outcome is None:
            return False
        self.metrics.batch_seconds.observe(asyncio.get_running_loop().time() - started)
        self._count(outcome, items)
        return True

    async def _apply(
        self, bus: BusClient, items: list[Consumed], records: list[ConsumerRecord[bytes, bytes]]
    ) -> Applied | None:
        database = self._state.require_database()
        max_bytes = self._settings.timeline_data_max_bytes
        attempt = 0
        delay = 0.2
        while not self._stopping:
            attempt += 1
            try:
                return await apply_batch(database, items, data_max_bytes=max_bytes)
            except Exception as exc:
                transient = database_unavailable(exc)
                log.warning(
                    "ingest_batch_failed",
                    envelopes=len(items),
                    attempt=attempt,
                    transient=transient,
                    error=repr(exc),
                )
                self.metrics.batch_failures.inc()
                if not transient and attempt >= _BATCH_ATTEMPTS:
                    return await self._apply_one_by_one(bus, items, records)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_SECONDS)
        return None

    async def _apply_one_by_one(
        self, bus: BusClient, items: list[Consumed], records: list[ConsumerRecord[bytes, bytes]]
    ) -> Applied | None:
        """Apply each envelope alone; dead-letter the ones that fail alone."""
        database = self._state.require_database()
        max_bytes = self._settings.timeline_data_max_bytes
        total = Applied()
        for item, record in zip(items, records, strict=True):
            for attempt in range(1, _BATCH_ATTEMPTS + 1):
                try:
                    single = await apply_batch(database, [item], data_max_bytes=max_bytes)
                except Exception as exc:
                    if database_unavailable(exc) or attempt < _BATCH_ATTEMPTS:
                        if self._stopping:
                            return None
                        await asyncio.sleep(0.2 * attempt)
                        continue
                    log.error(
                        "ingest_envelope_failed",
                        event_id=item.envelope.id,
                        event_type=item.envelope.type,
                        error=repr(exc),
                    )
                    if not await self._dead_letter(bus, record, type(exc).__qualname__, str(exc)):
                        return None
                    self.metrics.rejected.labels(topic=item.topic, reason="database").inc()
                else:
                    total.applied += single.applied
                    total.duplicates += single.duplicates
                    total.problems.extend(single.problems)
                break
        return total

    async def _dead_letter(
        self, bus: BusClient, record: ConsumerRecord[bytes, bytes], error_type: str, message: str
    ) -> bool:
        """Dead-letter ``record``, retrying while the broker refuses; False when stopping first."""
        delay = 0.1
        while True:
            try:
                target = await bus.dead_letter(
                    record,
                    error_type=error_type,
                    error_message=message,
                    attempts=0
                    if error_type in {"EnvelopeError", UNAUTHENTICATED_TENANT}
                    else _BATCH_ATTEMPTS,
                    group=self._settings.ingest_consumer_group,
                )
            except BusError as exc:
                log.error("ingest_dead_letter_failed", error=repr(exc))
                if self._stopping:
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_SECONDS)
            else:
                log.warning(
                    "ingest_dead_lettered",
                    dlq=target,
                    offset=record.offset,
                    partition=record.partition,
                    error_type=error_type,
                    reason=message,
                )
                return True

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

    async def _rewind(
        self,
        consumer: AIOKafkaConsumer,
        batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    ) -> None:
        """Fetch ``batches`` again (their offsets were not committed)."""
        for tp, records in batches.items():
            if records and tp in consumer.assignment():
                consumer.seek(tp, records[0].offset)

    async def _commit(
        self,
        consumer: AIOKafkaConsumer,
        batches: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]],
    ) -> None:
        offsets = {tp: records[-1].offset + 1 for tp, records in batches.items() if records}
        try:
            await commit_offsets(consumer, offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # The group moved the partitions meanwhile: the new owner re-reads from
            # the last commit, and the timeline skips what was applied.
            log.warning("ingest_commit_rejected", error=repr(exc))
        except KafkaError as exc:
            log.warning("ingest_commit_failed", error=repr(exc))


@asynccontextmanager
async def ingest(state: TrackerState) -> AsyncIterator[None]:
    """Lifespan hook: run the ingest consumer for the service's lifetime."""
    consumer = IngestConsumer(state)
    state.ingest = consumer
    state.start_alongside(consumer.start(), name=consumer.group)
    try:
        yield
    finally:
        await consumer.stop(grace=state.settings.shutdown_grace_seconds)
        state.ingest = None
