"""Trace context across the bus, with an OpenTelemetry SDK recording spans."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import SpanKind, StatusCode

from disco._context import HandlerContext, enter_handler, exit_handler
from disco.bus import BusClient
from disco.bus._envelopes import fast_id
from disco.bus._tracing import BusTracer, current_traceparent
from disco.telemetry import add_trace_ids
from disco_common.envelope import Envelope, EnvelopeError
from tests.fixtures.tracing import acknowledging_client

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


def test_spans_follow_the_provider_sampler_and_still_carry_the_trace_on(
    exporter: InMemorySpanExporter,
) -> None:
    provider = TracerProvider(sampler=ParentBased(ALWAYS_OFF))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = BusTracer(provider)

    span, sent = tracer.start_publish("x.business-facts", _envelope(), "billing")
    tracer.end(span)

    assert exporter.get_finished_spans() == ()
    assert not span.is_recording()
    # Not sampled (flag bit 0 off), yet a trace the consumer continues.
    assert sent.traceparent is not None
    assert int(sent.traceparent.rsplit("-", 1)[1], 16) & 0x01 == 0
    assert sent.traceparent.split("-")[2] == f"{span.get_span_context().span_id:016x}"


def test_what_a_handler_adds_to_its_span_is_exported_and_a_failure_is_recorded(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    envelope = _envelope(INCOMING)

    def handle() -> None:
        with tracer.consume("business-facts", envelope, INCOMING, group="g", partition=0, offset=7):
            current = trace.get_current_span()
            current.set_attribute("order.lines", 3)
            current.add_event("priced", {"total": 42})
            raise ValueError("bad order")

    with pytest.raises(ValueError, match="bad order"):
        handle()

    [finished] = exporter.get_finished_spans()
    assert finished.attributes is not None
    assert finished.attributes["order.lines"] == 3
    assert finished.attributes["messaging.kafka.offset"] == 7
    assert finished.status.status_code is StatusCode.ERROR
    assert [event.name for event in finished.events] == ["priced", "exception"]
    exception = finished.events[1].attributes
    assert exception is not None
    assert exception["exception.type"] == "ValueError"
    assert exception["exception.message"] == "bad order"
    assert finished.resource is not None
    assert finished.instrumentation_scope is not None
    assert finished.instrumentation_scope.name == "disco.bus"


def test_a_publish_inside_a_handler_span_is_its_child(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    envelope = _envelope(INCOMING)
    with tracer.consume("t", envelope, INCOMING, group="g", partition=0, offset=1) as process:
        span = tracer.start_send("x.action-results")
        tracer.end(span)

    send, consumed = exporter.get_finished_spans()
    assert send.name == "send x.action-results"
    assert send.parent is not None
    assert send.parent.span_id == process.get_span_context().span_id
    assert send.context.trace_id == consumed.context.trace_id


def test_envelope_ids_are_distinct_uuid4_across_many_pool_refills() -> None:
    ids = [fast_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert {uuid.UUID(value).version for value in ids} == {4}
    assert {uuid.UUID(value).variant for value in ids} == {uuid.RFC_4122}
    assert all(str(uuid.UUID(value)) == value for value in ids)  # canonical text
    # Every random digit takes every value: no position is stuck.
    digits = [i for i in range(36) if i not in (8, 13, 14, 18, 19, 23)]
    assert all(len({value[i] for value in ids}) == 16 for i in digits)


@pytest.mark.parametrize(
    "header",
    [
        "garbage",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
        "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        # int() would read a sign: neither a negative id nor negative flags pass.
        "00--af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c--7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331--1",
        # ... nor the underscores, spaces and upper case int() would take too.
        "00-0af7651916cd43dd8448eb211c8031_c-b7ad6b7169203331-01",
        "00- af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    ],
)
def test_a_malformed_traceparent_header_starts_a_new_trace(
    tracer: BusTracer, exporter: InMemorySpanExporter, header: str
) -> None:
    with tracer.consume("t", _envelope(), header, group="g", partition=0, offset=0):
        pass

    [finished] = exporter.get_finished_spans()
    assert finished.parent is None
    assert finished.context.is_valid


UNSAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


@pytest.mark.parametrize(
    ("incoming", "recorded"), [(INCOMING, True), (UNSAMPLED, False), (None, True)]
)
def test_the_default_parent_based_sampler_follows_the_incoming_sampled_flag(
    exporter: InMemorySpanExporter, incoming: str | None, recorded: bool
) -> None:
    provider = TracerProvider()  # ParentBased(ALWAYS_ON), decided per parent
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = BusTracer(provider)

    with tracer.consume("t", _envelope(incoming), incoming, group="g", partition=0, offset=0):
        inside = current_traceparent()
        send = tracer.start_send("x.action-results")
        tracer.end(send)

    assert len(exporter.get_finished_spans()) == (2 if recorded else 0)
    assert inside is not None
    assert bool(int(inside.rsplit("-", 1)[1], 16) & 0x01) is recorded  # the sampled flag
    if incoming is not None:
        assert inside.split("-")[1] == incoming.split("-")[1]


class _Starts(SimpleSpanProcessor):
    """Remembers the spans it saw start (an on_start that does something)."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        super().__init__(exporter)
        self.started: list[str] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.name)


def test_processors_added_later_and_their_on_start_see_every_span_after(
    exporter: InMemorySpanExporter,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = BusTracer(provider)
    tracer.end(tracer.start_send("first"))

    later = InMemorySpanExporter()
    starts = _Starts(later)
    provider.add_span_processor(starts)
    tracer.end(tracer.start_send("second"))

    assert [span.name for span in exporter.get_finished_spans()] == ["send first", "send second"]
    assert [span.name for span in later.get_finished_spans()] == ["send second"]
    assert starts.started == ["send second"]


class _RecordOnly(Sampler):
    """Records every span without sampling it (a batch processor must not export it)."""

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY)

    def get_description(self) -> str:
        return "record-only"


def test_a_batch_processor_exports_sampled_spans_with_their_attributes_and_parents() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = BusTracer(provider)
    envelope = _envelope(INCOMING)

    with tracer.consume("t", envelope, INCOMING, group="g", partition=4, offset=9) as process:
        send, sent = tracer.start_publish("x.action-results", _envelope(), "billing")
        tracer.end(send)
    provider.force_flush()

    sent_span, processed = exporter.get_finished_spans()
    assert processed.context.span_id == process.get_span_context().span_id
    assert processed.parent is not None
    assert format(processed.parent.span_id, "016x") == "b7ad6b7169203331"
    assert processed.attributes == {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "t",
        "messaging.consumer.group.name": "g",
        "messaging.destination.partition.id": "4",
        "messaging.kafka.offset": 9,
        "messaging.message.id": envelope.id,
        "cloudevents.event_id": envelope.id,
        "cloudevents.event_type": "order.placed",
    }
    assert sent_span.parent is not None
    assert sent_span.parent.span_id == processed.context.span_id
    assert sent.traceparent == (
        f"00-0af7651916cd43dd8448eb211c80319c-{sent_span.context.span_id:016x}-01"
    )
    assert sent_span.attributes is not None
    assert sent_span.attributes["messaging.message.id"] == sent.id
    assert sent_span.attributes["messaging.client.id"] == "billing"
    assert sent_span.attributes["messaging.destination.name"] == "x.action-results"


def test_spans_of_one_topic_do_not_share_their_attributes(
    tracer: BusTracer, exporter: InMemorySpanExporter
) -> None:
    first, second = _envelope(), _envelope()
    for envelope, offset in ((first, 1), (second, 2)):
        with tracer.consume("t", envelope, None, group="g", partition=0, offset=offset) as span:
            span.set_attribute("order.lines", offset)
        tracer.end(tracer.start_publish("t", envelope, "c")[0])

    processed = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.CONSUMER]
    sent = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert [s.attributes["messaging.message.id"] for s in processed if s.attributes] == [
        first.id,
        second.id,
    ]
    assert [s.attributes["order.lines"] for s in processed if s.attributes] == [1, 2]
    assert [s.attributes["messaging.message.id"] for s in sent if s.attributes] == [
        first.id,
        second.id,
    ]


def test_a_recorded_but_unsampled_span_is_not_exported_by_a_batch_processor() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=_RecordOnly())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = BusTracer(provider)

    span, sent = tracer.start_publish("t", _envelope(), "c")
    assert span.is_recording()
    tracer.end(span)
    provider.force_flush()

    assert exporter.get_finished_spans() == ()
    assert sent.traceparent is not None
    assert int(sent.traceparent.rsplit("-", 1)[1], 16) & 0x01 == 0  # not sampled


# -- through a client's publish (the span numbered first, made with its envelope) ----


def _client(provider: TracerProvider) -> BusClient:
    """A client whose records go nowhere: each is acknowledged at once."""
    return acknowledging_client(provider)


def _provider(exporter: InMemorySpanExporter, *, batch: bool = False) -> TracerProvider:
    provider = TracerProvider()  # the SDK's default sampler: ParentBased(ALWAYS_ON)
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider


async def test_a_publish_is_one_send_span_described_whole_whose_context_the_envelope_carries(
    exporter: InMemorySpanExporter,
) -> None:
    bus = _client(_provider(exporter))

    sent = await bus.publish("business-facts", "order.placed", {"n": 1}, plan_id="p-7")

    [span] = exporter.get_finished_spans()
    assert span.name == "send x.business-facts"
    assert span.kind is SpanKind.PRODUCER
    assert span.parent is None  # outside any span or handler: a new trace
    assert sent.traceparent == (
        f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-"
        f"{int(span.context.trace_flags):02x}"
    )
    assert span.context.trace_flags.sampled
    assert span.attributes == {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "x.business-facts",
        "messaging.message.id": sent.id,
        "messaging.client.id": "billing",
        "messaging.kafka.message.key": "p-7",
        "cloudevents.event_id": sent.id,
        "cloudevents.event_type": "order.placed",
    }
    assert span.start_time is not None
    assert span.end_time is not None
    assert span.start_time <= span.end_time


@pytest.mark.parametrize(("incoming", "recorded"), [(INCOMING, True), (UNSAMPLED, False)])
async def test_a_publish_in_a_handler_without_a_span_continues_the_handled_envelope_trace(
    exporter: InMemorySpanExporter, incoming: str, recorded: bool
) -> None:
    bus = _client(_provider(exporter))
    entered = enter_handler(HandlerContext(envelope=_envelope(incoming), topic="t"))
    try:
        sent = await bus.publish("business-facts", "order.done", {})
    finally:
        exit_handler(entered)

    trace_id, parent_id = incoming.split("-")[1:3]
    assert sent.traceparent is not None
    assert sent.traceparent.split("-")[1] == trace_id
    assert sent.traceparent.split("-")[2] != parent_id  # the send span's own id
    assert bool(int(sent.traceparent.rsplit("-", 1)[1], 16) & 0x01) is recorded
    if recorded:
        [span] = exporter.get_finished_spans()
        assert span.parent is not None
        assert span.parent.is_remote
        assert format(span.parent.span_id, "016x") == parent_id
    else:
        assert exporter.get_finished_spans() == ()


async def test_a_publish_inside_a_process_span_is_its_child_and_a_starting_processor_sees_it(
    exporter: InMemorySpanExporter,
) -> None:
    provider = _provider(exporter)
    starts = _Starts(InMemorySpanExporter())  # its on_start needs the span at once
    bus = _client(provider)
    with bus.tracer.consume("t", _envelope(INCOMING), INCOMING, group="g", partition=0, offset=1):
        first = await bus.publish("business-facts", "order.done", {})
        provider.add_span_processor(starts)
        second = await bus.publish("business-facts", "order.done", {})

    first_span, second_span, process = exporter.get_finished_spans()
    for span, sent in ((first_span, first), (second_span, second)):
        assert span.parent is not None
        assert span.parent.span_id == process.context.span_id
        assert span.attributes is not None
        assert span.attributes["messaging.message.id"] == sent.id
    assert starts.started == ["send x.business-facts"]  # added after the process span began


async def test_an_envelope_that_cannot_be_built_leaves_an_error_send_span(
    exporter: InMemorySpanExporter,
) -> None:
    bus = _client(_provider(exporter))

    with pytest.raises(EnvelopeError):
        await bus.publish("business-facts", "not a type!", {})

    [span] = exporter.get_finished_spans()
    assert span.name == "send x.business-facts"
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert "messaging.message.id" not in span.attributes
    assert [event.name for event in span.events] == ["exception"]


async def test_a_batch_processor_exports_every_publish_span_across_many_batches() -> None:
    exporter = InMemorySpanExporter()
    provider = _provider(exporter, batch=True)
    bus = _client(provider)

    acks = [await bus.send("business-facts", "order.placed", {"n": n}) for n in range(1500)]
    sent = await asyncio.gather(*acks)
    provider.force_flush()

    exported = {
        (span.attributes or {}).get("messaging.message.id")
        for span in exporter.get_finished_spans()
    }
    assert exported == {envelope.id for envelope in sent}
    provider.shutdown()
    # After shutdown spans are dropped (as the SDK's own are), never an error.
    await bus.publish("business-facts", "order.placed", {})


async def test_a_parent_based_ratio_sampler_samples_new_traces_by_their_id_as_the_sdk_would(
    exporter: InMemorySpanExporter,
) -> None:
    # ParentBased(TraceIdRatioBased(r)) is decided by the bus itself (no sampler call per
    # span): exactly the traces the SDK's sampler would take, and every publish carries
    # its trace on, sampled or not.
    sampler = ParentBased(TraceIdRatioBased(0.25))
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    bus = _client(provider)

    sent = [await bus.publish("business-facts", "order.placed", {"n": n}) for n in range(400)]

    exported = {span.context.trace_id for span in exporter.get_finished_spans()}
    flags = {}
    for envelope in sent:
        assert envelope.traceparent is not None
        _, trace_id, _, flag = envelope.traceparent.split("-")
        flags[int(trace_id, 16)] = int(flag, 16) & 0x01
    expected = {
        trace_id
        for trace_id in flags
        if sampler.should_sample(None, trace_id, "send").decision is Decision.RECORD_AND_SAMPLE
    }
    assert exported == expected == {trace_id for trace_id, sampled in flags.items() if sampled}
    assert 40 < len(exported) < 160  # about a quarter of 400 new traces


@pytest.mark.parametrize(("incoming", "recorded"), [(INCOMING, True), (UNSAMPLED, False)])
def test_a_parent_based_ratio_sampler_follows_an_incoming_trace_whatever_its_ratio(
    exporter: InMemorySpanExporter, incoming: str, recorded: bool
) -> None:
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.0)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = BusTracer(provider)

    with tracer.consume("t", _envelope(incoming), incoming, group="g", partition=0, offset=0):
        send = tracer.start_send("x.action-results")
        tracer.end(send)

    assert len(exporter.get_finished_spans()) == (2 if recorded else 0)


def _ratio_provider(exporter: InMemorySpanExporter, ratio: float) -> TracerProvider:
    """What ``DISCO_OTEL_TRACES_SAMPLE_RATIO`` installs: parent-based ratio sampling."""
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


async def test_an_unsampled_handler_call_records_no_span_and_carries_the_trace_on(
    exporter: InMemorySpanExporter,
) -> None:
    # A production ratio: most incoming traces are unsampled. The handler call makes no
    # span of its own; the incoming context is current as it came, so what happens
    # inside follows its unsampled decision and keeps its trace id.
    provider = _ratio_provider(exporter, 0.1)
    bus = _client(provider)
    trace_id, parent_id = UNSAMPLED.split("-")[1:3]
    events: list[dict[str, Any]] = []
    envelope = _envelope(UNSAMPLED)
    with bus.tracer.consume("t", envelope, UNSAMPLED, group="g", partition=0, offset=3) as span:
        current = trace.get_current_span()
        entered = enter_handler(HandlerContext(envelope=envelope, topic="t"))
        try:
            sent = await bus.publish("business-facts", "order.done", {})
            with provider.get_tracer("app").start_as_current_span("app work") as inner:
                inner_context = inner.get_span_context()
            events.append(add_trace_ids(None, "info", {}))
        finally:
            exit_handler(entered)

    assert exporter.get_finished_spans() == ()
    assert not span.is_recording()
    assert current is span
    context = current.get_span_context()
    assert (format(context.trace_id, "032x"), format(context.span_id, "016x")) == (
        trace_id,
        parent_id,
    )
    assert context.is_remote
    assert not context.trace_flags.sampled
    # A span started in the handler: unsampled, same trace.
    assert not inner_context.trace_flags.sampled
    assert format(inner_context.trace_id, "032x") == trace_id
    # A publish: the same trace, unsampled, a span id of its own.
    assert sent.traceparent is not None
    version, sent_trace, sent_span, flags = sent.traceparent.split("-")
    assert (version, sent_trace, flags) == ("00", trace_id, "00")
    assert sent_span not in {parent_id, "0" * 16}
    # Log lines name the trace.
    assert events == [{"trace_id": trace_id, "span_id": parent_id}]
    assert trace.get_current_span() is trace.INVALID_SPAN  # detached after the call


@pytest.mark.parametrize(
    "incoming",
    [
        "00-00000000000000000000000000000000-b7ad6b7169203331-00",  # no trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-00",  # no parent span id
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",  # an unknown version
    ],
)
def test_an_invalid_unsampled_traceparent_is_no_parent(
    exporter: InMemorySpanExporter, incoming: str
) -> None:
    # Not a parent to follow: the call starts a new trace, decided by the root sampler
    # (ratio 1: recorded).
    tracer = BusTracer(_ratio_provider(exporter, 1.0))
    envelope = Envelope(source="test://t", type="order.placed", traceparent=incoming)

    with tracer.consume("t", envelope, incoming, group="g", partition=0, offset=0):
        pass

    [span] = exporter.get_finished_spans()
    assert span.parent is None
    assert format(span.context.trace_id, "032x") != incoming.split("-")[1]


def test_a_sampled_parent_under_a_ratio_sampler_still_gets_its_process_span(
    exporter: InMemorySpanExporter,
) -> None:
    tracer = BusTracer(_ratio_provider(exporter, 0.0))

    with tracer.consume("t", _envelope(INCOMING), INCOMING, group="g", partition=0, offset=0):
        pass

    [span] = exporter.get_finished_spans()
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == "b7ad6b7169203331"


async def test_a_dropped_new_trace_is_published_without_a_span_yet_with_its_trace(
    exporter: InMemorySpanExporter,
) -> None:
    bus = _client(_ratio_provider(exporter, 0.0))

    sent = [await bus.publish("business-facts", "order.placed", {"n": n}) for n in range(20)]

    assert exporter.get_finished_spans() == ()
    trace_ids = set()
    for envelope in sent:
        assert envelope.traceparent is not None
        version, trace_id, span_id, flags = envelope.traceparent.split("-")
        assert version == "00"
        assert int(flags, 16) & 0x01 == 0
        assert trace_id != "0" * 32
        assert span_id != "0" * 16
        trace_ids.add(trace_id)
    assert len(trace_ids) == 20  # each publish outside a handler starts its own trace
