"""The publish path of :class:`~disco.bus.BusClient`: :class:`Publishing`.

Envelope building, the size check, signing, the hand-over to the
:class:`~disco.bus._producer.RecordWriter`, waiting for (or pipelining) the
broker's acknowledgement, and counting and ending the span of each publish.

It is a mixin rather than a collaborator the client holds: every publish runs
through these methods, and as methods of the client itself they cost no extra
attribute lookup per message. A subclass (the test kit's bus) or a test can
still replace ``_write_envelope`` on the client, and every publish sees it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from aiokafka.errors import KafkaError, UnknownError
from opentelemetry.trace import Span

from disco.bus._credentials import CredentialSigner, override_header
from disco.bus._envelopes import build_envelope, ready_envelope, rejected
from disco.bus._errors import BusNotStartedError, MessageTooLargeError
from disco.bus._metrics import BusMetrics
from disco.bus._producer import DeliveryReceiver, RecordWriter
from disco.bus._tracing import BusTracer, span_traceparent
from disco.bus._wire import record_size
from disco.settings import BusSettings
from disco_common.envelope import ActionRequest, Envelope, KafkaHeaders
from disco_common.topics import Topic

__all__ = ["Publishing", "RequestValidator"]


RequestValidator = Callable[[str, Any], Awaitable[None]]
"""Checks an ``action-requests`` payload: ``await validator(event_type, data)`` raises to refuse."""

_UNKNOWN_ERROR_RETRIES = 3
"""Extra sends of an envelope the broker refused with an "unknown server error"."""


class _Acknowledgement(asyncio.Future[Envelope]):
    """The future :meth:`BusClient.send` returns: it settles itself from aiokafka's
    delivery future (one object per publish rather than a future and a closure)."""

    __slots__ = ("client", "envelope", "name", "span")

    client: Publishing
    envelope: Envelope
    name: str
    span: Span | None

    def settle(self, delivery: asyncio.Future[Any]) -> None:
        """:meth:`received`, from a delivery future (as its done callback)."""
        cancelled = delivery.cancelled()
        self.received(None if cancelled else delivery.exception(), cancelled)

    def received(self, error: BaseException | None, cancelled: bool) -> None:
        """Count and end the span of the delivery, then resolve to the envelope (or
        fail with :class:`PublishError`)."""
        envelope = self.envelope
        self.client._published(self.name, envelope, self.span, error)
        if self.done():
            return
        if cancelled:
            self.cancel()
        elif error is not None:
            self.set_exception(rejected(self.name, envelope, error))
        else:
            self.set_result(envelope)


class Publishing:
    """The publish path, mixed into :class:`~disco.bus.BusClient` (see the module docs).

    The client's ``__init__`` sets the attributes declared here; ``_writer`` is
    set while the client is started.
    """

    settings: BusSettings
    name: str
    source: str
    tracer: BusTracer
    metrics: BusMetrics | None
    _signer: CredentialSigner | None
    _writer: RecordWriter | None
    _names: dict[str, str]
    _request_validator: RequestValidator | None
    # Labelled counters by (broker topic, event type, acknowledged).
    _counted: dict[tuple[str, str, bool], Any]

    if TYPE_CHECKING:
        # Defined by the client (public API); declared here for the type checker only,
        # so that the client's own definition is the one found at run time.
        def topic_name(self, topic: str | Topic) -> str: ...

    def _broker_name(self, topic: str | Topic) -> str:
        name = self._names.get(topic)
        if name is None:
            name = self._names[str(topic)] = self.topic_name(topic)
        return name

    def _build(
        self, topic: str | Topic, event_type: str, data: Any, attributes: Mapping[str, Any]
    ) -> tuple[Envelope, Span | None]:
        """The envelope, and its publish span when tracing: the span starts first,
        so the envelope is built with the span's ``traceparent`` (no copy after)."""
        tracer = self.tracer
        if not tracer.enabled:
            return build_envelope(topic, event_type, data, attributes, source=self.source), None
        # The common case: the span is numbered first and made once the envelope is
        # (opened); else it starts now and is described once the envelope is.
        opened = tracer.open_send()
        if isinstance(opened, str):
            # Dropped by the sampler: the envelope carries the trace on (this
            # traceparent, sampled flag off); there is no span to make or end.
            return build_envelope(
                topic, event_type, data, attributes, source=self.source, traceparent=opened
            ), None
        name = self._broker_name(topic)
        span: Span | None = None
        if opened is None:
            span = tracer.start_send(name)
            traceparent = span_traceparent(span)
        else:
            traceparent = opened.traceparent
        try:
            envelope = build_envelope(
                topic, event_type, data, attributes, source=self.source, traceparent=traceparent
            )
        except BaseException as exc:
            if opened is not None:
                span = tracer.send_span(opened, name, None, self.name)
            tracer.end(cast(Span, span), exc)
            raise
        if opened is not None:
            return envelope, tracer.send_span(opened, name, envelope, self.name)
        span = cast(Span, span)
        tracer.describe_send(span, envelope, self.name)
        return envelope, span

    def _ready(
        self, name: str, topic: str | Topic, envelope: Envelope
    ) -> tuple[Envelope, Span | None]:
        """A ready-made envelope checked for ``topic``, with its publish span when tracing."""
        if not self.tracer.enabled:
            return ready_envelope(topic, envelope), None
        envelope = ready_envelope(topic, envelope, retrace=False)
        span = self.tracer.start_send(name, envelope.traceparent)
        self.tracer.describe_send(span, envelope, self.name)
        traceparent = span_traceparent(span)
        if traceparent is not None and traceparent != envelope.traceparent:
            envelope = envelope.model_copy(update={"traceparent": traceparent})
        return envelope, span

    async def _enqueue(
        self, name: str, envelope: Envelope, span: Span | None
    ) -> asyncio.Future[Envelope]:
        """Put ``envelope`` in the producer; a future resolves to it once acknowledged."""
        acknowledged = _Acknowledgement(loop=asyncio.get_running_loop())
        acknowledged.client, acknowledged.name = self, name
        acknowledged.envelope, acknowledged.span = envelope, span
        try:
            delivery = await self._write_envelope(name, envelope, acknowledged)
        except BaseException as exc:
            self._published(name, envelope, span, exc)
            raise
        if delivery is not None:  # a writer that answers with a future instead
            delivery.add_done_callback(acknowledged.settle)
        return acknowledged

    async def _deliver(self, name: str, envelope: Envelope, span: Span | None) -> Envelope:
        """Send ``envelope`` and wait for the broker's acknowledgement.

        An "unknown server error" is tried again a few times: Tansu answers so
        when two writes race for a partition's first offset just after it
        restarted without its data (its log says ``AlreadyExists``; the record
        was not stored). Sending the same envelope again is safe anyway:
        consumers deduplicate by envelope id.
        """
        try:
            for attempt in range(_UNKNOWN_ERROR_RETRIES + 1):
                delivery = await self._write_envelope(name, envelope)
                assert delivery is not None  # no receiver given: a future
                try:
                    await delivery
                except UnknownError as exc:
                    if attempt == _UNKNOWN_ERROR_RETRIES:
                        raise rejected(name, envelope, exc) from exc
                    await asyncio.sleep(0.05 * 2**attempt)
                except KafkaError as exc:
                    raise rejected(name, envelope, exc) from exc
                else:
                    break
        except BaseException as exc:
            self._published(name, envelope, span, exc)
            raise
        self._published(name, envelope, span, None)
        return envelope

    def _published(
        self, name: str, envelope: Envelope, span: Span | None, error: BaseException | None
    ) -> None:
        """Count and end the span of one publish, done or failed."""
        if span is not None:
            self.tracer.end(span, error)
        metrics = self.metrics
        if metrics is not None:
            key = (name, envelope.type, error is None)
            child = self._counted.get(key)
            if child is None:
                logical = name.removeprefix(self.settings.topic_prefix)
                counter = metrics.produced if error is None else metrics.produce_failures
                child = self._counted[key] = counter.labels(self.name, logical, envelope.type)
            child.inc()

    async def _write_envelope(
        self, name: str, envelope: Envelope, receiver: DeliveryReceiver | None = None
    ) -> asyncio.Future[Any] | None:
        """Hand ``envelope``'s record to the writer: its delivery future, or None when
        ``receiver`` is told of the outcome instead."""
        if self._request_validator is not None and isinstance(envelope, ActionRequest):
            await self._request_validator(envelope.type, envelope.data)
        signer = self._signer
        if signer is None:
            credential = override_header()
        else:
            credential = signer.header_now() or await signer.header()
        # What record_for() makes, without the record object (one allocation fewer per publish).
        key = envelope.kafka_key()
        value = envelope.to_kafka_value()
        headers = envelope.kafka_headers()
        if credential is not None:
            headers.append(credential)
        limit = self.settings.bus_max_message_bytes
        # Count exactly only when it could matter: headers and framing of a
        # disco record stay far below 2 KiB.
        if len(value) + len(key) + 2048 > limit:
            size = record_size(key, value, headers)
            if size > limit:
                raise MessageTooLargeError(name, envelope.type, size, limit)
        return await self._require_writer().write(name, key, value, headers, receiver)

    async def _write(
        self, name: str, key: bytes | None, value: bytes | None, headers: KafkaHeaders
    ) -> asyncio.Future[Any]:
        """Hand a record to aiokafka; return its delivery future."""
        delivery = await self._require_writer().write(name, key, value, headers)
        assert delivery is not None  # no receiver given: a future
        return delivery

    def _require_writer(self) -> RecordWriter:
        writer = self._writer
        if writer is None:
            raise BusNotStartedError(
                "the BusClient is not started: use `async with BusClient(...)` or "
                "`await bus.start()` before publishing"
            )
        return writer
