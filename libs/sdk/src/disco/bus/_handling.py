"""A consumer group's handling of one record: route it by topic and ``ce_type``,
parse it, check its tenant's credential, skip a duplicate, call the handler with
retries and backoff, and dead-letter what cannot be handled."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from disco._context import HandlerContext, enter_handler, exit_handler
from disco.bus._credentials import tenant_guard
from disco.bus._dedup import InMemoryDedupStore
from disco.bus._errors import BusError, NonRetryableError
from disco.bus._metrics import InFlight
from disco.bus._partitions import Abandoned
from disco.bus._routes import ANY_EVENT, Handler
from disco_common.auth import TENANT_CREDENTIAL_HEADER, UNAUTHENTICATED_TENANT
from disco_common.envelope import TENANT_HEADER, Envelope, EnvelopeError
from disco_common.topics import dlq_topic

if TYPE_CHECKING:
    from disco.bus._consumer import BusConsumer

__all__ = ["RecordHandler"]

_log = structlog.get_logger("disco.bus")

_STRUCTURED_HEADERS = frozenset(
    {"content-type", "ce_id", TENANT_HEADER, TENANT_CREDENTIAL_HEADER, "tenant_id"}
)
"""Headers of a structured-mode record as disco writes it (besides ``ce_type`` and
``traceparent``): a record with only these is parsed from its value alone."""


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

    def __init__(self, owner: BusConsumer) -> None:
        self._owner = owner
        settings = owner.client.settings
        # Who vouches for each envelope's tenant (None: not required, dev).
        self._guard = tenant_guard(settings)
        self._prefix = settings.topic_prefix
        # Broker topic name -> (logical topic, routes, envelope class), set at start.
        self.routing: dict[str, tuple[str, dict[str, Handler], type[Envelope]]] = {}
        # Whether handler calls get spans, and whether their log fields are bound as
        # structlog context variables (not when structlog's processors add them);
        # the consumer sets both per fetched batch.
        self.tracing = False
        self.log_fields = True
        self._metric_children: dict[tuple[str, str], _Labelled] = {}

    def logical_topic(self, name: str) -> str:
        """The logical topic of the broker topic ``name`` (without the prefix)."""
        routing = self.routing.get(name)
        return routing[0] if routing is not None else name.removeprefix(self._prefix)

    def wants(self, record: ConsumerRecord[bytes, bytes]) -> bool:
        """Whether a handler may want ``record``, from its topic and ``ce_type`` header
        alone (records of event types nobody here handles are skipped unparsed)."""
        routing = self.routing.get(record.topic)
        if routing is None:
            return False
        routes = routing[1]
        if ANY_EVENT in routes:
            return True
        for name, value in record.headers:
            if name == "ce_type" and value:
                return value.decode("utf-8", errors="replace") in routes
        return True  # no header: the value says

    async def handle(self, record: ConsumerRecord[bytes, bytes]) -> None:
        """Handle ``record`` to its end: handled, skipped or dead-lettered.

        Raises:
            Abandoned: the consumer is stopping; the record stays uncommitted.
            BusError: the record can be neither handled nor dead-lettered.
        """
        routing = self.routing.get(record.topic)
        if routing is None:
            return
        owner = self._owner
        topic, routes, kind = routing
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
        if ce_type is not None and ce_type not in routes and ANY_EVENT not in routes:
            return  # someone else's event: skip without parsing
        try:
            envelope = (
                kind.from_kafka_value(record.value)
                if structured
                else kind.from_kafka_record(record.value, record.headers)
            )
        except EnvelopeError as exc:
            await self._dead_letter(record, "EnvelopeError", exc.reason, attempts=0)
            return
        if ce_type is not None and ce_type != envelope.type:
            await self._dead_letter(
                record,
                "EnvelopeError",
                f"the ce_type header {ce_type!r} does not match the envelope's type "
                f"{envelope.type!r}",
                attempts=0,
            )
            return
        handler = routes.get(envelope.type) or routes.get(ANY_EVENT)
        if handler is None:
            return
        if self._guard is not None and (
            refused := await self._guard.refusal(envelope.tenant_id, record.headers)
        ):
            await self._dead_letter(record, UNAUTHENTICATED_TENANT, refused, attempts=0)
            return
        # In the envelope's context (a durable store acts for its tenant; the
        # handler reads it): entered once for the dedup check, the handler's
        # first attempt and the dedup mark.
        context = HandlerContext(
            envelope=envelope,
            topic=topic,
            partition=record.partition,
            offset=record.offset,
            group=owner.group,
        )
        entered = enter_handler(context, log_fields=self.log_fields)
        try:
            store = owner.dedup_store
            # The in-process window answers at once: no coroutine per record.
            if (
                store.seen_now(envelope.id)
                if type(store) is InMemoryDedupStore
                else await store.seen(envelope.id)
            ):
                _log.debug("duplicate envelope skipped", event_id=envelope.id, topic=topic)
                return
            labels = self._labelled(topic, envelope.type) if owner.client.metrics else None
            if labels is not None:
                labels.consumed.inc()
                labels.in_flight.count += 1
            try:
                await self._attempts(
                    record, context, handler, traceparent or envelope.traceparent, labels
                )
            finally:
                if labels is not None:
                    labels.in_flight.count -= 1
        finally:
            exit_handler(entered)

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

    async def _attempts(
        self,
        record: ConsumerRecord[bytes, bytes],
        context: HandlerContext,
        handler: Handler,
        traceparent: str | None,
        labels: _Labelled | None,
    ) -> None:
        """Call ``handler`` until it succeeds or gives up (``context`` is entered)."""
        owner = self._owner
        settings = owner.client.settings
        attempts = settings.bus_retry_attempts
        envelope, topic = context.envelope, context.topic
        tracer = owner.client.tracer if self.tracing else None
        metrics = owner.client.metrics
        for attempt in range(1, attempts + 1):
            entered = None
            if attempt > 1:
                if labels is not None:
                    labels.retries.inc()
                entered = enter_handler(
                    replace(context, attempt=attempt), log_fields=self.log_fields
                )
            started = time.perf_counter()
            try:
                if tracer is not None:
                    span, token = tracer.start_process(
                        record.topic,
                        envelope,
                        traceparent,
                        group=owner.group,
                        partition=record.partition,
                        offset=record.offset,
                    )
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
                final = attempt >= attempts or isinstance(exc, NonRetryableError)
                _log.warning(
                    "handler failed",
                    topic=topic,
                    event_id=envelope.id,
                    event_type=envelope.type,
                    attempt=attempt,
                    attempts=attempts,
                    giving_up=final,
                    error=repr(exc),
                )
                if final:
                    await self._dead_letter(
                        record, type(exc).__qualname__, str(exc) or repr(exc), attempt
                    )
                    return
                if owner._stopping:
                    raise Abandoned from exc
                await asyncio.sleep(
                    _backoff(
                        attempt, settings.bus_retry_backoff_ms, settings.bus_retry_backoff_max_ms
                    )
                )
                if owner._stopping:
                    raise Abandoned from exc
            else:
                if labels is not None:
                    labels.duration.observe(time.perf_counter() - started)
                store = owner.dedup_store
                if type(store) is InMemoryDedupStore:
                    store.mark_now(envelope.id)
                else:
                    await store.mark(envelope.id)
                return
            finally:
                if entered is not None:
                    exit_handler(entered)

    async def _dead_letter(
        self, record: ConsumerRecord[bytes, bytes], error_type: str, message: str, attempts: int
    ) -> None:
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
                if owner._stopping:
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
