"""Prometheus metrics of the session streams (on the gateway's ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["StreamMetrics"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class StreamMetrics:
    """How many sockets the instance serves, what it handed them, what slow ones lost."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.sockets = Gauge(
            "disco_gateway_stream_sockets",
            "Session websockets open on this instance.",
            registry=registry,
        )
        self.events = Counter(
            "disco_gateway_stream_events",
            "Session events queued for a socket (one per socket that wants the event).",
            registry=registry,
        )
        self.dropped = Counter(
            "disco_gateway_stream_dropped_events",
            "Session events a socket whose queue was full did not get (it reconciles by replay).",
            registry=registry,
        )
        self.gaps = Counter(
            "disco_gateway_stream_gaps",
            "STREAM_GAP messages sent to sockets that fell behind.",
            registry=registry,
        )
        self.store_seconds = Histogram(
            "disco_gateway_stream_store_seconds",
            "Time to keep one batch of session events in Postgres (before any socket sees it).",
            buckets=_BUCKETS,
            registry=registry,
        )
        self.lag_seconds = Histogram(
            "disco_gateway_stream_lag_seconds",
            "From an event's time (its publisher's clock) to its hand-off to the local sockets.",
            buckets=_BUCKETS,
            registry=registry,
        )
