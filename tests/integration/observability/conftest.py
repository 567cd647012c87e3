"""Fixtures for observability tests: the process-wide tracer provider, agents' settings."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from disco import configure_tracing
from disco.settings import BusSettings


class _Forward(SpanProcessor):
    """Hands finished spans to the current test's processor, if one listens."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        target = self.target
        if target is not None:
            target.on_end(span)


_forward = _Forward()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span this test's process records, through the global provider.

    ``disco.configure_tracing`` installs it (as an agent would); a global
    provider can be set only once per process, so the test's exporter is
    plugged in behind a forwarding processor added once.
    """
    configure_tracing("disco-tests")
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    if not getattr(provider, "_disco_test_forward", False):
        provider.add_span_processor(_forward)
        provider._disco_test_forward = True  # type: ignore[attr-defined]
    exporter = InMemorySpanExporter()
    _forward.target = SimpleSpanProcessor(exporter)
    try:
        yield exporter
    finally:
        _forward.target = None


@pytest.fixture
def agent_settings(kafka_bootstrap: str, session_topic_prefix: str) -> BusSettings:
    """Bus settings of a test's agents: a topic prefix of their own, quick joins."""
    return BusSettings(
        kafka_bootstrap=kafka_bootstrap,
        topic_prefix=f"{session_topic_prefix}obs{uuid.uuid4().hex[:6]}.",
        kafka_session_timeout_ms=2000,
        kafka_heartbeat_interval_ms=300,
        bus_retry_backoff_ms=10,
        bus_retry_backoff_max_ms=20,
    )
