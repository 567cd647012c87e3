"""A consumer group's handling of records: route each by topic and ``ce_type``,
parse it, check its tenant's credential, skip a duplicate, call the handler with
retries and backoff, and dead-letter what cannot be handled; or hand a
partition's envelopes to a batch handler together, with the same checks, retries
and dead letters (see :meth:`~disco.bus.BusConsumer.on_batch`)."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord
from opentelemetry.trace import Span

from disco._context import (
    HandlerContext,
    Origin,
    StepRunner,
    enter_handler,
    enter_record,
    exit_handler,
)
from disco.bus._batches import Batch, BatchItem
from disco.bus._client import BusClient
from disco.bus._credentials import tenant_guard
from disco.bus._dedup import DedupStore, DurableDedupStore, InMemoryDedupStore
from disco.bus._errors import (
    Abandoned,
    BusError,
    DependencyUnavailableError,
    NonRetryableError,
)
from disco.bus._metrics import InFlight
from disco.bus._routes import ANY_EVENT, Handler, TopicRoute
from disco.bus._tracing import BusTracer
from disco_common.auth import TENANT_CREDENTIAL_HEADER, UNAUTHENTICATED_TENANT
from disco_common.envelope import TENANT_HEADER, Envelope, EnvelopeError
from disco_common.topics import dlq_topic

__all__ = ["ConsumerView", "RecordHandler"]

_log = structlog.get_logger("disco.bus")

_STRUCTURED_HEADERS = frozenset(
    {"content-type", "ce_id", TENANT_HEADER, TENANT_CREDENTIAL_HEADER, "tenant_id"}
)
"""Headers of a structured-mode record as disco writes it (besides ``ce_type`` and
``traceparent``): a record with only these is parsed from its value alone."""


class _Refusal:
    """Why a record goes to the DLQ at once (it is not an envelope)."""

    __slots__ = ("error_type", "reason")

    def __init__(self, error_type: str, reason: str) -> None:
        self.error_type = error_type
        self.reason = reason


class ConsumerView(Protocol):
    """What a :class:`RecordHandler` reads of its consumer, at each use
    (:class:`~disco.bus.BusConsumer` satisfies it)."""

    @property
    def client(self) -> BusClient:
        """The bus client: settings, metrics, tracer and the dead-letter producer."""
        ...

    @property
    def group(self) -> str:
        """The consumer group (a label of metrics, spans and logs)."""
        ...

    @property
    def steps(self) -> StepRunner | None:
        """Where handlers' journaled steps are recorded."""
        ...

    @property
    def dedup_store(self) -> DedupStore:
        """Where handled envelope ids are remembered."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the consumer is stopping (retries give up, records stay uncommitted)."""
        ...


@dataclass(slots=True)
class _Tries:
    """The failed attempts of one handling (a record's or a batch's), and what each decides.

    A failure because a dependency is unavailable is tried again until it is back (and
    logged on its first and every 20th wait); any other counts against ``attempts``.
    """

    owner: ConsumerView
    attempts: int
    failures: int = 0
    waits: int = 0
    unavailable: bool = False

    def failed(self, exc: Exception) -> tuple[bool, bool]:
        """Count ``exc``: whether to give up now, and whether to log it."""
        unavailable = self.unavailable = isinstance(exc, DependencyUnavailableError)
        if unavailable:
            self.waits += 1
            return False, self.waits == 1 or self.waits % 20 == 0
        self.failures += 1
        return self.failures >= self.attempts or isinstance(exc, NonRetryableError), True

    async def back_off(self, exc: Exception) -> None:
        """Wait before the next attempt.

        Raises:
            Abandoned: the consumer is stopping (the record stays uncommitted).
        """
        owner = self.owner
        if owner.stopping:
            raise Abandoned from exc
        settings = owner.client.settings
        await asyncio.sleep(
            _backoff(
                self.waits if self.unavailable else self.failures,
                settings.bus_retry_backoff_ms,
                settings.bus_retry_backoff_max_ms,
            )
        )
        if owner.stopping:
            raise Abandoned from exc


@dataclass(frozen=True, slots=True)
class _Labelled:
    """The metric children one (topic, event type) of a group counts into."""

    consumed: Any
    retries: Any
    duration: Any
    in_flight: InFlight


class RecordHandler:
    """Handles the records of one :class:`~disco.bus.BusConsumer`, one call per record.

    Routes a record by its topic and ``ce_type`` header before its value is
    parsed, refuses an envelope whose tenant no credential vouches for, skips
    an envelope id the consumer's dedup store has seen, and calls the handler
    until it succeeds or gives up (exponential backoff with jitter between
    attempts); what cannot be handled goes to ``<topic>.dlq``. The consumer's
    client, group, dedup store and stopping flag are read from ``owner`` at each
    use, as the consumer's own methods would.
    """

    def __init__(self, owner: ConsumerView) -> None:
        self._owner = owner
        settings = owner.client.settings
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)
        self._prefix = settings.topic_prefix
        # Broker topic name -> where its records go, set at start.
        self.routing: dict[str, TopicRoute] = {}
        # Whether handler calls get spans, and whether their log fields are bound as
        # structlog context variables (not when structlog's processors add them);
        # the consumer sets both per fetched batch.
        self.tracing = False
        self.log_fields = True
        self._metric_children: dict[tuple[str, str], _Labelled] = {}
        # A batch handler's envelopes are counted by event type; its calls as "*".
        self._consumed_children: dict[tuple[str, str], Any] = {}

    def logical_topic(self, name: str) -> str:
        """The logical topic of the broker topic ``name`` (without the prefix)."""
        route = self.routing.get(name)
        return route.topic if route is not None else name.removeprefix(self._prefix)

    def wants(self, record: ConsumerRecord[bytes, bytes]) -> bool:
        """Whether a handler may want ``record``, from its topic and ``ce_type`` header
        alone (records of event types nobody here handles are skipped unparsed)."""
        route = self.routing.get(record.topic)
        if route is None:
            return False
        if route.batch is not None or ANY_EVENT in route.handlers:
            return True
        for name, value in record.headers:
            if name == "ce_type" and value:
                return value.decode("utf-8", errors="replace") in route.handlers
        return True  # no header: the value says

    async def handle(self, record: ConsumerRecord[bytes, bytes]) -> asyncio.Future[bool] | None:
        """Handle ``record`` to its end: handled, skipped or dead-lettered.

        Returns the future of its dedup mark when the mark is written after this
        returns (a :class:`~disco.bus.DurableDedupStore`): the record's offset may be
        committed only once it says True. None: nothing more to wait for.

        Raises:
            Abandoned: the consumer is stopping; the record stays uncommitted.
            BusError: the record can be neither handled nor dead-lettered.
        """
        route = self.routing.get(record.topic)
        if route is None:
            return None
        found = self.parse(record, route)
        if found is None:
            return None
        if type(found) is not tuple or self._guard is not None:
            # To dead-letter, or a tenant to check: admit() awaits (the common case
            # does not pay for a coroutine).
            admitted = await self.admit(record, route, found)
            if admitted is None:
                return None
            found = admitted
        owner = self._owner
        envelope, traceparent = found
        handlers = route.handlers
        handler = handlers.get(envelope.type) or handlers[ANY_EVENT]
        # In the envelope's context (a durable store acts for its tenant; the
        # handler reads it): entered once for the dedup check, the handler's
        # first attempt and the dedup mark. The HandlerContext itself is built
        # only if something asks for it.
        origin = (
            envelope,
            route.topic,
            record.partition,
            record.offset,
            1,
            owner.group,
            owner.steps,
        )
        entered = enter_record(origin, self.log_fields)
        try:
            store = owner.dedup_store
            # The in-process window answers at once: no coroutine per record.
            memory = store if type(store) is InMemoryDedupStore else None
            if (
                memory.seen_now(envelope.id)
                if memory is not None
                else await store.seen(envelope.id)
            ):
                _log.debug("duplicate envelope skipped", event_id=envelope.id, topic=route.topic)
                return None
            if memory is not None and owner.client.metrics is None:
                # The common case, in this coroutine: a failure goes on in _attempts.
                tracer = owner.client.tracer if self.tracing else None
                try:
                    if tracer is None:
                        await handler(envelope)
                    else:  # as _attempts traces an attempt
                        span, token = self._start_process(tracer, record, envelope, traceparent)
                        try:
                            await handler(envelope)
                        except BaseException as exc:
                            tracer.end_process(span, token, exc)
                            raise
                        tracer.end_process(span, token)
                except Exception as exc:
                    return await self._attempts(record, origin, handler, traceparent, None, exc)
                memory.mark_now(envelope.id)
                return None
            labels = self._labelled(route.topic, envelope.type) if owner.client.metrics else None
            if labels is not None:
                labels.consumed.inc()
                labels.in_flight.count += 1
            try:
                return await self._attempts(record, origin, handler, traceparent, labels)
            finally:
                if labels is not None:
                    labels.in_flight.count -= 1
        finally:
            exit_handler(entered)

    def parse(
        self, record: ConsumerRecord[bytes, bytes], route: TopicRoute
    ) -> tuple[Envelope, str | None] | _Refusal | None:
        """``record``'s envelope and traceparent; a :class:`_Refusal` when it is not
        an envelope (or its ``ce_type`` header contradicts it); None when no handler
        takes it. Its tenant is not checked yet (:meth:`admit`)."""
        ce_type: str | None = None
        traceparent: str | None = None
        structured = True  # only the headers disco writes: not a binary-mode record
        for name, value in record.headers:
            if name == "ce_type" and value:
                ce_type = value.decode("utf-8", errors="replace")
            elif name == "traceparent" and value:
                traceparent = value.decode("utf-8", errors="replace")
            elif name not in _STRUCTURED_HEADERS:
                structured = False
        every = route.batch is not None
        handlers = route.handlers
        if (
            ce_type is not None
            and not every
            and ce_type not in handlers
            and ANY_EVENT not in handlers
        ):
            return None  # someone else's event: skip without parsing
        kind = route.kind
        try:
            envelope = (
                kind.from_kafka_value(record.value)
                if structured
                else kind.from_kafka_record(record.value, record.headers)
            )
        except EnvelopeError as exc:
            return _Refusal("EnvelopeError", exc.reason)
        if ce_type is not None and ce_type != envelope.type:
            return _Refusal(
                "EnvelopeError",
                f"the ce_type header {ce_type!r} does not match the envelope's type "
                f"{envelope.type!r}",
            )
        if ce_type is None and not every and not route.takes(envelope.type):
            return None  # (with the header, its type was asked about above)
        return envelope, traceparent or envelope.traceparent

    async def admit(
        self,
        record: ConsumerRecord[bytes, bytes],
        route: TopicRoute,
        parsed: tuple[Envelope, str | None] | _Refusal | None = None,
    ) -> tuple[Envelope, str | None] | None:
        """Parse (unless ``parsed`` is given) and check ``record``: its envelope and
        traceparent, or None when no handler takes it or it was dead-lettered (not an
        envelope, a ``ce_type`` header its envelope contradicts, a tenant no
        credential vouches for).

        Raises:
            Abandoned: the consumer is stopping before a dead letter was written.
            BusError: the record can be neither handled nor dead-lettered.
        """
        found = parsed if parsed is not None else self.parse(record, route)
        if found is None:
            return None
        if isinstance(found, _Refusal):
            await self.dead_letter(record, found.error_type, found.reason, attempts=0)
            return None
        if self._guard is not None and (
            refused := await self._guard.refusal(found[0].tenant_id, record.headers)
        ):
            await self.dead_letter(record, UNAUTHENTICATED_TENANT, refused, attempts=0)
            return None
        return found

    async def handle_batch(self, records: Sequence[ConsumerRecord[bytes, bytes]]) -> None:
        """Handle one partition's ``records`` (in offset order) with their topic's batch
        handler, to their end: handled or dead-lettered.

        Each record is admitted first (:meth:`admit`: what is not an envelope or not
        vouched for is dead-lettered, and the batch goes on without it); the rest are
        handed over together, retried and split as
        :meth:`~disco.bus.BusConsumer.on_batch` describes. The dedup store is not
        asked: a batch handler sees every delivery.

        Raises:
            Abandoned: the consumer is stopping; the batch stays uncommitted.
            BusError: a record can be neither handled nor dead-lettered.
        """
        route = self.routing.get(records[0].topic) if records else None
        if route is None or route.batch is None:
            return
        parse, checked = self.parse, self._guard is None
        admitted: list[tuple[ConsumerRecord[bytes, bytes], BatchItem]] = []
        for record in records:
            found = parse(record, route)
            if not isinstance(found, tuple) or not checked:  # to check, or to dead-letter
                found = await self.admit(record, route, found)
                if found is None:
                    continue
            admitted.append((record, BatchItem(found[0], record.offset, len(record.value or b""))))
        if not admitted:
            return
        metrics = self._owner.client.metrics
        labels = None
        if metrics is not None:
            labels = self._labelled(route.topic, ANY_EVENT)
            children = self._consumed_children
            for event_type, count in Counter(item.envelope.type for _, item in admitted).items():
                key = (route.topic, event_type)
                consumed = children.get(key)
                if consumed is None:
                    consumed = children[key] = metrics.consumed.labels(self._owner.group, *key)
                consumed.inc(count)
        await self._batch_attempts(route, records[0].partition, admitted, labels)

    async def _batch_attempts(
        self,
        route: TopicRoute,
        partition: int,
        admitted: list[tuple[ConsumerRecord[bytes, bytes], BatchItem]],
        labels: _Labelled | None,
    ) -> None:
        """Call the batch handler until it succeeds; when it gives up, split the batch
        in two and handle each half the same way; dead-letter one record that fails
        alone."""
        assert route.batch is not None
        handler = route.batch.handler
        owner = self._owner
        tries = _Tries(owner, owner.client.settings.bus_retry_attempts)
        items = tuple(item for _, item in admitted)
        attempt = 0
        while True:
            attempt += 1
            if labels is not None:
                if attempt > 1:
                    labels.retries.inc()
                labels.in_flight.count += 1
            started = time.perf_counter()
            failure: Exception | None = None
            try:
                await handler(Batch(route.topic, partition, items, attempt))
            except Exception as exc:
                failure = exc
            finally:
                if labels is not None:
                    labels.in_flight.count -= 1
                    labels.duration.observe(time.perf_counter() - started)
            if failure is None:
                return
            if labels is not None and owner.client.metrics is not None:
                owner.client.metrics.handler_failures.labels(
                    owner.group, route.topic, ANY_EVENT, type(failure).__qualname__
                ).inc()
            final, log = tries.failed(failure)
            if log:
                _log.warning(
                    "batch handler failed: a dependency is unavailable; trying again until "
                    "it is back"
                    if tries.unavailable
                    else "batch handler failed",
                    topic=route.topic,
                    partition=partition,
                    offsets=f"{items[0].offset}-{items[-1].offset}",
                    envelopes=len(items),
                    attempt=attempt,
                    attempts=tries.attempts,
                    giving_up=final,
                    error=repr(failure),
                )
            if final:
                if len(admitted) == 1:
                    await self.dead_letter(
                        admitted[0][0],
                        type(failure).__qualname__,
                        str(failure) or repr(failure),
                        attempt,
                    )
                    return
                # Split: the halves are handled in turn, each from its first attempt,
                # down to the records that fail alone.
                half = len(admitted) // 2
                await self._batch_attempts(route, partition, admitted[:half], labels)
                await self._batch_attempts(route, partition, admitted[half:], labels)
                return
            await tries.back_off(failure)

    def _labelled(self, topic: str, event_type: str) -> _Labelled:
        """The metric children of ``(topic, event_type)`` in this group (looked up once)."""
        key = (topic, event_type)
        labelled = self._metric_children.get(key)
        if labelled is None:
            owner = self._owner
            metrics = owner.client.metrics
            assert metrics is not None
            labels = (owner.group, topic, event_type)
            labelled = self._metric_children[key] = _Labelled(
                consumed=metrics.consumed.labels(*labels),
                retries=metrics.retries.labels(*labels),
                duration=metrics.handler_duration.labels(*labels),
                in_flight=metrics.in_flight_of(owner.group),
            )
        return labelled

    def _start_process(
        self,
        tracer: BusTracer,
        record: ConsumerRecord[bytes, bytes],
        envelope: Envelope,
        traceparent: str | None,
    ) -> tuple[Span, object]:
        """The ``process`` span of a handler call on ``record``, made current."""
        return tracer.start_process(
            record.topic,
            envelope,
            traceparent,
            group=self._owner.group,
            partition=record.partition,
            offset=record.offset,
        )

    async def _attempts(
        self,
        record: ConsumerRecord[bytes, bytes],
        origin: Origin,
        handler: Handler,
        traceparent: str | None,
        labels: _Labelled | None,
        failed: Exception | None = None,
    ) -> asyncio.Future[bool] | None:
        """Call ``handler`` until it succeeds or gives up (the context of ``origin`` is
        entered); the future of the dedup mark when it is written after this returns.
        ``failed``: the first attempt was made, and raised it.

        A failure counts towards ``bus_retry_attempts``, except one that says a dependency
        is unavailable (:class:`~disco.bus.DependencyUnavailableError`): that one is tried
        again for as long as the consumer runs."""
        owner = self._owner
        tries: _Tries | None = None  # made at the first failure
        envelope, topic = origin[0], origin[1]
        tracer = owner.client.tracer if self.tracing else None
        metrics = owner.client.metrics
        attempt = 0 if failed is None else 1
        started = 0.0
        while True:
            entered = None
            if failed is None:
                attempt += 1
                if attempt > 1:
                    if labels is not None:
                        labels.retries.inc()
                    entered = enter_handler(
                        replace(HandlerContext(*origin), attempt=attempt),
                        log_fields=self.log_fields,
                    )
                started = time.perf_counter() if labels is not None else 0.0
            try:
                if failed is not None:
                    exc, failed = failed, None
                    raise exc
                if tracer is not None:
                    span, token = self._start_process(tracer, record, envelope, traceparent)
                    try:
                        await handler(envelope)
                    except BaseException as exc:
                        tracer.end_process(span, token, exc)
                        raise
                    tracer.end_process(span, token)
                else:
                    # No SDK, no span to record: publishing inside the handler
                    # still carries the incoming traceparent on (BusClient
                    # falls back to the handled envelope's).
                    await handler(envelope)
            except Exception as exc:
                if labels is not None and metrics is not None:
                    labels.duration.observe(time.perf_counter() - started)
                    metrics.handler_failures.labels(
                        owner.group, topic, envelope.type, type(exc).__qualname__
                    ).inc()
                if tries is None:
                    tries = _Tries(owner, owner.client.settings.bus_retry_attempts)
                final, log = tries.failed(exc)
                if log:
                    _log.warning(
                        "handler failed: a dependency is unavailable; trying again until it is back"
                        if tries.unavailable
                        else "handler failed",
                        topic=topic,
                        event_id=envelope.id,
                        event_type=envelope.type,
                        attempt=attempt,
                        attempts=tries.attempts,
                        giving_up=final,
                        error=repr(exc),
                    )
                if final:
                    await self.dead_letter(
                        record, type(exc).__qualname__, str(exc) or repr(exc), attempt
                    )
                    return None
                await tries.back_off(exc)
            else:
                if labels is not None:
                    labels.duration.observe(time.perf_counter() - started)
                store = owner.dedup_store
                if type(store) is InMemoryDedupStore:
                    store.mark_now(envelope.id)
                elif isinstance(store, DurableDedupStore):
                    # Written in the background: the offset waits for it, the lane does not.
                    return await store.mark_stored(envelope.id)
                else:
                    await store.mark(envelope.id)
                return None
            finally:
                if entered is not None:
                    exit_handler(entered)

    async def dead_letter(
        self, record: ConsumerRecord[bytes, bytes], error_type: str, message: str, attempts: int
    ) -> None:
        """Copy ``record`` to its topic's ``.dlq`` with the reason, retrying while the
        broker refuses.

        Raises:
            Abandoned: the consumer is stopping before the copy was written.
            BusError: retrying cannot help (the broker refuses the record for good).
        """
        owner = self._owner
        target = dlq_topic(record.topic)
        delay = 0.1
        while True:
            try:
                await owner.client.dead_letter(
                    record,
                    error_type=error_type,
                    error_message=message,
                    attempts=attempts,
                    group=owner.group,
                )
            except BusError as exc:
                cause = exc.__cause__
                if isinstance(cause, KafkaError) and not cause.retriable:
                    # Retrying cannot help (e.g. the record is over the broker's
                    # size limit with the error headers): stop and say so.
                    raise BusError(
                        f"cannot dead-letter offset {record.offset} of {record.topic!r} "
                        f"(partition {record.partition}) to {target!r}: {cause!r}"
                    ) from exc
                # Without the DLQ copy the offset must not move; keep trying
                # until the broker is back or we are told to stop.
                _log.error("dead-lettering failed, retrying", dlq=target, error=repr(exc))
                if owner.stopping:
                    raise Abandoned from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            else:
                if owner.client.metrics is not None:
                    owner.client.metrics.dead_letters.labels(
                        owner.group, self.logical_topic(record.topic), error_type
                    ).inc()
                _log.warning(
                    "record dead-lettered",
                    dlq=target,
                    offset=record.offset,
                    partition=record.partition,
                    error_type=error_type,
                    reason=message,
                )
                return


def _backoff(attempt: int, base_ms: int, max_ms: int) -> float:
    """Seconds before retry ``attempt + 1``: exponential, capped, with "equal jitter"."""
    ceiling = min(max_ms, base_ms << (attempt - 1)) / 1000
    jitter: float = random.uniform(0, ceiling / 2)
    return ceiling / 2 + jitter
