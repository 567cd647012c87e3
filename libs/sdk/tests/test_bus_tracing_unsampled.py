"""Unsampled traces across the bus under parent-based ratio sampling (what
``DISCO_OTEL_TRACES_SAMPLE_RATIO`` installs): no span is made, yet every envelope
carries its trace on, and what a handler does follows the incoming decision."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from disco._context import HandlerContext, enter_handler, exit_handler
from disco.bus import BusClient
from disco_common.envelope import Envelope
from tests.fixtures.tracing import acknowledging_client


class _Seen(SpanProcessor):
    """Every span a processor is handed, started or ended."""

    def __init__(self) -> None:
        self.started: list[Span] = []
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span)

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)

    @property
    def processor(self) -> SpanProcessor:
        return self


class _Exported:
    """The spans exported by the SDK's own simple processor (whose ``on_start`` does
    nothing: the bus then decides and numbers a publish's span ahead, and drops it
    without making one)."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.processor = SimpleSpanProcessor(self.exporter)
        self.started: list[Span] = []  # not told

    @property
    def ended(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()


@pytest.fixture(params=["numbered ahead", "processor sees starts"])
def processor(request: pytest.FixtureRequest) -> _Seen | _Exported:
    return _Exported() if request.param == "numbered ahead" else _Seen()


def _client(
    ratio: float, seen: _Seen | _Exported
) -> tuple[BusClient, TracerProvider, _Seen | _Exported]:
    """A client under ``ParentBased(TraceIdRatioBased(ratio))`` whose records go nowhere."""
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(seen.processor)
    bus = acknowledging_client(provider)
    return bus, provider, seen


def _fields(traceparent: str | None) -> tuple[str, str, str, int]:
    assert traceparent is not None
    version, trace_id, span_id, flags = traceparent.split("-")
    assert len(trace_id) == 32
    assert len(span_id) == 16
    assert len(flags) == 2
    return version, trace_id, span_id, int(flags, 16)


async def _handled_publish(
    bus: BusClient, provider: TracerProvider, incoming: Envelope, offset: int
) -> tuple[Envelope, SpanContext]:
    """What a handler of ``incoming`` publishes, and the context of a span it starts."""
    with bus.tracer.consume(
        "x.business-facts",
        incoming,
        incoming.traceparent,
        group="g",
        partition=0,
        offset=offset,
    ):
        entered = enter_handler(HandlerContext(envelope=incoming, topic="business-facts"))
        try:
            sent = await bus.publish("business-facts", "order.next", {"hop": offset})
            with provider.get_tracer("app").start_as_current_span("app work") as inner:
                inner_context = inner.get_span_context()
        finally:
            exit_handler(entered)
    return sent, inner_context


async def test_an_unsampled_new_trace_and_its_children_stay_unsampled_on_one_trace(
    processor: _Seen | _Exported,
) -> None:
    # Ratio 0: every new trace is dropped. The root publish carries a valid
    # traceparent (sampled flag off); each hop continues that trace with an id of
    # its own, unsampled; no span is ever made (no processor hears of one).
    bus, provider, seen = _client(0.0, processor)
    if isinstance(seen, _Exported):  # no span object at all: only its traceparent
        assert isinstance(bus.tracer.open_send(), str)

    root = await bus.publish("business-facts", "order.placed", {})

    version, trace_id, root_span_id, flags = _fields(root.traceparent)
    assert version == "00"
    assert trace_id != "0" * 32
    assert root_span_id != "0" * 16
    assert not flags & TraceFlags.SAMPLED
    # The flags the SDK gives a new trace it drops (the random-trace-id flag on).
    assert flags == int(
        provider.get_tracer("check").start_span("root").get_span_context().trace_flags
    )
    incoming, span_ids = root, {root_span_id}
    for hop in range(3):
        sent, inner = await _handled_publish(bus, provider, incoming, hop)
        version, sent_trace, sent_span, sent_flags = _fields(sent.traceparent)
        assert (version, sent_trace) == ("00", trace_id)
        assert sent_span not in span_ids
        assert sent_span != "0" * 16
        span_ids.add(sent_span)
        # The flags the SDK gives a child of the same parent (sampled off; the
        # random-trace-id flag kept): those of the span the handler started.
        assert sent_flags == int(inner.trace_flags)
        assert not sent_flags & TraceFlags.SAMPLED
        assert format(inner.trace_id, "032x") == trace_id
        incoming = sent
    assert seen.started == []
    assert list(seen.ended) == []
    assert trace.get_current_span() is trace.INVALID_SPAN


@pytest.mark.parametrize("flags", ["00", "02", "04", "06", "fe"])
async def test_a_publish_in_an_unsampled_handler_call_gets_the_flags_the_sdk_would_give(
    flags: str, processor: _Seen | _Exported
) -> None:
    # The child's traceparent is made from the incoming text, unparsed: its flags
    # must be what the SDK's own tracer gives a child of that parent.
    bus, provider, seen = _client(1.0, processor)  # a ratio for new traces only: parents decide
    incoming_text = f"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-{flags}"
    incoming = Envelope(source="test://t", type="order.placed", traceparent=incoming_text)

    sent, inner = await _handled_publish(bus, provider, incoming, 0)

    parent = NonRecordingSpan(
        SpanContext(
            0x4BF92F3577B34DA6A3CE929D0E0E4736,
            0x00F067AA0BA902B7,
            is_remote=True,
            trace_flags=TraceFlags(int(flags, 16)),
        )
    )
    expected = (
        provider.get_tracer("check")
        .start_span("child", context=trace.set_span_in_context(parent))
        .get_span_context()
    )
    _, trace_id, span_id, sent_flags = _fields(sent.traceparent)
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert span_id not in {"00f067aa0ba902b7", "0" * 16}
    assert sent_flags == int(expected.trace_flags) == int(inner.trace_flags)
    assert seen.started == []


async def test_under_a_ratio_only_the_sampled_new_traces_make_spans_each_made_whole(
    processor: _Seen | _Exported,
) -> None:
    bus, _, seen = _client(0.5, processor)

    sent = [await bus.publish("business-facts", "order.placed", {"n": n}) for n in range(200)]

    sampled = {
        _fields(envelope.traceparent)[1]
        for envelope in sent
        if _fields(envelope.traceparent)[3] & TraceFlags.SAMPLED
    }
    assert 50 < len(sampled) < 150
    # A processor hears of exactly the sampled publishes, each started and ended,
    # with its attributes; the dropped ones never reach it.
    assert {format(span.context.trace_id, "032x") for span in seen.ended} == sampled
    assert len(seen.ended) == len(sampled)
    for span in seen.ended:
        assert span.attributes is not None
        assert span.attributes["messaging.destination.name"] == "x.business-facts"
        assert span.end_time is not None
