"""W3C trace context across Kafka, with the OpenTelemetry API only.

The service kit (or an agent) installs the OpenTelemetry SDK; without one the
API is a no-op that still passes an incoming ``traceparent`` on, so a trace is
never cut by a disco hop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind

__all__ = ["consumer_span", "current_traceparent", "tracing_enabled"]

_tracer = trace.get_tracer("disco.bus")


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or ``None`` if there is none."""
    # What opentelemetry's TraceContext propagator writes, without building a
    # carrier and running every configured propagator for each message.
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return None
    trace_id, span_id, flags = span_context.trace_id, span_context.span_id, span_context.trace_flags
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def tracing_enabled() -> bool:
    """Whether an OpenTelemetry SDK (any real tracer provider) is installed."""
    return not isinstance(trace.get_tracer_provider(), _NO_SDK)


_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


@contextmanager
def consumer_span(
    topic: str,
    event_type: str,
    traceparent: str | None,
    *,
    group: str,
    partition: int,
    offset: int,
    event_id: str,
) -> Iterator[Span]:
    """A consumer span for one handler call, child of the record's ``traceparent``."""
    parent = propagate.extract({"traceparent": traceparent}) if traceparent else None
    with _tracer.start_as_current_span(
        f"{topic} process", context=parent, kind=SpanKind.CONSUMER
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    "messaging.system": "kafka",
                    "messaging.operation.type": "process",
                    "messaging.destination.name": topic,
                    "messaging.consumer.group.name": group,
                    "messaging.destination.partition.id": str(partition),
                    "messaging.kafka.offset": offset,
                    "messaging.message.id": event_id,
                    "cloudevents.event_type": event_type,
                }
            )
        yield span
