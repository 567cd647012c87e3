"""OpenTelemetry: one tracer provider per app, exporting only when told where.

Spans are always recorded, so trace ids reach the logs and the ``traceparent``
of every envelope the service publishes (the consumer continues the trace);
they leave the process only when ``DISCO_OTEL_EXPORTER_OTLP_ENDPOINT`` is set
(OTLP over HTTP).
"""

from __future__ import annotations

from opentelemetry.metrics import NoOpMeter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

from disco_service._db import Database
from disco_service._settings import ServiceSettings

__all__ = [
    "create_tracer_provider",
    "instrument_database",
    "instrument_http_clients",
    "start_export",
]

_TRACES_PATH = "/v1/traces"


def _ratio_sampler(ratio: float | None) -> Sampler | None:
    """``ParentBased(TraceIdRatioBased(ratio))``, or None (the SDK's own choice, from
    ``OTEL_TRACES_SAMPLER``) when no ratio is set."""
    return None if ratio is None else ParentBased(TraceIdRatioBased(ratio))


def create_tracer_provider(settings: ServiceSettings) -> TracerProvider:
    """A provider whose spans name the service (no exporter yet), sampled as
    ``DISCO_OTEL_TRACES_SAMPLE_RATIO`` says."""
    resource = Resource.create(
        {
            "service.name": f"disco-{settings.service_name}",
            "service.namespace": "disco",
            "deployment.environment.name": settings.env,
        }
    )
    return TracerProvider(
        resource=resource, sampler=_ratio_sampler(settings.otel_traces_sample_ratio)
    )


def traces_endpoint(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for a collector base URL (``http://host:4318``)."""
    base = endpoint.rstrip("/")
    return base if base.endswith(_TRACES_PATH) else base + _TRACES_PATH


def start_export(provider: TracerProvider, settings: ServiceSettings) -> bool:
    """Attach the OTLP exporter when an endpoint is configured; whether it was."""
    endpoint = settings.otel_exporter_otlp_endpoint
    if not endpoint:
        return False
    # Imported here: a service that exports nothing never loads the exporter.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_endpoint(endpoint)))
    )
    return True


def instrument_database(database: Database, provider: TracerProvider) -> None:
    """Client spans for every SQL statement of ``database``, recorded by ``provider``.

    The official SQLAlchemy instrumentation, attached to this engine only
    (``EngineTracer``, what ``SQLAlchemyInstrumentor().instrument(engine=...)``
    builds): the instrumentor itself is a process-wide singleton with one
    provider, and a test process runs several apps, each with its own.
    """
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.instrumentation.sqlalchemy.version import __version__

    tracer = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy", __version__)
    # Connection-pool usage is a metric; ours are Prometheus', so it goes nowhere.
    usage = NoOpMeter("disco").create_up_down_counter("db.client.connections.usage")
    EngineTracer(tracer, database.engine.sync_engine, usage)  # type: ignore[no-untyped-call]


def instrument_http_clients(provider: TracerProvider) -> None:
    """Client spans for outgoing httpx calls (the official httpx instrumentation).

    Process-wide: the first app of a process names the provider (a deployed
    service is one app per process).
    """
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    instrumentor = HTTPXClientInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider)
