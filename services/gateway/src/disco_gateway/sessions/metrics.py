"""Prometheus metrics of the session streams (on the gateway's ``/metrics``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["StreamMetrics"]


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
