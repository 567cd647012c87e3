"""Trace context across the bus, with an OpenTelemetry SDK recording spans."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from disco.bus import _tracing
from disco.bus._tracing import consumer_span, current_traceparent

INCOMING = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    # A provider of the test's own: the process-wide one can be set only once.
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(_tracing, "_tracer", provider.get_tracer("disco.bus"))
    return spans


def test_a_handler_runs_in_a_consumer_span_that_continues_the_incoming_trace(
    exporter: InMemorySpanExporter,
) -> None:
    with consumer_span(
        "business-facts",
        "order.placed",
        INCOMING,
        group="billing",
        partition=2,
        offset=41,
        event_id="e-1",
    ) as span:
        inside = current_traceparent()

    [finished] = exporter.get_finished_spans()
    assert finished.kind is SpanKind.CONSUMER
    assert finished.name == "business-facts process"
    assert format(finished.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
    assert finished.parent is not None
    assert format(finished.parent.span_id, "016x") == "b7ad6b7169203331"
    assert finished.attributes is not None
    assert finished.attributes["messaging.consumer.group.name"] == "billing"
    assert finished.attributes["messaging.kafka.offset"] == 41
    # What the handler publishes carries the consumer span as its parent.
    assert (
        inside == f"00-0af7651916cd43dd8448eb211c80319c-{span.get_span_context().span_id:016x}-01"
    )


def test_without_an_incoming_traceparent_the_consumer_span_starts_a_trace(
    exporter: InMemorySpanExporter,
) -> None:
    with consumer_span(
        "business-facts", "x.happened", None, group="g", partition=0, offset=0, event_id="e"
    ):
        pass

    [finished] = exporter.get_finished_spans()
    assert finished.parent is None


def test_outside_any_span_there_is_no_traceparent_to_publish() -> None:
    assert current_traceparent() is None
