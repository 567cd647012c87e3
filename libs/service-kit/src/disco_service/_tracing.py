"""OpenTelemetry: one tracer provider per app, exporting only when told where.

Spans are always recorded, so trace ids reach the logs and the ``traceparent``
of every envelope the service publishes (the consumer continues the trace);
they leave the process only when ``DISCO_OTEL_EXPORTER_OTLP_ENDPOINT`` is set
(OTLP over HTTP).
"""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from disco_service._settings import ServiceSettings

__all__ = ["create_tracer_provider", "start_export"]

_TRACES_PATH = "/v1/traces"


def create_tracer_provider(settings: ServiceSettings) -> TracerProvider:
    """A provider whose spans name the service (no exporter yet)."""
    resource = Resource.create(
        {
            "service.name": f"disco-{settings.service_name}",
            "service.namespace": "disco",
            "deployment.environment.name": settings.env,
        }
    )
    return TracerProvider(resource=resource)


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
