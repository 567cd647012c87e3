"""Prometheus metrics: one registry per app, so several apps can share a process."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from disco.bus import BusMetrics

__all__ = ["ServiceMetrics"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ServiceMetrics:
    """The metrics every service exposes on ``/metrics``.

    Domain code registers its own on :attr:`registry`
    (``Counter("...", "...", registry=metrics.registry)``).
    """

    def __init__(self, service: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.info = Gauge(
            "disco_service_info",
            "Which disco service this is.",
            ["service"],
            registry=self.registry,
        )
        self.info.labels(service=service).set(1)
        # What the service's bus client publishes and its consumer groups handle.
        self.bus = BusMetrics(self.registry)
        self.http_requests = Counter(
            "disco_http_requests",
            "HTTP requests served, by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "disco_http_request_duration_seconds",
            "Time to serve an HTTP request, by route template.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.http_in_flight = Gauge(
            "disco_http_requests_in_flight",
            "HTTP requests being served now.",
            registry=self.registry,
        )
        self.http_body_rejected = Counter(
            "disco_http_body_rejected",
            "Requests refused because their body exceeded the size limit.",
            registry=self.registry,
        )
        self.readiness = Gauge(
            "disco_dependency_up",
            "1 when the last readiness check of a dependency passed, else 0.",
            ["dependency"],
            registry=self.registry,
        )
        self.outbox_published = Counter(
            "disco_outbox_published",
            "Events the outbox relay published to Kafka.",
            registry=self.registry,
        )
        self.outbox_failures = Counter(
            "disco_outbox_publish_failures",
            "Outbox relay rounds that failed to publish (the rows stay and are retried).",
            registry=self.registry,
        )
        self.outbox_dropped = Counter(
            "disco_outbox_dropped",
            "Outbox rows dropped because they no longer parse as an envelope.",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)
