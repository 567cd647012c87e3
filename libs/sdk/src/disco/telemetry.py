"""Logs, traces and metrics for agents, the way the services have them.

- :func:`configure_logging`: structlog JSON lines on stderr (the services'
  format), each with ``trace_id`` and ``span_id`` of the current span and the
  handled envelope's ``event_id``, ``event_type`` and ``tenant_id``.
- :func:`configure_tracing`: installs the OpenTelemetry SDK as the global
  tracer provider (needs ``disco-sdk[otel]``), exporting over OTLP/HTTP when
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``DISCO_OTEL_EXPORTER_OTLP_ENDPOINT``) is
  set, and traces outgoing httpx calls. The bus then records a span per
  publish and per handler call, continued across Kafka by ``traceparent``.
- Metrics: start an agent with ``DISCO_METRICS_PORT`` and it serves
  Prometheus metrics on it (:class:`disco.bus.BusMetrics`).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal

import structlog
from opentelemetry import trace
from structlog.types import EventDict, Processor, WrappedLogger

from disco._context import maybe_current_context

__all__ = [
    "add_handler_context",
    "add_trace_ids",
    "configure_logging",
    "configure_tracing",
    "handler_fields_added",
]

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def add_trace_ids(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """structlog processor: ``trace_id`` and ``span_id`` of the current span, if any."""
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        event.setdefault("trace_id", f"{span_context.trace_id:032x}")
        event.setdefault("span_id", f"{span_context.span_id:016x}")
    return event


def add_handler_context(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
    """structlog processor: the handled envelope's id, type and tenant, inside a handler."""
    context = maybe_current_context()
    if context is not None:
        envelope = context.envelope
        event.setdefault("event_id", envelope.id)
        event.setdefault("event_type", envelope.type)
        if envelope.tenant_id is not None:
            event.setdefault("tenant_id", envelope.tenant_id)
        if envelope.traceparent is not None and "trace_id" not in event:
            # No SDK, no current span: the envelope's trace still names the line.
            parts = envelope.traceparent.split("-")
            if len(parts) == 4:
                event["trace_id"], event["span_id"] = parts[1], parts[2]
    return event


def handler_fields_added() -> bool:
    """Whether structlog's configured processors add a handler's log fields when a
    line is written (:func:`add_handler_context`, as :func:`configure_logging`
    sets them up): the bus then does not bind them as context variables."""
    return add_handler_context in structlog.get_config()["processors"]


def configure_logging(
    *,
    level: LogLevel | None = None,
    json: bool | None = None,
    service: str | None = None,
) -> None:
    """Route structlog and the standard library through one renderer on stderr.

    Args:
        level: the root level (default ``DISCO_LOG_LEVEL``, else ``INFO``).
        json: JSON lines (default ``DISCO_LOG_JSON``, else JSON unless stderr
            is a terminal).
        service: a ``service`` field on every line (e.g. the agent's name).
    """
    level = level or _env_level()
    if json is None:
        flag = os.environ.get("DISCO_LOG_JSON")
        json = flag.lower() in {"1", "true", "yes"} if flag else not sys.stderr.isatty()
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        add_trace_ids,
        add_handler_context,
        structlog.processors.StackInfoRenderer(),
    ]
    if service is not None:
        shared.insert(0, _add_service(service))
    if json:
        shared.append(structlog.processors.format_exc_info)
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    renderer: Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    handler.set_name("disco")
    root = logging.getLogger()
    for existing in list(root.handlers):
        if existing.get_name() == "disco":
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # aiokafka logs every reconnect attempt at ERROR while a broker is away.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))


def _env_level() -> LogLevel:
    value = os.environ.get("DISCO_LOG_LEVEL", "INFO").upper()
    if value not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ValueError(
            f"DISCO_LOG_LEVEL={value!r} is not a level: use DEBUG, INFO, WARNING, ERROR or CRITICAL"
        )
    return value  # type: ignore[return-value]


def _add_service(service: str) -> Processor:
    def processor(logger: WrappedLogger, method: str, event: EventDict) -> EventDict:
        event.setdefault("service", service)
        return event

    return processor


_SAMPLE_RATIO_VARIABLE = "DISCO_OTEL_TRACES_SAMPLE_RATIO"


def _ratio_from_env() -> float | None:
    value = os.environ.get(_SAMPLE_RATIO_VARIABLE, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise ValueError(
            f"{_SAMPLE_RATIO_VARIABLE}={value!r} is not a number from 0 to 1"
        ) from None


def configure_tracing(
    service_name: str, *, endpoint: str | None = None, sample_ratio: float | None = None
) -> bool:
    """Install the OpenTelemetry SDK as the global tracer provider (once per process).

    Spans are recorded from then on (trace ids reach the logs and every
    published envelope's ``traceparent``); they leave the process over
    OTLP/HTTP when ``endpoint`` (else ``OTEL_EXPORTER_OTLP_ENDPOINT``, else
    ``DISCO_OTEL_EXPORTER_OTLP_ENDPOINT``) is set. Outgoing httpx calls (the
    registry, memory and tracker clients) get client spans.

    Args:
        service_name: ``service.name`` of the spans (e.g. the agent's name).
        endpoint: the collector's base URL (``http://collector:4318``).
        sample_ratio: the share of new traces sampled (else
            ``DISCO_OTEL_TRACES_SAMPLE_RATIO``), parent-based: a handler's spans
            follow the sampling of the trace its envelope carries, so a trace is
            whole or absent. Unset: the SDK's own choice (``OTEL_TRACES_SAMPLER``,
            default every trace).

    Returns:
        Whether spans are exported.

    Raises:
        RuntimeError: the OpenTelemetry SDK is not installed (``pip install 'disco-sdk[otel]'``).
        ValueError: the ratio is not a number from 0 to 1.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError as exc:
        raise RuntimeError(
            f"configure_tracing needs the OpenTelemetry SDK ({exc.name} is missing): "
            "install 'disco-sdk[otel]'"
        ) from exc
    endpoint = (
        endpoint
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or os.environ.get("DISCO_OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    ratio = sample_ratio if sample_ratio is not None else _ratio_from_env()
    if ratio is not None and not 0 <= ratio <= 1:
        raise ValueError(f"the trace sample ratio must be from 0 to 1, not {ratio}")
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider(
            resource=Resource.create({"service.name": service_name, "service.namespace": "disco"}),
            sampler=None if ratio is None else ParentBased(TraceIdRatioBased(ratio)),
        )
        trace.set_tracer_provider(provider)
    exporting = False
    if endpoint:
        base = endpoint.rstrip("/")
        url = base if base.endswith("/v1/traces") else f"{base}/v1/traces"
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
        exporting = True
    instrumentor = HTTPXClientInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=provider)
    return exporting
