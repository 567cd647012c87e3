"""Trace context across the bus, with an OpenTelemetry SDK recording spans."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from disco.bus._tracing import BusTracer, current_traceparent
from disco_common.envelope import Envelope

INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> BusTracer:
    # A provider of the test's own: the process-wide one can be set only once.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return BusTracer(provider)


def _envelope(traceparent: str | None = None) -> Envelope:
    return Envelope(
        source="test://t", type="order.placed", data={}, traceparent=traceparent, plan_id="p-1"
    )


def test_a_handler_runs_in_a_consumer_span_that_continues_the_incoming_trace(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    envelope = _envelope(INCOMING)
    with tracer.consume(
        "business-facts", envelope, INCOMING, group="billing", partition=2, offset=41
    ) as span:
        inside = current_traceparent()

    [finished] = exporter.get_finished_spans()
    assert finished.kind is SpanKind.CONSUMER
    assert finished.name == "process business-facts"
    assert format(finished.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert finished.parent is not None
    assert format(finished.parent.span_id, "016x") == "b7ad6b7169203331"
    assert finished.attributes is not None
    assert finished.attributes["messaging.system"] == "kafka"
    assert finished.attributes["messaging.consumer.group.name"] == "billing"
    assert finished.attributes["messaging.kafka.offset"] == 41
    assert finished.attributes["messaging.message.id"] == envelope.id
    # What the handler publishes carries the consumer span as its parent.
    assert (
        inside == f"00-0af7651916cd43dd8448eb211c80319c-{span.get_span_context().span_id:016x}-01"
    )


def test_a_publish_span_continues_the_envelope_trace_and_is_what_the_envelope_carries(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    span, sent = tracer.start_publish("x.action-requests", _envelope(INCOMING), "billing")
    tracer.end(span)

    [finished] = exporter.get_finished_spans()
    assert finished.kind is SpanKind.PRODUCER
    assert finished.name == "send x.action-requests"
    assert finished.parent is not None
    assert format(finished.parent.span_id, "016x") == "b7ad6b7169203331"
    assert sent.traceparent == (
        f"00-0af7651916cd43dd8448eb211c80319c-{finished.context.span_id:016x}-01"
    )
    assert finished.attributes is not None
    assert finished.attributes["messaging.operation.type"] == "send"
    assert finished.attributes["messaging.destination.name"] == "x.action-requests"
    assert finished.attributes["messaging.kafka.message.key"] == "p-1"


def test_a_failed_publish_marks_its_span_as_an_error(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    span, _ = tracer.start_publish("t", _envelope(), "c")
    tracer.end(span, RuntimeError("broker away"))

    [finished] = exporter.get_finished_spans()
    assert finished.status.status_code is StatusCode.ERROR
    assert finished.parent is None


def test_outside_any_span_there_is_no_traceparent_to_publish() -> None:
    assert current_traceparent() is None
