"""W3C trace context across Kafka, with the OpenTelemetry API only.

Each publish is a ``PRODUCER`` span (``send <topic>``) whose context is what
the envelope's ``traceparent`` carries; each handler call is a ``CONSUMER``
span (``process <topic>``), child of that ``traceparent``; a requester that
waited for an answer records a ``receive <topic>`` span, child of the answer's.
So one trace runs publisher → consumer → handler → reply → requester.
Attributes follow OpenTelemetry's messaging semantic conventions.

Which tracer provider: the one handed to the :class:`~disco.bus.BusClient`
(services keep one per app), else the global one (``disco.configure_tracing()``
or any OpenTelemetry SDK set up by the application). Without an SDK the API
is a no-op that still passes an incoming ``traceparent`` on, so a trace is
never cut by a disco hop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from disco_common.envelope import Envelope

__all__ = ["BusTracer", "current_traceparent", "tracing_enabled"]

_SCOPE = "disco.bus"
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or ``None`` if there is none."""
    return _traceparent(trace.get_current_span())


def _traceparent(span: Span) -> str | None:
    # What opentelemetry's TraceContext propagator writes, without building a
    # carrier and running every configured propagator for each message.
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return None
    trace_id, span_id, flags = span_context.trace_id, span_context.span_id, span_context.trace_flags
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry SDK (any real global tracer provider) is installed."""
    return not isinstance(trace.get_tracer_provider(), _NO_SDK)


def _parent(traceparent: str | None) -> Context | None:
    return propagate.extract({"traceparent": traceparent}) if traceparent else None


class BusTracer:
    """The spans of one bus client and its consumers.

    Args:
        provider: the tracer provider to record with; ``None`` means the global
            one, looked up while it is still the API's no-op (it may be set later).
    """

    def __init__(self, provider: TracerProvider | None = None) -> None:
        self._tracer: Tracer | None = None
        if provider is not None and not isinstance(provider, _NO_SDK):
            self._tracer = provider.get_tracer(_SCOPE)

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded (a real provider was given or installed globally)."""
        if self._tracer is not None:
            return True
        # A global provider is set once per process and never unset: remember it.
        if tracing_enabled():
            self._tracer = trace.get_tracer(_SCOPE)
            return True
        return False

    def _require(self) -> Tracer:
        tracer = self._tracer
        return tracer if tracer is not None else trace.get_tracer(_SCOPE)

    def start_publish(self, name: str, envelope: Envelope, client_id: str) -> tuple[Span, Envelope]:
        """Start the ``send`` span of ``envelope`` to broker topic ``name``.

        The span is a child of the current span (else of the envelope's own
        ``traceparent``: a handler publishing without a current span continues
        the handled envelope's trace); the envelope returned carries the span's
        ``traceparent``, so the consumer's span becomes its child. End the span
        with :meth:`end`.
        """
        context = None if trace.get_current_span().is_recording() else _parent(envelope.traceparent)
        span = self._require().start_span(f"send {name}", context=context, kind=SpanKind.PRODUCER)
        if span.is_recording():
            span.set_attributes(
                {
                    "messaging.system": "kafka",
                    "messaging.operation.type": "send",
                    "messaging.operation.name": "send",
                    "messaging.destination.name": name,
                    "messaging.message.id": envelope.id,
                    "messaging.client.id": client_id,
                    "messaging.kafka.message.key": envelope.kafka_key().decode(
                        "utf-8", errors="replace"
                    ),
                    "cloudevents.event_id": envelope.id,
                    "cloudevents.event_type": envelope.type,
                }
            )
        traceparent = _traceparent(span)
        if traceparent is not None and traceparent != envelope.traceparent:
            envelope = envelope.model_copy(update={"traceparent": traceparent})
        return span, envelope

    @staticmethod
    def end(span: Span, error: BaseException | None = None) -> None:
        """End a span started here, marked as an error when ``error`` is given."""
        if error is not None and span.is_recording():
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()

    def received(self, name: str, envelope: Envelope, client_id: str) -> None:
        """Record that a requester received ``envelope`` (an answer) from topic ``name``.

        A short ``receive`` span, child of the answer's ``traceparent``: the
        last hop of a request/response trace, seen from the requester.
        """
        span = self._require().start_span(
            f"receive {name}", context=_parent(envelope.traceparent), kind=SpanKind.CONSUMER
        )
        if span.is_recording():
            span.set_attributes(
                {
                    "messaging.system": "kafka",
                    "messaging.operation.type": "receive",
                    "messaging.operation.name": "receive",
                    "messaging.destination.name": name,
                    "messaging.message.id": envelope.id,
                    "messaging.message.conversation_id": envelope.correlation_id or "",
                    "messaging.client.id": client_id,
                    "cloudevents.event_id": envelope.id,
                    "cloudevents.event_type": envelope.type,
                }
            )
        span.end()

    @contextmanager
    def consume(
        self,
        name: str,
        envelope: Envelope,
        traceparent: str | None,
        *,
        group: str,
        partition: int,
        offset: int,
    ) -> Iterator[Span]:
        """The ``process`` span of one handler call, child of the record's ``traceparent``."""
        with self._require().start_as_current_span(
            f"process {name}", context=_parent(traceparent), kind=SpanKind.CONSUMER
        ) as span:
            if span.is_recording():
                span.set_attributes(
                    {
                        "messaging.system": "kafka",
                        "messaging.operation.type": "process",
                        "messaging.operation.name": "process",
                        "messaging.destination.name": name,
                        "messaging.consumer.group.name": group,
                        "messaging.destination.partition.id": str(partition),
                        "messaging.kafka.offset": offset,
                        "messaging.message.id": envelope.id,
                        "cloudevents.event_id": envelope.id,
                        "cloudevents.event_type": envelope.type,
                    }
                )
            yield span
