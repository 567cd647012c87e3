"""``BusConsumer``: one consumer group, handlers per (topic, event type)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from disco._context import StepRunner
from disco._lifecycle import STOP_NETWORK_SECONDS, StartStop, stop_within
from disco.bus._batches import (
    BatchHandler,
    BatchHandlerT,
    BatchRoute,
    BatchWorker,
    BusyPartitions,
)
from disco.bus._client import BusClient
from disco.bus._commits import OffsetCommitter
from disco.bus._dedup import DedupStore, DurableDedupStore, InMemoryDedupStore
from disco.bus._errors import (
    BusError,
    BusNotStartedError,
    BusUnavailableError,
    HandlerRegistrationError,
)
from disco.bus._handling import RecordHandler
from disco.bus._metrics import LagSampler
from disco.bus._partitions import PartitionWorker, Rebalance, finish, finish_all
from disco.bus._polling import FetchPacer, fetch_options
from disco.bus._restarts import beyond_end, describe_partitions
from disco.bus._routes import (
    ANY_EVENT,
    Handler,
    HandlerT,
    TopicRoute,
    check_event_type,
    check_handler,
    describe,
)
from disco.telemetry import handler_fields_added
from disco_common.envelope import envelope_class_for
from disco_common.topics import DLQ_SUFFIX, Topic

__all__ = ["BusConsumer"]

_log = structlog.get_logger("disco.bus")

_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_LOOK_INTERVAL = 1.0
"""Seconds between two looks for a broker that restarted without its data."""
_REVOKE_MARKS_SECONDS = 5.0
"""The longest a revoked partition's commit waits for the dedup marks of what it handled."""


class BusConsumer(StartStop):
    """Consumes topics as one consumer group and calls handlers, at least once.

    Agents of one name share one group (instances split the partitions).
    Records are routed by their ``ce_type`` header before the value is parsed;
    envelopes no handler wants are skipped and committed (topics are shared).
    Partitions are handled concurrently; within a partition the records of one
    key (one plan: the key is ``plan_id``, else ``correlation_id``, else ``id``)
    in order, and records of different keys on up to
    ``bus_partition_concurrency`` lanes at once. An offset is committed only once
    its handler and those of every record before it finished. A failing
    handler is retried with exponential backoff and jitter, then the record
    goes to ``<topic>.dlq`` with :class:`~disco.bus.DlqHeader` headers; a value
    that is not an envelope goes there at once. Envelope ids are deduplicated
    through a :class:`~disco.bus.DedupStore`.

    A topic may instead have one batch handler (:meth:`on_batch`), which gets
    each partition's envelopes in batches, one batch of a partition at a time,
    with the same dead letters, retries, commits, restarts and rebalances.

    Args:
        client: the bus client whose settings, prefix and producer (for the DLQ)
            are used; started and stopped with the consumer if it is not yet started.
        group: the consumer group, normally the agent's name. On the broker it
            carries the topic prefix (``BusClient.group_name``), like the topics.
        dedup_store: where handled ids are remembered (default: an in-process
            window of ``bus_dedup_window_size`` ids for ``bus_dedup_ttl_seconds``).
        max_buffered_per_partition: records fetched ahead per partition before
            fetching from it pauses.
        rebalance_grace: seconds a revoked partition's running handler may take
            to finish before it is cancelled (and its record redelivered).
        steps: where the handlers' journaled steps (``disco.step``) are recorded
            (an agent's is a ``StepLog`` on its memory; None: handlers cannot use steps).
        fetch_wait_floor_ms: the shortest fetch wait this consumer uses (None:
            the settings' waits). For a group that need not see a record within
            milliseconds (one that trails the bus on purpose, an erasure
            follower): on the embedded broker, which does not long-poll, a
            consumer of a busy topic at the 1 ms wait makes hundreds of fetches
            a second, each a round trip for the broker and this process. On
            Kafka, which answers a fetch as soon as a record arrives, it changes
            nothing below the 500 ms wait.
    """

    def __init__(
        self,
        client: BusClient,
        group: str,
        *,
        dedup_store: DedupStore | None = None,
        max_buffered_per_partition: int = 2000,
        rebalance_grace: float = 30.0,
        fetch_wait_floor_ms: int | None = None,
        steps: StepRunner | None = None,
    ) -> None:
        if not _GROUP.fullmatch(group):
            raise ValueError(
                f"consumer group {group!r} is not valid: use 1-100 letters, digits, '.', '_' "
                "and '-' (an agent's name)"
            )
        if fetch_wait_floor_ms is not None and fetch_wait_floor_ms < 1:
            raise ValueError("fetch_wait_floor_ms must be at least 1")
        self.client = client
        self.group = group
        settings = client.settings
        self.dedup_store: DedupStore = (
            dedup_store
            if dedup_store is not None
            else InMemoryDedupStore(settings.bus_dedup_window_size, settings.bus_dedup_ttl_seconds)
        )
        self.steps = steps
        self._handling = RecordHandler(self)
        self._max_buffered = max(1, max_buffered_per_partition)
        self._rebalance_grace = rebalance_grace
        self._routes: dict[str, dict[str, Handler]] = {}
        self._batch_routes: dict[str, BatchRoute] = {}
        # Broker topic name -> its batch route (the topics with a batch handler), at start.
        self._batching: dict[str, BatchRoute] = {}
        self._pause_at = self._max_buffered
        self._busy = BusyPartitions()
        self._consumer: AIOKafkaConsumer | None = None
        self._owns_client = False
        self._fetcher: asyncio.Task[None] | None = None
        self._workers: dict[TopicPartition, PartitionWorker | BatchWorker] = {}
        self._paused: set[TopicPartition] = set()
        self._committer = OffsetCommitter(self, self._fail)
        self._lifecycle = asyncio.Lock()
        self._assigned = asyncio.Event()
        self._unassigned_since: float | None = None
        self._stopping = False
        self._stopped = asyncio.Event()
        self._fatal: BaseException | None = None
        self._fatal_stop: asyncio.Task[None] | None = None
        self._lag: LagSampler | None = None
        self._pacer: FetchPacer | None = None
        self._fetch_wait_floor_ms = fetch_wait_floor_ms

    # -- registration ----------------------------------------------------------

    def on(self, topic: str | Topic, event_type: str = ANY_EVENT) -> Callable[[HandlerT], HandlerT]:
        """Decorator: call the function for ``event_type`` envelopes on ``topic``.

        The function is checked now (``async def``, one positional parameter,
        no other handler for the same topic and type) and returned unchanged.
        """

        def register(handler: HandlerT) -> HandlerT:
            self.add_handler(topic, event_type, handler)
            return handler

        return register

    def add_handler(self, topic: str | Topic, event_type: str, handler: Handler) -> None:
        """Call ``handler`` for ``event_type`` (or ``"*"`` for all) envelopes on ``topic``.

        Raises:
            HandlerRegistrationError: the handler is not ``async def`` taking one
                envelope, the pair already has a handler, or the consumer runs.
        """
        logical = self._registrable(topic)
        check_event_type(event_type)
        check_handler(handler)
        if logical in self._batch_routes:
            raise HandlerRegistrationError(
                f"{describe(self._batch_routes[logical].handler)} takes every envelope of "
                f"{logical!r} in batches; a topic has either a batch handler or handlers "
                f"per event type (cannot add {describe(handler)})"
            )
        routes = self._routes.setdefault(logical, {})
        existing = routes.get(event_type)
        if existing is not None:
            raise HandlerRegistrationError(
                f"{describe(existing)} already handles {event_type!r} on {logical!r}; "
                f"one handler per topic and event type (cannot add {describe(handler)})"
            )
        routes[event_type] = handler

    def on_batch(
        self, topic: str | Topic, *, max_records: int = 500, linger_ms: int = 0
    ) -> Callable[[BatchHandlerT], BatchHandlerT]:
        """Decorator: call the function with batches of ``topic``'s envelopes.

        The function is checked now (``async def`` taking one
        :class:`~disco.bus.Batch`, no other handler on the topic) and returned
        unchanged. See :meth:`add_batch_handler`.
        """

        def register(handler: BatchHandlerT) -> BatchHandlerT:
            self.add_batch_handler(topic, handler, max_records=max_records, linger_ms=linger_ms)
            return handler

        return register

    def add_batch_handler(
        self,
        topic: str | Topic,
        handler: BatchHandler,
        *,
        max_records: int = 500,
        linger_ms: int = 0,
    ) -> None:
        """Call ``handler`` with batches of every envelope on ``topic``.

        A batch is one partition's envelopes in offset order: what was fetched for
        the partition and not yet handed over, up to ``max_records``; with fewer,
        it waits up to ``linger_ms`` for more. Partitions are handled concurrently,
        one batch of a partition at a time, and a partition's offsets are
        committed only after its batch finished (handled or dead-lettered, every
        record of it).

        Before the call, each record is parsed and its tenant checked as for a
        single handler: a value that is not an envelope (or whose ``ce_type``
        header contradicts it), or whose tenant no credential vouches for, goes to
        ``<topic>.dlq`` with the reason at once, and the batch goes on without it.

        What a retry is: a call that raises is made again with the same envelopes
        (``Batch.attempt`` counts), with the same backoff as a single handler,
        up to ``bus_retry_attempts`` calls in all (a call that raises
        :class:`~disco.bus.DependencyUnavailableError` is made again for as long as
        the consumer runs and does not count). When the last one fails, or a
        :class:`~disco.bus.NonRetryableError` is raised, the batch is split into
        two halves, in offset order, and each half is handled as a batch of its
        own from its first attempt, the first half before the second; a batch of
        one envelope that gives up goes to ``<topic>.dlq`` with the error, as a
        single handler's envelope does. So one bad envelope costs its neighbours
        retries, never their delivery, and about ``2 * log2(batch size)`` extra
        calls. The handler must therefore be idempotent: a retry, a split and a
        redelivery after a crash or rebalance hand it envelopes it may already
        have applied. The dedup store is not asked (the envelopes of a batch are
        best deduplicated where they are applied, in the same transaction).

        A batch handler's calls run outside a handler context (there is no one
        envelope) and get no span; its metrics count each envelope consumed by
        event type, and calls, retries and failures under the event type ``"*"``.

        Raises:
            HandlerRegistrationError: the handler is not ``async def`` taking one
                batch, the topic already has handlers, or the consumer runs.
            ValueError: ``max_records`` is not 1..100,000 or ``linger_ms`` not
                0..60,000.
        """
        if not 1 <= max_records <= 100_000:
            raise ValueError(f"max_records must be 1..100000, not {max_records}")
        if not 0 <= linger_ms <= 60_000:
            raise ValueError(f"linger_ms must be 0..60000, not {linger_ms}")
        logical = self._registrable(topic)
        check_handler(handler, takes="batch")
        existing = self._batch_routes.get(logical)
        if existing is not None:
            raise HandlerRegistrationError(
                f"{describe(existing.handler)} already takes {logical!r} in batches; one "
                f"batch handler per topic (cannot add {describe(handler)})"
            )
        if logical in self._routes:
            types = ", ".join(sorted(self._routes[logical]))
            raise HandlerRegistrationError(
                f"{logical!r} has handlers per event type ({types}); a batch handler takes "
                f"all of a topic (cannot add {describe(handler)})"
            )
        self._batch_routes[logical] = BatchRoute(handler, max_records, linger_ms)

    def _registrable(self, topic: str | Topic) -> str:
        """``topic``'s logical name, checked: the consumer is not running yet and the
        topic is a valid one and not a dead-letter topic."""
        if self._consumer is not None:
            raise HandlerRegistrationError(
                "handlers must be registered before the consumer starts (the topics "
                "subscribed are fixed at start)"
            )
        logical = str(topic)
        self.client.topic_name(logical)  # validates the name
        if logical.endswith(DLQ_SUFFIX):
            raise HandlerRegistrationError(
                f"{logical!r} is a dead-letter topic: read it with a plain Kafka consumer, "
                "a handler on it would dead-letter into '.dlq.dlq'"
            )
        return logical

    @property
    def topics(self) -> list[str]:
        """The logical topics handlers are registered for."""
        return [*self._routes, *self._batch_routes]

    # -- lifecycle -------------------------------------------------------------

    @property
    def assignment(self) -> set[TopicPartition]:
        """The partitions this member owns right now."""
        return set(self._consumer.assignment()) if self._consumer is not None else set()

    async def start(self) -> None:
        """Provision the topics, join the group and start consuming (idempotent).

        Raises:
            BusError: no handler is registered.
            BusUnavailableError: the broker could not be reached.
        """
        async with self._lifecycle:
            if self._consumer is not None:
                return
            topics = self.topics
            if not topics:
                raise BusError(
                    f"consumer group {self.group!r} has no handlers: register some with "
                    "@consumer.on(topic, event_type) before start()"
                )
            if not self.client.started:
                await self.client.start()
                self._owns_client = True
            self._unassigned_since = time.monotonic()
            settings = self.client.settings
            await self.client.ensure_topics(topics)
            largest_batch = max((r.max_records for r in self._batch_routes.values()), default=0)
            options = await fetch_options(
                settings,
                group=True,
                floor_ms=self._fetch_wait_floor_ms,
                min_poll_records=largest_batch,
            )
            self._handling.routing = {
                self.client.topic_name(topic): TopicRoute(topic, envelope_class_for(topic), routes)
                for topic, routes in self._routes.items()
            } | {
                self.client.topic_name(topic): TopicRoute(
                    topic, envelope_class_for(topic), {}, batch
                )
                for topic, batch in self._batch_routes.items()
            }
            self._batching = {
                self.client.topic_name(topic): batch for topic, batch in self._batch_routes.items()
            }
            # A partition pauses with two batches' worth fetched ahead, not before one.
            self._pause_at = max(self._max_buffered, 2 * largest_batch)
            consumer = AIOKafkaConsumer(
                group_id=self.client.group_name(self.group),
                enable_auto_commit=False,
                # A new group reads what was published before it first joined;
                # Tansu also reports "latest" wrongly.
                auto_offset_reset="earliest",
                **options.consumer,
            )
            consumer.subscribe(
                [self.client.topic_name(topic) for topic in topics],
                listener=Rebalance(self._on_revoked, self._on_assigned),
            )
            try:
                await consumer.start()
            except KafkaError as exc:
                await consumer.stop()
                raise BusUnavailableError(
                    f"consumer group {self.group!r} cannot reach the broker at "
                    f"{settings.kafka_bootstrap}: {exc}"
                ) from exc
            except BaseException:
                await consumer.stop()  # cancelled mid-join: nothing left running
                raise
            pacer = options.pacer()
            pacer.attach(consumer)
            self._pacer = pacer
            self._consumer = consumer
            self._stopping = False
            self._stopped.clear()
            self._fatal = None
            self._fetcher = asyncio.create_task(
                self._fetch_loop(consumer), name=f"disco-fetch-{self.group}"
            )
            self._committer.start(consumer)
            if self.client.metrics is not None:
                self._lag = LagSampler(
                    self.client.metrics,
                    consumer,
                    group=self.group,
                    logical=self._handling.logical_topic,
                    handled=self._committer.handled,
                    interval=settings.metrics_lag_interval_seconds,
                )
                self._lag.start()

    async def run(self) -> None:
        """Start, then consume until :meth:`stop` is called.

        Raises:
            BaseException: the fatal error that stopped the consumer, if any.
        """
        await self.start()
        try:
            await self._stopped.wait()
        except asyncio.CancelledError:
            await self.stop()
            raise
        if self._fatal is not None:
            raise self._fatal

    async def stop(self, grace: float = 10.0) -> None:
        """Stop fetching, let running handlers finish, commit, and leave the group.

        Records fetched but not yet started are dropped (another member, or
        this group's next run, reads them again). Handlers still running after
        ``grace`` seconds are cancelled and their records stay uncommitted.
        Idempotent.
        """
        async with self._lifecycle:
            consumer = self._consumer
            if consumer is None:
                return
            self._stopping = True
            if self._fetcher is not None:
                await finish(self._fetcher, grace)
            workers = list(self._workers.values())
            for worker in workers:
                worker.close()
            await finish_all([task for worker in workers for task in worker.tasks], grace)
            await self._store_marks(workers, STOP_NETWORK_SECONDS)
            store = self.dedup_store
            if isinstance(store, DurableDedupStore):
                # What could not be stored stays uncommitted: its envelopes come again.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(STOP_NETWORK_SECONDS):
                        await store.give_up()
            await self._committer.stop()
            lag, self._lag = self._lag, None
            if lag is not None:
                await lag.stop()
            try:
                # A broker that is down would hold the commit (and leaving the
                # group) forever: what is not committed is redelivered.
                async with asyncio.timeout(STOP_NETWORK_SECONDS):
                    await self._committer.commit(consumer)
            except TimeoutError:
                _log.warning(
                    "final commit cut short: the broker does not answer (the records "
                    "handled since the last commit are redelivered)",
                    group=self.group,
                )
            finally:
                self._workers.clear()
                self._paused.clear()
                self._consumer = None
                self._fetcher = None
                self._unassigned_since = None
                await stop_within(consumer.stop(), f"consumer group {self.group!r}")
                if self._owns_client:
                    self._owns_client = False
                    await self.client.stop()
                self._stopped.set()

    @property
    def fetch_wait_ms(self) -> int | None:
        """How long the broker may hold this consumer's next fetch (adaptive polling:
        short while records flow, longer while idle); None before :meth:`start`."""
        return self._pacer.current_wait_ms if self._pacer is not None else None

    @property
    def unassigned_seconds(self) -> float | None:
        """How long this member has had no partition (since it started, or since its last
        ones were taken away); None while it has some, or when it is not running."""
        since = self._unassigned_since
        if since is None or self._consumer is None:
            return None
        return time.monotonic() - since

    async def wait_assigned(self, timeout: float) -> set[TopicPartition]:  # noqa: ASYNC109
        """Wait until the group gave this member partitions; return them.

        Raises:
            TimeoutError: nothing was assigned within ``timeout`` seconds.
        """
        if self._consumer is None:
            raise BusNotStartedError("start() the consumer before waiting for its assignment")
        async with asyncio.timeout(timeout):
            await self._assigned.wait()
        return self.assignment

    # -- fetching --------------------------------------------------------------

    async def _fetch_loop(self, consumer: AIOKafkaConsumer) -> None:
        pacer = self._pacer
        assert pacer is not None
        loop = asyncio.get_running_loop()
        next_look = loop.time() + _LOOK_INTERVAL
        try:
            while not self._stopping:
                if loop.time() >= next_look:
                    await self._follow_restart(consumer)
                    next_look = loop.time() + _LOOK_INTERVAL
                batches = await self._busy.fetch(consumer, pacer.apply())
                if batches:
                    pacer.saw_records()
                # Looked up per batch, not per record (it may read os.environ).
                self._handling.tracing = self.client.tracer.enabled
                self._handling.log_fields = not handler_fields_added()
                if isinstance(self.dedup_store, DurableDedupStore):
                    # One question to the service per tenant of the batch, asked now,
                    # about the envelopes a handler here takes (topics are shared:
                    # the others are skipped unparsed and need no answer; batch
                    # handlers do not ask).
                    wants = self._handling.wants
                    for tp, records in batches.items():
                        if tp.topic not in self._batching:
                            self.dedup_store.expect([r for r in records if wants(r)])
                for tp, records in batches.items():
                    if self._stopping or tp not in consumer.assignment():
                        continue
                    worker = self._workers.get(tp)
                    if worker is None or worker.closed:
                        worker = self._workers[tp] = self._worker_for(tp)
                    worker.feed(records)
                    if worker.backlog >= self._pause_at and tp not in self._paused:
                        consumer.pause(tp)
                        self._paused.add(tp)
                self._resume_drained(consumer)
        except Exception as exc:
            self._fail(exc)

    def _worker_for(self, tp: TopicPartition) -> PartitionWorker | BatchWorker:
        batch = self._batching.get(tp.topic)
        if batch is None:
            return PartitionWorker(
                tp,
                self.client.settings.bus_partition_concurrency,
                group=self.group,
                wants=self._handling.wants,
                handle=self._handling.handle,
                done=self._committer.record_done,
                fail=self._fail,
            )
        return BatchWorker(
            tp,
            batch.max_records,
            batch.linger_ms / 1000,
            handle=self._handling.handle_batch,
            done=self._committer.record_done,
            busy=self._busy.mark,
            fail=self._fail,
            name=f"disco-{self.group}-{tp.topic}-{tp.partition}-batches",
        )

    async def _follow_restart(self, consumer: AIOKafkaConsumer) -> None:
        """Read again from the beginning when the broker lost its data (see
        ``_restarts``): its partitions began again below this member's positions.

        The offsets handled before are forgotten (they were the old log's);
        records handled since the restart come again and the dedup store skips them.
        """
        assigned = consumer.assignment()
        restarted = await beyond_end(consumer, assigned)
        if not restarted:
            return
        _log.warning(
            "partitions restarted below this member's position (the broker lost its "
            "data): reading its partitions from their new beginning",
            group=self.group,
            partitions=describe_partitions(restarted),
        )
        workers = [w for tp in assigned if (w := self._workers.pop(tp, None)) is not None]
        for worker in workers:
            worker.close()
            if isinstance(worker, PartitionWorker):
                worker.abandoned = True  # the old log's offsets
        await finish_all(
            [task for worker in workers for task in worker.tasks], self._rebalance_grace
        )
        for tp in assigned:
            self._committer.forget(tp)
            if tp in self._paused:
                self._paused.discard(tp)
                consumer.resume(tp)
        await consumer.seek_to_beginning(*assigned)

    def _resume_drained(self, consumer: AIOKafkaConsumer) -> None:
        if not self._paused:
            return
        ready = [
            tp
            for tp in self._paused
            if (worker := self._workers.get(tp)) is None or worker.backlog <= self._pause_at // 2
        ]
        for tp in ready:
            self._paused.discard(tp)
            if tp in consumer.assignment():
                consumer.resume(tp)

    # -- rebalancing -----------------------------------------------------------

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        consumer = self._consumer
        workers = [w for tp in revoked if (w := self._workers.pop(tp, None)) is not None]
        for worker in workers:
            worker.close()
        await finish_all(
            [task for worker in workers for task in worker.tasks], self._rebalance_grace
        )
        await self._store_marks(workers, min(self._rebalance_grace, _REVOKE_MARKS_SECONDS))
        for worker in workers:
            if isinstance(worker, PartitionWorker):
                worker.abandoned = True
        if consumer is not None:
            await self._committer.commit(consumer, only=revoked)
        if self._lag is not None:
            self._lag.forget(revoked)
        for tp in revoked:
            self._paused.discard(tp)
            self._committer.forget(tp)
        self._assigned.clear()
        if self._unassigned_since is None:
            self._unassigned_since = time.monotonic()

    async def _store_marks(
        self, workers: list[PartitionWorker | BatchWorker], seconds: float
    ) -> None:
        """Wait (up to ``seconds``) for the dedup marks of what ``workers`` handled, so
        that their offsets can be committed now (a mark is never behind its offset;
        batch handlers write no marks)."""
        waiting = [w for w in workers if isinstance(w, PartitionWorker) and w.has_unstored]
        if not waiting:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await asyncio.gather(*(worker.settled() for worker in waiting))
        await asyncio.sleep(0)  # the offsets are recorded by the futures' callbacks

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            self._assigned.set()
            self._unassigned_since = None
        elif self._unassigned_since is None:
            self._unassigned_since = time.monotonic()

    def _fail(self, exc: BaseException) -> None:
        if self._fatal is None and not self._stopping:
            _log.error("consumer failed", group=self.group, error=repr(exc))
            self._fatal = exc
            self._fatal_stop = asyncio.get_running_loop().create_task(
                self.stop(grace=1.0), name=f"disco-stop-{self.group}"
            )

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` has begun (handlers being retried give up, nothing new
        starts, and what is left uncommitted is redelivered)."""
        return self._stopping

    @property
    def failure(self) -> BaseException | None:
        """The fatal error that stopped the consumer, if one did."""
        return self._fatal
